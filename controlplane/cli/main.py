"""`qm`: submit and watch jobs, explain waits, cancel, read showback, act on nodes.

    qm login [--url URL] [--username NAME] [--password-stdin]
    qm submit [FILE.yaml] [--gpus 16 --gpus-per-node 8 --gpu-type H100-80GB --time 4h
              --priority research --array 0-99 ...] [-- COMMAND ...]
    qm list | qm status [JOB] | qm explain JOB | qm events JOB [--follow [--exit-with-job]] | qm cancel JOB...
    qm events [--since 2h] [--kind node.state] [--node N] [--team T] [--limit N | --all]
    qm runs JOB                                                  # its runs (sacct --duplicates)
    qm hold JOB... | qm release JOB... [--array ID] | qm update JOB --gpus 8 --time 2h --priority high -d afterok:12|none
    qm update ARRAY_ID --array-limit 4|none                      # a job array's task limit (Slurm's %4)
    qm history [--since yesterday] [--until today] [--state failed] [--format csv | --xlsx FILE]   (alias: qm sacct)
    qm requeue JOB... [--hold] [--reason TEXT] [--array ID [--states failed,timed_out]]  # back to the queue
    qm logs JOB [--rank N | --all-ranks] [--tail N] [--generation G] [-f [--exit-with-job]]
    qm showback --by team --window 7d | --month 2026-11 [--csv | --xlsx FILE]
    qm quotas [--team T]
    qm nodes [--all] | qm nodes cordon|drain|uncordon|retire|return NODE | qm cordon|drain|uncordon NODE
    qm notify add HOOK_URL --events started,failed [--team T] | qm notify list | qm notify rm ID | qm notify test ID
    qm notify edit ID [--hook-url URL] [--events E] [--team T | --own-jobs] [--pause | --resume] | qm notify rotate ID
    qm notify history ID
    qm maint add --nodes N1,N2 | --pool P --start +2h|ISO --duration 4h|--end ISO --reason "firmware upgrade"
    qm maint list [--all] [--node N] | qm maint show ID | qm maint edit ID [--start ...] | qm maint cancel ID

Human tables by default, `--json` for scripts. Errors print the API's message and exit 1 (2 when
the server cannot be reached); what qm refuses itself before any request, as argparse does, exits
2 naming the flag (client.UsageError); never a traceback.

This module reads the command line and calls the command. The commands live by group:
account.py (login, logout, whoami), jobs/ (a job from submit to logs, a module a command),
scheduling.py (sprio, sshare, config, quotas), fleet.py (sinfo, nodes), accounting.py (history,
showback), notify.py, maintenance.py (maint); what several of them read alike in arguments.py,
output.py, client.py; how wide a table may be in terminal_width.py; a flag no command takes is
refused in slurm_flags.py.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from controlplane.cli import output, terminal_width
from controlplane.cli.account import cmd_login, cmd_logout, cmd_whoami
from controlplane.cli.accounting import (
    ENDED_STATES,
    HISTORY_FLAGS,
    SHOWBACK_FLAGS,
    cmd_history,
    cmd_showback,
    ended_states_given,
)
from controlplane.cli.client import (
    DEFAULT_URL,
    TIMEOUT_S,
    Api,
    ApiError,
    CliError,
    UsageError,
    refusal,
    request_timeout,
    server_url,
)
from controlplane.cli.fleet import cmd_node_action, cmd_nodes, cmd_sinfo
from controlplane.cli.jobs.actions import ACTION_FLAGS, CANCELLABLE_STATES, cmd_cancel, cmd_hold, cmd_requeue
from controlplane.cli.jobs.events import EVENTS_FLAGS, cmd_events
from controlplane.cli.jobs.explain import cmd_explain
from controlplane.cli.jobs.listing import LIST_FLAGS, cmd_list
from controlplane.cli.jobs.logs import LOGS_FLAGS, cmd_logs
from controlplane.cli.jobs.runs import cmd_runs
from controlplane.cli.jobs.states import states_given
from controlplane.cli.jobs.status import cmd_status
from controlplane.cli.jobs.submit import SUBMIT_FLAGS, cmd_submit
from controlplane.cli.jobs.update import cmd_update
from controlplane.cli.maintenance import MAINT_FLAGS, cmd_maint
from controlplane.cli.notify import NOTIFY_EVENTS, cmd_notify
from controlplane.cli.scheduling import SPRIO_SHOWN, cmd_config, cmd_quotas, cmd_sprio, cmd_sshare
from controlplane.cli.slurm_flags import Parser, flags_typed, refuse_shortened, refuse_unknown

# ------------------------------------------------------------------------------------ parser


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """--url, --timeout and --json, taken before or after the command. The commands' copies have
    no defaults of their own (SUPPRESS), else they would overwrite what was given before the
    command (`qm --json whoami` printed a table, `qm --url … list` asked another server)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", "--server", dest="url", default=None if defaults else argparse.SUPPRESS,
                        help="server URL (default: $QM_URL, else the one you logged in to)")
    common.add_argument("--timeout", metavar="SECONDS", default=None if defaults else argparse.SUPPRESS,
                        help=f"how long to wait for the server's answer (default: $QM_TIMEOUT, else {TIMEOUT_S:g})")
    common.add_argument("--json", action="store_true", default=False if defaults else argparse.SUPPRESS,
                        help="print the API's JSON instead of a table")
    common.add_argument("--wide", action="store_true", default=False if defaults else argparse.SUPPRESS,
                        help="every table column and cell whole: on a terminal a table otherwise shows the columns "
                             "most needed, and a long job name, node state or URL is cut with … to fit its width "
                             "(output to a pipe or file, without COLUMNS, is whole)")
    return common


