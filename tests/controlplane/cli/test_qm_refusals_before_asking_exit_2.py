"""What qm refuses itself, before any request, exits 2, as argparse's refusals do (`--limit 0`,
an unknown flag) and as docs/api.md says: a flag's value that is none (`--since garbage`, `--time
abc`), flags that do not go together, a missing argument, a job file that cannot be read. Until
7 Dec these exited 1, the code of the server's refusals and failures, so a script could not tell
a command typed wrong from a job the server refused. Each message names the flag (or the
argument) at fault. No server is asked: QM_URL points at a port nothing listens on, where a
request would fail to connect."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

NOWHERE = "http://127.0.0.1:9"
ARRAY = "3f6c1a9e-0000-4000-8000-000000000000"

REFUSED = [
    # qm history and qm showback: the window, the formats
    (["history", "--since", "garbage"], "--since: 'garbage' is not a time"),
    (["history", "--until", "garbage"], "--until: 'garbage' is not a time"),
    (["history", "--since", "2099-01-01"], "is not in the past"),
    (["history", "--since", "today", "--until", "yesterday"], "is not after --since"),
    (["history", "--xlsx", "/tmp/h.xlsx", "--format", "csv"], "give --xlsx FILE or --format csv, not both"),
    (["showback", "--csv", "--json"], "or --csv (finance's CSV), not both"),
    (["showback", "--xlsx", "/tmp/s.xlsx", "--csv"], "give --xlsx FILE or --csv, not both"),
    (["showback", "--month", "2026-13x"], "--month: '2026-13x' is not a month"),
    # qm submit: its flags and its file
    (["submit", "--time", "abc", "--gpus", "1", "--", "true"], "--time: 'abc' is not a duration"),
    (["submit", "--checkpoint-every", "abc", "--gpus", "1", "--", "true"], "--checkpoint-every: 'abc' is not a duration"),
    (["submit", "--dependency", "bogus:1", "--gpus", "1", "--", "true"], "--dependency bogus:1: "),
    (["submit", "--env", "FOO", "--gpus", "1", "--", "true"], "--env FOO: expected NAME=VALUE"),
    (["submit", "--hold-reason", "x", "--gpus", "1", "--", "true"], "(--hold-reason x): a reason is for a job submitted held"),
    (["submit", "--wrap", "", "--gpus", "1"], "--wrap is empty"),
    (["submit", "--wrap", "x", "--gpus", "1", "--", "y"], "give the command after -- or as --wrap, not both"),
    (["submit", "--", "true"], "a job needs --gpus"),
    (["submit", "/nonexistent/job.yaml"], "cannot read /nonexistent/job.yaml"),
    (["submit", "--json", "--parsable", "--gpus", "1", "--", "true"], "give --json (the API's answer) or --parsable"),
    # qm update
    (["update", "7", "--time", "abc"], "--time: 'abc' is not a duration"),
    (["update", "7"], "name what to change: --gpus, --time"),
    (["update", "7", "--project", "x", "--no-project"], "give --project NAME or --no-project, not both"),
    (["update", "7", "--array-limit", "abc"], "--array-limit abc: a number of tasks"),
    (["update", "7", "--array-limit", "4", "--time", "1h"], "--array-limit changes a whole array: give it alone"),
    (["update", "7", "--dependency", "bogus"], "--dependency bogus: "),
    # qm list, cancel, hold, requeue, status
    (["list", "--mine", "--user", "bob"], "give --mine or --user USER, not both"),
    (["list", "--user", ""], "--user is empty"),
    (["list", "--array", "nope"], "--array: 'nope' is not an array id"),
    (["cancel"], "name the jobs to cancel"),
    (["hold"], "name the jobs to hold"),
    (["cancel", "5", "--array", ARRAY], "give job ids or --array, not both"),
    (["cancel", "-n", ""], "--name is empty"),
    (["cancel", "-u", ""], "--user is empty"),
    (["cancel", "--state", "succeeded"], "--state succeeded: a job that is succeeded cannot be cancelled"),
    (["requeue", "5", "--states", "failed"], "--states picks an array's tasks"),
    (["status", "abc"], "'abc' is not a job id"),
    # qm events and qm logs
    (["events", "--follow"], "--follow watches one job"),
    (["events", "--since", "garbage"], "--since: 'garbage' is not a time"),
    (["events", "5", "--kind", "node.state"], "--kind filter the fleet's events: give no job id"),
    (["events", "5", "--follow", "--interval", "0"], "--interval 0.0: give a number of seconds above 0"),
    (["events", "5", "--exit-with-job"], "--exit-with-job needs --follow"),
    (["logs", "5", "-f", "--interval", "0"], "--interval 0.0: give a number of seconds above 0"),
    (["logs", "5", "--exit-with-job"], "--exit-with-job needs --follow"),
    # qm maint
    (["maint", "add", "--nodes", "a", "--start", "garbage", "--duration", "1h", "--reason", "r"], "--start: 'garbage' is not a time"),
    (["maint", "add", "--nodes", "a", "--start", "4h", "--duration", "1h", "--reason", "r"], "--start: '4h' is a length, not a time"),
    (["maint", "add", "--nodes", "a", "--start", "now", "--duration", "abc", "--reason", "r"], "--duration: 'abc' is not a duration"),
    (["maint", "show", "abc"], "'abc' is not a maintenance window's id"),
    (["maint", "edit", "3"], "Nothing to change: give --nodes"),
    # qm login, notify, nodes, and a command after -- where none is taken
    (["login", "--password-stdin"], "--password-stdin reads the password from standard input: give the user name"),
    (["login", "-u", "alice", "--password-stdin"], "--password-stdin: standard input gave no password"),
    (["login"], "no username: standard input ended before one was typed; give it with --username"),
    (["notify", "rm", "abc"], "'abc' is not a hook id"),
    (["notify", "edit", "3"], "Nothing to change: give --hook-url"),
    (["nodes", "frob", "n1"], "unknown node action 'frob'"),
    (["nodes", "retire"], "`qm nodes retire` needs a node name"),
    (["nodes", "--reason", "x"], "--reason goes with an action"),
    (["nodes", "--all", "--retired"], "--all and --retired do not go together"),
    (["nodes", "return", "n1", "--reason", "x"], "--reason goes with cordon or drain, not return"),
    (["whoami", "--", "echo"], "`qm whoami` takes no command after --"),
]


@pytest.mark.parametrize(("args", "words"), REFUSED, ids=lambda value: "_".join(value) if isinstance(value, list) else "")
def test_what_qm_refuses_before_asking_exits_2_naming_the_flag(qm, args, words) -> None:
    run = qm(*args, url=NOWHERE, stdin="")

    assert run.code == 2, run
    assert words in run.err, run.err
    assert "Traceback" not in run.err and "cannot reach" not in run.err


def test_a_refusal_of_the_server_still_exits_1(alice_qm, fleet) -> None:
    run = alice_qm("status", "999999")

    assert run.code == 1, run