def _refuse_shortened_timeout(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str]) -> None:
    """argparse takes a flag's unambiguous beginning for the flag, so on a command without a
    `--time` of its own (`qm requeue JOB --time 2h`) `--time` would quietly set --timeout, the
    HTTP timeout, where a runtime limit was meant: --timeout is taken only in full (exit 2)."""
    if args.timeout is None or any(word.split("=")[0] == "--timeout" for word in argv):
        return
    typed = next((word.split("=")[0] for word in argv if word.startswith("--ti")
                  and "--timeout".startswith(word.split("=")[0])), "--timeout")
    refuse_shortened(parser, args, f"{typed} is not taken for --timeout (how long qm waits for the server's "
                                   "answer): give --timeout SECONDS in full")


def _count_or_none(text: str) -> int | str:
    """`qm update`'s --gpus-per-node, --min-gpus, --max-gpus: a number, or `none` to clear the
    job's (null in the API: the scheduler decides how many per node; a rigid job)."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of GPUs, nor none") from None


#: sbatch --mem-per-gpu's units (K, M, G, T; K and M of a whole GB only), in GB, qm's unit.
_SIZE_UNITS_GB = {"k": Fraction(1, 1024 ** 2), "m": Fraction(1, 1024), "g": Fraction(1), "t": Fraction(1024)}
#: ASCII digits only: int() reads other scripts' digits too ('٣٢' is 32).
_SIZE = re.compile(r"([0-9]+)\s*(?:([kmgt])(?:i?b)?)?", re.IGNORECASE)


def _gigabytes(text: str) -> int:
    """A memory flag's size: GB bare (qm's unit), or with sbatch's unit (32G, 32GB, 16384M, 1T).
    `--mem-per-gpu 32G`, as a Slurm user types it, was "invalid int value"; one that is no whole
    number of GB (16000M) is refused naming the whole GB above it, not rounded behind the user's
    back (the API takes whole GB)."""
    typed = text.strip()
    size = _SIZE.fullmatch(typed)
    if not size:
        raise argparse.ArgumentTypeError(
            f"'{typed[:40]}' is not a size: give GB as a number (32) or with its unit, as sbatch takes it: "
            "32G, 16384M, 1T")
    gb = int(size.group(1)) * _SIZE_UNITS_GB[(size.group(2) or "g").lower()]
    if gb.denominator != 1:
        said = f"is not a whole number of GB ({float(gb):.3g} GB)" if gb > 1 else "is less than 1 GB"
        raise argparse.ArgumentTypeError(f"'{typed}' {said}: give {math.ceil(gb)}G")
    return int(gb)


def _whole_number(text: str, what: str, least: int = 1, most: int | None = None) -> int:
    """A count flag's value: a whole number from `least` (to `most`), refused here, before any
    request, naming the flag (exit 2), as argparse refuses a flag it does not know: `qm list
    --limit 0` was sent and refused by the server (exit 1, its field named, not the flag)."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or not least <= int(value) <= (most if most is not None else int(value)):
        within = f"from {least} to {most}" if most is not None else f"of at least {least}"
        raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a whole number {within} ({what})")
    return int(value)


def _exit_code(text: str) -> int:
    """`qm history --exit-code N`: a code a job can end with, 0 to 255 (`--exit-code 300` found
    none, exit 0, as if no job had ended so)."""
    return _whole_number(text, "an exit code; a signal's death is 128 + its number: 137 of SIGKILL", least=0, most=255)


def _latest_count(text: str, what: str = "the latest N runs") -> int:
    """--limit N: a whole number of runs (of jobs: `what`), at least 1."""
    return _whole_number(text, what)


def _jobs_shown(text: str) -> int:
    """qm list's --limit N: how many jobs."""
    return _whole_number(text, "how many jobs")


def _jobs_skipped(text: str) -> int:
    """qm list's --offset N: the jobs to skip (0: none)."""
    return _whole_number(text, "jobs to skip", least=0)


def _last_lines(text: str) -> int:
    """qm logs' --tail N: the last N lines, as many as the API gives (10,000)."""
    return _whole_number(text, "the last N lines", most=10_000)


def _rank(text: str) -> int:
    """qm logs' --rank N: a process's rank."""
    return _whole_number(text, "ranks count from 0", least=0)


def _latest_events(text: str) -> int:
    """qm events' --limit N: the latest N events."""
    return _latest_count(text, "the latest N events")


def _first_jobs(text: str) -> int:
    """sprio's --limit N: the first N jobs in line."""
    return _latest_count(text, "the first N jobs in line")


def _add_shape_flags(p: argparse.ArgumentParser, *, update: bool = False) -> None:
    """The job's shape, as qm submit and qm update both take it (`update`: the fields a job may
    have unset take `none` too, to clear them)."""
    count: Any = _count_or_none if update else int
    p.add_argument("--gpus", "-g", "-G", type=int, help="GPUs in all (sbatch -G, --gpus)")
    cleared = "; none: the scheduler decides" if update else ""
    p.add_argument("--gpus-per-node", type=count, metavar="N|none" if update else None,
                   help="GPUs of each gang member, each member whole on one node (members may share a node: "
                        f"--distinct-nodes keeps them apart); default: the scheduler decides{cleared}")
    p.add_argument("--gpu-type", action="append", help="acceptable GPU type (repeat for several)")
    p.add_argument("--min-gpu-memory", type=_gigabytes, metavar="GB",
                   help="device memory each GPU must have at least: GB (80), or with a unit (80G, 81920M)")
    p.add_argument("--cpus-per-gpu", type=int, metavar="N", help="host CPUs per GPU (sbatch --cpus-per-gpu)")
    p.add_argument("--memory-per-gpu", "--mem-per-gpu", type=_gigabytes, metavar="GB",
                   help="host memory per GPU (sbatch --mem-per-gpu): GB (32), or with sbatch's unit (32G, "
                        "16384M, 1T); a bare number is GB, not sbatch's MB")
    p.add_argument("--topology", choices=["any", "same_node", "same_leaf", "same_spine"],
                   help="how close its GPUs must be: on one node, under one leaf switch, under one spine, or "
                        "anywhere (the default)")
    p.add_argument("--distinct-nodes", action=argparse.BooleanOptionalAction, dest="distinct_nodes",
                   help="each member of the gang on a node of its own (sbatch --ntasks-per-node=1 with "
                        "--gpus-per-node); --no-distinct-nodes: members packed, the default")
    rigid = "; none for both: rigid again" if update else ""
    p.add_argument("--min-gpus", type=count, metavar="N|none" if update else None,
                   help=f"elastic: the fewest GPUs it runs on (give both --min-gpus and --max-gpus){rigid}")
    p.add_argument("--max-gpus", type=count, metavar="N|none" if update else None,
                   help=f"elastic: the most GPUs it grows to (give both --min-gpus and --max-gpus){rigid}")


#: qm logs -f's and qm events -f's opt-in (both exit 0 when the job ends, as docs/api.md promised).
EXIT_WITH_JOB_HELP = ("with --follow, exit as the job did, as srun and sattach do: 0 if it succeeded, else its "
                      "exit code (a failure's N; 143 of one stopped by SIGTERM, cancelled or timed out), or 1 when "
                      "it has none (cancelled before it started, can never run); a requeued job's last run decides. "
                      "Without it a follow exits 0 however the job ended")


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    parser = Parser(prog="qm", description="Quartermaster: GPU jobs from the command line.",
                    parents=[_common_options(defaults=True)])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # No abbreviations here: `--password SECRET` was taken for --password-stdin and only SECRET was
    # refused, printed back to the terminal without a word on how qm takes a password.
    p = sub.add_parser("login", parents=[common], help="get a token and store it", allow_abbrev=False)
    p.add_argument("--username", "-u", help="whose token (default: asked on a terminal)")
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    sub.add_parser("logout", parents=[common], help="revoke the token on the server and forget it here",
                   description="Revoke the stored token on the server it was issued by, then remove it from "
                               "the config file. Each login has its own token, so your other logins (other "
                               "machines, scripts) stay logged in. If the server cannot be reached the "
                               "token is still removed here, with a warning that it stays valid there.")
    sub.add_parser("whoami", parents=[common], help="who the stored token belongs to")

    p = sub.add_parser("submit", parents=[common], help="submit a job or a job array",
                       description="Submit a job: flags, a YAML file of job fields, or both (flags win). "
                       "Anything after -- is the command.")
    p.add_argument("file", nargs="?", help="YAML file with job fields (- for standard input)")
    p.add_argument("--name", "-n", "--job-name", "-J", help="the job's name (sbatch -J); default: its program's")
    _add_shape_flags(p)
    p.add_argument("--time", "-t", help="runtime limit: 4h, 1.5h, 90m, 1d12h, 04:00:00, 1-12:00 (Slurm's D-HH:MM); "
                                        "a bare number is minutes, as sbatch's")
    p.add_argument("--priority", "-p", help="priority class")
    p.add_argument("--project", help="a project of its team, by name (default: none)")
    p.add_argument("--team", "--account", "-A", help="the team it runs for (sbatch -A); default: your default team")
    p.add_argument("--workload", choices=["training", "serving", "interactive", "batch"],
                   help="what kind of work (default: training); serving spreads its members over nodes")
    p.add_argument("--checkpoint-every", metavar="DURATION",
                   help="how often the job checkpoints (preempting it then loses less): 20m, 1h; a bare number is "
                        "seconds (unlike --time's minutes)")
    p.add_argument("--dependency", "-d", metavar="TYPE:JOB[:JOB],...",
                   help="start only once these jobs meet TYPE (Slurm's --dependency): after (started), afterok "
                        "(succeeded), afternotok (failed), afterany (ended); e.g. afterok:12:13,afterany:14. "
                        "JOB may be a job array's id (every task). singleton: only once no other job of yours "
                        "with this name runs or waits ahead of it (one at a time, in submission order); alone "
                        "or among others, e.g. afterok:12,singleton. Joined by ? instead of commas, any one "
                        "is enough: afterok:12?afterok:13 (not mixed with commas). With --array, "
                        "aftercorr:ARRAY_ID: each task after the task of the same index of that array succeeds")
    p.add_argument("--env", "-e", action="append", metavar="NAME=VALUE",
                   help="a variable of its processes' environment (repeat for several)")
    p.add_argument("--array", "-a", help="job array indices: 0-99, 1,3,5, 0-98:2; 0-99%%10 runs at most 10 at a time")
    p.add_argument("--idempotency-key", help="default: a fresh key per invocation, reused on retries")
    p.add_argument("--hold", "-H", action="store_true",
                   help="submit it held: it waits out of the queue until `qm release JOB` (sbatch -H)")
    p.add_argument("--hold-reason", metavar="TEXT", help="with --hold: why it is held, in your words")
    p.add_argument("--wrap", metavar="COMMAND", help="the command as one shell line, as sbatch --wrap (or give it "
                                                    "after --)")
    p.add_argument("--parsable", action="store_true",
                   help="print only the job's id (an array's id), as sbatch --parsable: JOB=$(qm submit --parsable "
                        "...); qm submit -d afterok:$JOB ...")

    for name, helptext in (("list", "your team's jobs (pending and running unless --all)"),
                           ("status", "one job in detail, or the list")):
        p = sub.add_parser(name, aliases=["squeue"] if name == "list" else [], parents=[common], help=helptext)
        if name == "status":
            p.add_argument("job", nargs="?")
        p.add_argument("--state", "-t", action="extend", type=states_given, metavar="STATE[,STATE]",
                       help="only jobs in these states (repeatable), as squeue -t: pending, running, preempting "
                            "(stopping) ..., or Slurm's PD, R, CG, CD, F, CA, TO, in any case")
        p.add_argument("--all", action="store_true", help="include finished jobs")
        p.add_argument("--team", "--account", "-A", help="only this team's jobs (as squeue -A)")
        p.add_argument("--mine", "--me", action="store_true", help="only jobs you submitted (as squeue --me)")
        p.add_argument("--user", "-u", help="only jobs this user submitted (as squeue -u)")
        p.add_argument("--name", "-n", help="only jobs of this name, the whole name as written "
                                                "(as squeue -n; the jobs qm cancel -n cancels)")
        p.add_argument("--project", help="only jobs of this project")
        p.add_argument("--priority", "-p", metavar="CLASS", help="only jobs of this priority class")
        p.add_argument("--reason", metavar="CODE",
                       help="only waiting jobs with this reason, e.g. QuotaExceeded, WaitingForDependency, Held")
        p.add_argument("--array", metavar="ARRAY_ID", help="only the tasks of this job array")
        p.add_argument("--node", "-w", metavar="NODE", help="only the jobs holding GPUs on this node now (-w as squeue's)")
        p.add_argument("--sort", metavar="FIELD[,FIELD]",
                       help="id, submitted_at, gpus, queue_position, priority, name, state, started_at, "
                            "finished_at or elapsed; -FIELD descends (default: newest first)")
        p.add_argument("--limit", type=_jobs_shown, default=50, metavar="N",
                       help="how many jobs (default 50); past 1000 they are read 1000 a request")
        p.add_argument("--offset", type=_jobs_skipped, default=0, metavar="N", help="skip this many jobs (the next page)")

    p = sub.add_parser("explain", parents=[common], help="why a job waits, and what would start it")
    p.add_argument("job")
    p = sub.add_parser("events", parents=[common], help="a job's history (--follow to watch it), or the fleet's "
                                                        "events without a job",
                       description="Every state change of a job, oldest first, with who made it and why "
                                   "(submitted, bound, started, preempted and by whom, requeued, cancelled, "
                                   "finished). With --follow, new events are printed as they happen until the "
                                   "job has finished. Without a job: the fleet's events you may read (admins: "
                                   "all; members: their teams'), nodes' and maintenance windows' too, the latest "
                                   "--limit of them (or --all) oldest first, filtered by --since, --kind, --node "
                                   "and --team (GET /api/v1/events/). --json: a JSON list (with --follow, one "
                                   "JSON object a line).")
    p.add_argument("job", nargs="?", help="the job (none: the fleet's events)")
    p.add_argument("--follow", "-f", action="store_true", help="keep watching until the job has finished")
    p.add_argument("--exit-with-job", action="store_true", help=EXIT_WITH_JOB_HELP)
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="how often --follow asks (default 2)")
    p.add_argument("--since", "-S", metavar="WHEN", help="fleet: events from then on (2h, today, 10:30, an ISO time)")
    p.add_argument("--kind", "-k", action="append", metavar="KIND",
                   help="fleet: these kinds only (node.state, job.preempted, …), comma-separated or repeated")
    p.add_argument("--node", "-w", help="fleet: the events of this node")
    p.add_argument("--team", "-A", help="fleet: the events of this team's jobs")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--limit", "-n", type=_latest_events, metavar="N",
                       help="fleet: the latest N events (default 50; read 1,000 a request)")
    shown.add_argument("--all", action="store_true", help="fleet: every event that matches (read 1,000 a request)")
    p = sub.add_parser("runs", parents=[common], help="a job's runs: each bind, how it ended, GPU-hours, cost, "
                                                      "work lost",
                       description="Every run of a job, oldest first (as sacct --duplicates): when each was bound, "
                                   "started and ended, how it ended (preempted and requeued, fenced off a node, "
                                   "requeued, succeeded, failed ...) and why, its GPUs and nodes, the GPU-hours it "
                                   "held, what it cost (as showback charges it), whether on borrowed quota, and "
                                   "the work its requeue lost. --limit N: its latest N runs only. --json: the "
                                   "API's list.")
    p.add_argument("job")
    p.add_argument("--limit", type=_latest_count, default=None, metavar="N",
                   help="only the latest N runs (still oldest first); default: all of them")
    p = sub.add_parser("logs", parents=[common], help="a job's output (stdout and stderr); -f to follow it",
                       description="A job's output as its processes wrote it (stdout and stderr together), "
                                   "rank 0 of its latest run unless told otherwise. The last 8 MiB of each rank "
                                   "are kept. With --follow, new output is printed as it arrives (every few "
                                   "seconds: it comes with the node's heartbeats) until the job has ended; a "
                                   "requeued job's next run is followed too. Redirected or piped, the output's bytes come "
                                   "as written; on a terminal its escape sequences other than colours are shown "
                                   "as escapes (--raw: as written). --json: the API's replies, one a line.")
    p.add_argument("job")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--rank", type=_rank, metavar="N", help="this process's output (its RANK; default 0)")
    which.add_argument("--all-ranks", action="store_true", help="every rank's, each line marked [rank N]")
    p.add_argument("--generation", type=int, metavar="G", help="this run (default: the latest; qm events lists them)")
    p.add_argument("--tail", type=_last_lines, metavar="N", help="only the last N lines (each rank's)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new output until the job has ended")
    p.add_argument("--exit-with-job", action="store_true", help=EXIT_WITH_JOB_HELP)
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="how often --follow asks (default 2)")
    p.add_argument("--raw", action="store_true",
                   help="on a terminal too, print the output's escape sequences as written; by default a "
                        "terminal gets its colours but sees any other sequence (cursor moves, window title, "
                        "clipboard) as an escape such as \\x1b]52;...")
    p = sub.add_parser("cancel", aliases=["scancel"], parents=[common],
                       help="cancel jobs, or every task of an array",
                       description="Cancel jobs: a pending job at once, a running one is told to stop (its "
                                   "processes get the class's grace period). Every job named is read first: if any "
                                   "names no job you may see or one that has ended, nothing is cancelled (one that ends or starts "
                                   "stopping between that read and its cancel is refused alone). "
                                   "--array cancels every task of an array still pending or running.")
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("--array", metavar="ARRAY_ID", help="every pending or running task of this job array")
    p.add_argument("--name", "-n", help="instead of ids: your jobs of this name, the whole name (scancel -n)")
    p.add_argument("--state", "-t", action="extend", type=states_given, metavar="|".join(CANCELLABLE_STATES),
                   help="instead of ids: your jobs in this state (repeatable; scancel -t, Slurm's PD and R too); "
                        "with --name, of both")
    p.add_argument("--user", "-u", help="with --name or --state: this user's jobs instead of yours (scancel -u); "
                                        "alone: all of that user's waiting and running jobs")
    for verb, helptext, description in (
        ("hold", "keep waiting jobs out of the queue until released",
         "Hold waiting jobs (scontrol hold): they stay pending, out of the queue, holding nothing, until "
         "released. An admin's hold is released only by an admin. A running job cannot be held: cancel it, "
         "or requeue it held (qm requeue --hold JOB). Every job named is read first: if any names no job "
         "you may see or one not waiting, nothing is held (a job already held may be; --reason rewords it)."),
        ("release", "put held jobs back in the queue",
         "Release held jobs (scontrol release): back in the queue from the next scheduling cycle. Every job "
         "named is read first: if any names no job you may see, one not waiting, or an admin's hold you may not "
         "release, nothing is released (a waiting job not held may be named: nothing changes for it)."),
    ):
        p = sub.add_parser(verb, parents=[common], help=helptext, description=description)
        p.add_argument("jobs", nargs="*", metavar="JOB")
        p.add_argument("--array", metavar="ARRAY_ID", help="every waiting task of this job array")
        if verb == "hold":
            p.add_argument("--reason", "-r", metavar="TEXT",
                           help="why, in your words (one line, at most 200 characters), e.g. "
                                "'waiting for dataset v3': its explanation and events say it")
    p = sub.add_parser("requeue", parents=[common], help="put running or ended jobs back in the queue",
                       description="Requeue jobs (scontrol requeue): a running job is told to stop (its processes "
                                   "get its class's grace period, as for a preemption), then waits again with the "
                                   "same id and restarts from its last checkpoint, the work since then counted as "
                                   "lost. An ended job (succeeded, failed, cancelled, timed out) waits again at once "
                                   "with the same id, its earlier runs kept; it is refused while it still holds GPUs, "
                                   "when a dependency of it can never be met, or when it would no longer be accepted "
                                   "as a submit (the field named). --hold: it comes back held until `qm release` "
                                   "(scontrol requeuehold). A waiting or stopping job is refused. Every job named is "
                                   "read first: if any names no job you may see or one that cannot be requeued, "
                                   "nothing is requeued. With qm cordon NODE first, it runs elsewhere.")
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("--array", metavar="ARRAY_ID", help="every running task of this job array")
    p.add_argument("--states", metavar="STATE,...",
                   help="with --array: requeue the tasks in these states instead of the running ones, among "
                        "running, succeeded, failed, cancelled, timed_out (e.g. failed,timed_out: rerun a sweep's "
                        "failed tasks, its running ones left alone)")
    p.add_argument("--hold", "-H", dest="requeue_hold", action="store_true",
                   help="come back held: out of the queue until `qm release JOB`")
    p.add_argument("--reason", "-r", metavar="TEXT",
                   help="why, in your words (one line, at most 200 characters), e.g. 'gpu-07 throws XID 79': its "
                        "reason and events say 'Requeued by you: ...'")
    p = sub.add_parser("update", parents=[common], help="change a waiting job (or a running one's name and limit)",
                       description="Change a job (scontrol update), with qm submit's flags. While it waits: its "
                                   "name, project, priority, limits and shape, checked as a submit of the changed "
                                   "job would be. Once it runs: only --name, and --time lowered (admins may raise "
                                   "it). Prints each change, old -> new.")
    p.add_argument("job")
    p.add_argument("--name", "-n", "--job-name", "-J", help="its new name")
    _add_shape_flags(p, update=True)
    p.add_argument("--time", "--time-limit", "-t", dest="time",
                   help="runtime limit: 4h, 1.5h, 90m, 1d12h, 04:00:00, 1-12:00 (Slurm's D-HH:MM); a bare number is minutes, "
                        "as sbatch's")
    p.add_argument("--priority", "-p", help="priority class")
    p.add_argument("--project", help="move it to this project of its team")
    p.add_argument("--no-project", action="store_true", help="take the job out of its project")
    p.add_argument("--checkpoint-every", metavar="DURATION",
                   help="how often the job checkpoints (preempting it then loses less): 20m, 1h; a bare number is "
                        "seconds (unlike --time's minutes)")
    p.add_argument("--dependency", "-d", metavar="TYPE:JOB[:JOB],...|none|+=...|-=...",
                   help="replace the job's dependencies (scontrol update dependency=), as qm submit -d takes "
                        "them: e.g. afterok:12:13,afterany:14, singleton, or any one of: afterok:12?afterok:13; "
                        "none removes them all. +=LIST adds "
                        "to them, -=LIST removes from them (scontrol's dependency+= and -=): -d +=afterok:5, "
                        "-d -=afterany:7, -d +=singleton; removing one it does not have is refused. Only while "
                        "it waits")
    p.add_argument("--array-limit", metavar="N|none",
                   help="with a job array's id (or one of its tasks' job id) and no other flag: at most N of its "
                        "tasks run at a time, set on every task (scontrol update ArrayTaskThrottle=N, as "
                        "qm submit --array 0-99%%N); none lifts the limit")

    p = sub.add_parser(
        "history", aliases=["sacct"], parents=[common], help="jobs that ended: how, how long, GPU-hours (as sacct)",
        description="The jobs that ended (succeeded, failed, cancelled, timed out) in a window, oldest end first "
                    "(the CSV newest end first, as the history page and the API give it), "
                    "as sacct lists them: state and exit code, start, the last run's elapsed time, GPUs, the "
                    "GPU-hours each held over all its runs (the accounting's allocated GPU-hours), those its "
                    "preemptions and requeues threw away, the nodes it ran on; then the totals. The window is "
                    "[--since, --until): by default from 00:00 UTC today (sacct's default) to now. Times: 2h, 90m, "
                    "3d (that long ago), today, yesterday, now, 10:30 (today, UTC), 2026-11-29, "
                    "2026-11-29T10:00 (UTC unless it gives an offset).")
    p.add_argument("--since", "-S", metavar="WHEN", help="ended at or after (default: 00:00 UTC today)")
    p.add_argument("--until", "-E", metavar="WHEN", help="ended before (default: now)")
    p.add_argument("--state", "-s", action="extend", type=ended_states_given, metavar="STATE[,STATE]",
                   help=f"only jobs that ended so (repeatable; default: every way of ending): {', '.join(ENDED_STATES)}, "
                        "or Slurm's CD, F, CA, TO (sacct -s), in any case")
    p.add_argument("--user", "-u", help="only this user's jobs")
    p.add_argument("--team", "--account", "-A", help="only this team's jobs (as sacct -A)")
    p.add_argument("--node", help="only jobs that ran on this node (in any run), as sacct --nodelist")
    p.add_argument("--name", help="only jobs whose name contains this")
    p.add_argument("--exit-code", type=_exit_code, help="only jobs that ended with this exit code (0 to 255)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default), csv (the server's, as the history page's Download CSV and GET "
                        "jobs/history.csv give it: newest end first, every figure in full, a TOTAL row) or "
                        "json (the API's jobs and the totals)")
    p.add_argument("--xlsx", metavar="FILE",
                   help="save the CSV's rows as an Excel workbook to FILE (a folder: under the server's file name), "
                        "as the history page's Download for Excel: names stay text, figures are numbers")

    p = sub.add_parser("showback", parents=[common], help="cost and GPU-hours allocated, active and productive by team, project, job or class")
    # `class` as the help above says it (and the pages' "Class"): the API's group is priority_class
    p.add_argument("--by", default="team", choices=["team", "project", "job", "priority_class"],
                   type=lambda by: "priority_class" if by.strip().lower() in ("class", "priority-class") else by,
                   help="what a row is (default team); class: the priority class")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--window", default="7d", help="30m, 24h, 7d, 2w (any whole number; m, h, d, w), today, yesterday, in any case, "
                      "or start,end in RFC 3339 (default 7d)")
    when.add_argument("--month", help="a calendar month: 2026-11")
    p.add_argument("--csv", action="store_true", help="finance's CSV, with a TOTAL row")
    p.add_argument("--xlsx", metavar="FILE",
                   help="save the CSV's rows as an Excel workbook to FILE (a folder: under the server's file name, "
                        "which names the period), as the showback page's Download for Excel")

    sub.add_parser("config", parents=[common], help="the scheduling policy in force and the loop's timings",
                   description="As Slurm's scontrol show config: every setting of the scheduling engine as the "
                               "loop runs it (queue order, placement per workload, preemption, backfill, fair "
                               "share half-life, aging, per-cycle caps), the loop's timings and the leader now. "
                               "--json: GET /api/v1/scheduler/policy/.")
    p = sub.add_parser("sinfo", parents=[common], help="the fleet per pool: nodes, GPUs held and free, "
                                                       "fragmentation; the queue's depth",
                       description="As Slurm's sinfo: per pool its GPU type, nodes (whole free, partly used), "
                                   "GPUs (held, free on ready nodes, away on nodes that take no work), the largest "
                                   "free block on one node and the GPUs stranded by fragmentation; then how many "
                                   "jobs wait, for how many GPUs and why, and how many run. --json: the API's "
                                   "metrics/fragmentation/ and metrics/queue/.")

    p = sub.add_parser("sprio", parents=[common], help="waiting jobs in queue order, with what places each there",
                       description="As Slurm's sprio: the waiting jobs you may see in the order the next cycle "
                                   "tries them, each with its priority (its class's value plus the points "
                                   "waiting added), its team's dominant share (fair share: among equal "
                                   "priorities the lower goes first) and its runtime limit. Held jobs and jobs "
                                   "waiting for a dependency are not in line. A job that can never run as asked "
                                   "is marked * and said below the table, with why; one that can start behind "
                                   "such jobs has ORDER 'N (M)': N by priority, M among the jobs that can start "
                                   "(its queue position). The first 50 unless --limit N or "
                                   "--all. --json: the API's answer (GET /api/v1/jobs/priority/: its page, "
                                   "with `count` and `next`; with --all every page's jobs in one answer).")
    p.add_argument("jobs", nargs="*", metavar="JOB", help="only these jobs (as sprio -j): one not in line is said "
                                                          "to be (held, running ...); one that does not exist, or "
                                                          "is not yours to see, is an error (exit 1)")
    p.add_argument("--team", "-A", metavar="TEAM", help="only this team's jobs (as sprio -A): one whose jobs you "
                                                        "may read")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--limit", "-n", type=_first_jobs, default=SPRIO_SHOWN, metavar="N",
                       help=f"the first N jobs in queue order (default {SPRIO_SHOWN}); a line says how many more wait")
    shown.add_argument("--all", action="store_true", help="every job in line you may see (read 1,000 a request)")

    sub.add_parser("sshare", parents=[common], help="every team's fair share, lowest first",
                   description="As Slurm's sshare: per team its dominant share (DRF: the largest of its GPU, "
                               "CPU and memory shares, each what it holds now plus its past usage decayed "
                               "by the half-life, over the fleet's capacity), which resource that is, the "
                               "GPUs it holds now and its decayed GPU-hours. Lowest first: among jobs of "
                               "equal priority the lower share goes first. --json: the API's answer "
                               "(GET /api/v1/scheduler/fair-share/).")

    p = sub.add_parser("quotas", parents=[common], help="your team's quotas and what it holds now",
                       description="Quota per team and GPU type: the nominal guarantee, how many more it may "
                                   "borrow from its cohort and lend to it, the GPUs its running jobs hold now "
                                   "and how many of those are borrowed (beyond the nominal, reclaimable by "
                                   "preemption). Members see their team's; admins and finance every team's.")
    p.add_argument("--team", help="only this team's quotas")

    p = sub.add_parser("nodes", parents=[common], help="the fleet's nodes; qm nodes retire|return NODE (admins)",
                       description="The fleet's nodes (retired ones with --retired, or --all for both). With an action and a node "
                                   "(admins): cordon, drain, uncordon, retire (out of the fleet for good; refused "
                                   "while jobs run there: drain it first) or return (a retired node back to "
                                   "service: down until its agent registers, then cordoned).")
    p.add_argument("action", nargs="?", metavar="ACTION", help="cordon, drain, uncordon, retire or return")
    p.add_argument("node", nargs="?", metavar="NODE")
    p.add_argument("--all", action="store_true", help="list retired nodes too")
    p.add_argument("--retired", action="store_true", help="list only the retired nodes")
    p.add_argument("--reason", help="with cordon or drain: why (Slurm's Reason=), listed by qm nodes")
    for action, helptext in (("cordon", "take no new work"), ("drain", "take no new work, let jobs finish"),
                             ("uncordon", "take work again")):
        p = sub.add_parser(action, parents=[common], help=f"{helptext} (admins)")
        p.add_argument("node")
        if action != "uncordon":
            p.add_argument("--reason", help="why (Slurm's Reason=): in the node's events, listed by qm nodes")

    p = sub.add_parser("notify", parents=[common], help="webhooks for your jobs' events (Slack, ...)",
                       description="Tell a URL when your jobs start, end, fail, are preempted or requeued, or can "
                                   "never run (Slurm's --mail-type, by webhook): an HTTP POST of JSON whose "
                                   "`text` a Slack incoming webhook shows as is, signed with the hook's secret "
                                   "(X-Quartermaster-Signature: sha256=HMAC). Deliveries are retried for about "
                                   "3 hours while the receiver is down.")
    actions = p.add_subparsers(dest="notify_action", required=True, metavar="ACTION")
    q = actions.add_parser("add", parents=[common], help="subscribe a URL",
                           description="Subscribe a hook URL: qm notify add HOOK_URL (or --hook-url HOOK_URL, as "
                                       "qm notify edit takes it). --url is every command's: the Quartermaster "
                                       "server to talk to, never the hook.")
    # not `url`: that is --url, the server's; optional so that `--url HOOK` alone is told so (notify.py)
    q.add_argument("hook_url", metavar="HOOK_URL", nargs="?", help="the URL to POST your jobs' events to")
    q.add_argument("--hook-url", dest="hook_url_flag", metavar="HOOK_URL", help="the same, as a flag")
    q.add_argument("--events", "-e", default="started,succeeded,failed,timed_out,cancelled,preempted,borrowed",
                   help=f"comma-separated: {', '.join(NOTIFY_EVENTS)}; or Slurm's begin, end, fail, requeue, all "
                        "(default: all but requeued and unschedulable)")
    q.add_argument("--team", help="every job of this team of yours (default: the jobs you submit)")
    q.add_argument("--secret", help="the signature's key (default: a random one, printed once)")
    actions.add_parser("list", parents=[common], help="your hooks and how their deliveries go")
    for action, helptext in (("rm", "remove a hook"), ("test", "send a test notification now"),
                             ("rotate", "replace a hook's signing secret with a new random one, printed once"),
                             ("history", "a hook's changes, newest first: who created or changed it, when, what")):
        q = actions.add_parser(action, parents=[common], help=helptext)
        q.add_argument("hook", metavar="ID")
    q = actions.add_parser("edit", parents=[common], help="change a hook's URL, events, team or pause it",
                           description="Change a hook in place: only what you give changes. A new URL is checked "
                                       "as when adding (https, or http to an allowed internal network).")
    q.add_argument("hook", metavar="ID")
    q.add_argument("--hook-url", dest="new_url", metavar="URL",  # not --url: that is the server's
                   help="the hook's new URL")
    q.add_argument("--events", "-e", help=f"the new events, replacing the old: {', '.join(NOTIFY_EVENTS)}; or "
                                          "Slurm's begin, end, fail, requeue, all")
    scope = q.add_mutually_exclusive_group()
    scope.add_argument("--team", help="follow every job of this team of yours")
    scope.add_argument("--own-jobs", action="store_true", help="follow only the jobs you submit (no team)")
    pause = q.add_mutually_exclusive_group()
    pause.add_argument("--pause", dest="active", action="store_false", default=None, help="send nothing until resumed")
    pause.add_argument("--resume", dest="active", action="store_true", help="send again")

    p = sub.add_parser("maint", parents=[common], help="maintenance windows: nodes out of service for a time",
                       description="Maintenance windows (Slurm's maintenance reservations): nodes taken out of "
                                   "service from a start to an end. The scheduler starts a job on them only if its "
                                   "run (start to runtime limit) ends before the window begins, so they are empty "
                                   "then; jobs that could only run there wait with the reason MaintenanceWindow. "
                                   "Running jobs are not stopped: add, edit and show list those that will still "
                                   "hold GPUs when it begins. Everyone lists and shows; admins add, edit, cancel.")
    actions = p.add_subparsers(dest="maint_action", required=True, metavar="ACTION")
    for action, helptext in (("add", "schedule a window (admins)"),
                             ("edit", "move a window, change its nodes or reason (admins)")):
        q = actions.add_parser(action, parents=[common], help=helptext)
        if action == "edit":
            q.add_argument("window", metavar="ID")
        q.add_argument("--nodes", "-w", metavar="N1,N2", help="node names, comma-separated (on edit: they replace "
                                                             "the window's nodes)")
        q.add_argument("--pool", help="every node of this pool (as it is now)")
        q.add_argument("--start", "-s", metavar="WHEN", help="now, +2h (in two hours), 10:30 (today, UTC), "
                                                            "2026-12-02T08:00 (UTC unless it gives an offset); on "
                                                            "edit, a new start alone moves the window whole")
        q.add_argument("--duration", "-d", metavar="LENGTH", help="4h, 90m, 1d12h, 04:00:00 (or --end)")
        q.add_argument("--end", "-e", metavar="WHEN", help="when it ends (or --duration)")
        q.add_argument("--reason", "-r", metavar="TEXT", help="what the maintenance is, e.g. 'firmware upgrade'")
    q = actions.add_parser("list", parents=[common], help="active and upcoming windows (--all: every one)")
    q.add_argument("--all", action="store_true", help="ended and cancelled windows too")
    q.add_argument("--node", help="only the windows that take this node out")
    for action, helptext in (("show", "one window and the running jobs it affects"),
                             ("cancel", "cancel a window: its nodes take any work again (admins)")):
        q = actions.add_parser(action, parents=[common], help=helptext)
        q.add_argument("window", metavar="ID")
    return parser


COMMANDS = {
    "login": cmd_login, "logout": cmd_logout, "whoami": cmd_whoami, "list": cmd_list, "squeue": cmd_list, "status": cmd_status,
    "explain": cmd_explain, "events": cmd_events, "runs": cmd_runs, "logs": cmd_logs, "cancel": cmd_cancel, "scancel": cmd_cancel, "requeue": cmd_requeue, "hold": cmd_hold, "release": cmd_hold, "update": cmd_update, "showback": cmd_showback, "quotas": cmd_quotas, "sprio": cmd_sprio, "sshare": cmd_sshare, "sinfo": cmd_sinfo, "config": cmd_config, "nodes": cmd_nodes,
    "cordon": cmd_node_action, "drain": cmd_node_action, "uncordon": cmd_node_action,
    "history": cmd_history, "sacct": cmd_history, "notify": cmd_notify, "maint": cmd_maint,
}

#: Each command's API fields → the flags that set them, so that a 400 names the flag the user
#: typed (client.refusal): `state (--state runing)`, not `state`. A command that sends no field
#: of a flag's has none; notify names its own (notify._hook_refused).
FIELD_FLAGS = {
    "submit": SUBMIT_FLAGS, "update": SUBMIT_FLAGS,
    "list": LIST_FLAGS, "squeue": LIST_FLAGS, "status": LIST_FLAGS,
    "cancel": ACTION_FLAGS, "scancel": ACTION_FLAGS, "hold": ACTION_FLAGS, "release": ACTION_FLAGS,
    "requeue": ACTION_FLAGS, "logs": LOGS_FLAGS, "events": EVENTS_FLAGS,
    "history": HISTORY_FLAGS, "sacct": HISTORY_FLAGS, "showback": SHOWBACK_FLAGS,
    "quotas": {"team": "team"}, "nodes": {"reason": "reason"}, "cordon": {"reason": "reason"},
    "drain": {"reason": "reason"}, "maint": MAINT_FLAGS,
}


def same_named_flags(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """The command's flags spelled as the API fields they set (`--gpus`: `gpus`), so that a
    refusal of one names the flag typed as FIELD_FLAGS' do (it said `gpus: …` beside
    `runtime_limit_s (--time 8d): …`). Positional arguments are no flags, the options every
    command takes (--url: the server's, --timeout) set no field, and --env is not echoed (its values may be
    secrets; its refusals name the variable)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return {a.dest: a.dest for a in action.choices[command]._actions
                    if "--" + a.dest.replace("_", "-") in a.option_strings
                    and a.dest not in ("help", "url", "timeout", "json", "wide", "env")}
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1:]
    # `--sort -gpus`: argparse takes a value that starts with '-' for an option of its own.
    for i, word in enumerate(argv[:-1]):
        if word == "--sort" and argv[i + 1].startswith("-") and argv[i + 1][1:2].isalpha():
            argv[i:i + 2] = [f"--sort={argv[i + 1]}"]
            break
    # `qm update -d -=afterany:7` (scontrol's dependency-=): the same for a dependency removed.
    for i, word in enumerate(argv[:-1]):
        if word in ("-d", "--dependency") and re.match(r"-=?(after|singleton)", argv[i + 1]):
            argv[i:i + 2] = [f"--dependency={argv[i + 1]}"]
            break
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # refused by the command they were given to, with its usage (exit 2)
        refuse_unknown(parser, args, extras)
    _refuse_shortened_timeout(parser, args, argv)
    args.flags_typed = flags_typed(parser, args, argv)  # a refusal names each flag as typed (client.refusal)
    terminal_width.show_whole(args.wide)
    try:
        timeout_s = request_timeout(args.timeout)
        try:
            api = Api.from_environment(args.url, timeout_s)
        except CliError:
            if args.command != "logout":
                raise
            # An unreadable config file: logout removes it (its token cannot be revoked).
            api = Api(server_url(args.url or os.environ.get("QM_URL") or DEFAULT_URL), None, timeout_s)
        if args.command == "submit":
            return cmd_submit(api, args, command)
        if command:
            raise UsageError(f"`qm {args.command}` takes no command after --")
        return COMMANDS[args.command](api, args)
    except CliError as error:
        if isinstance(error, ApiError):
            error = refusal(error, args, {**same_named_flags(parser, args.command),
                                          **FIELD_FLAGS.get(args.command, {})})
        # Line by line: the field errors' own lines stay lines, any other control character is escaped.
        print("error: " + "\n".join(output.visible(line) for line in str(error).split("\n")), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader stopped early (`qm list | head`, or a follow's reader gone): nothing left
        # to say. Point stdout at /dev/null so no last flush fails again, then end as `cat` or
        # `yes` would, killed by SIGPIPE (Python ignores it, so a write raises instead): the
        # shell says nothing of it, and `set -o pipefail` sees 141, not a list read to its end.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stderr.flush()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
        return 128 + signal.SIGPIPE  # not reached: the signal ends the process


if __name__ == "__main__":
    sys.exit(main())
