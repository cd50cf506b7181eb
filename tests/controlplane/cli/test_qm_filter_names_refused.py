"""`qm list --team nope`, `--priority bogus`, `--node nope`, `qm history --team nope`, `qm quotas
--team nope`, `qm cancel --user nope` and `qm maint list --node nope` exited 0 with an empty
list (or "No job matched: nothing cancelled."): a typo read as "no jobs". Each is now an error
naming the flag typed; another team's name reads as a missing one."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("args", "line"), [
    (("list", "--team", "nope"), "  team (--team nope): no team named 'nope' whose jobs you may read"),
    (("list", "--team", "vision"), "  team (--team vision): no team named 'vision' whose jobs you may read"),
    (("list", "--priority", "bogus"),
     "  priority_class (--priority bogus): no priority class named 'bogus': priority classes are production, research"),
    (("list", "--node", "nope"), "  node (--node nope): no node named 'nope'"),
    (("list", "--user", "bob"), "  user (--user bob): no user named 'bob' whose jobs you may read"),
    (("list", "--project", "nope"), "  project (--project nope): no project named 'nope' whose jobs you may read"),
    (("history", "--team", "nope"), "  team (--team nope): no team named 'nope' whose jobs you may read"),
    (("history", "--node", "nope"), "  ran_on (--node nope): no node named 'nope'"),
    (("history", "--team", "nope", "--format", "csv"),
     "  team (--team nope): no team named 'nope' whose jobs you may read"),
    (("quotas", "--team", "nope"), "  team (--team nope): no team named 'nope' that you may read"),
    (("quotas", "--team", "vision"), "  team (--team vision): no team named 'vision' that you may read"),
    (("cancel", "--user", "nope"), "  user (--user nope): no user named 'nope' whose jobs you may read"),
    (("maint", "list", "--node", "nope"), "  node (--node nope): no node named 'nope'"),
])
def test_a_name_that_names_nothing_you_may_see_is_an_error_naming_the_flag(alice_qm, args, line) -> None:
    r = alice_qm(*args)

    assert r.code == 1 and r.out == "", (r.out, r.err)
    assert r.err == f"error: Invalid request.\n{line}\n"


def test_a_name_you_may_see_still_lists(alice_qm) -> None:
    assert alice_qm("list", "--team", "ml").code == 0
    assert alice_qm("list", "--priority", "research", "--node", "h100-1").code == 0
    assert alice_qm("quotas", "--team", "ml").code == 0
    assert alice_qm("cancel", "--user", "alice", "--state", "pending").out == "No job matched: nothing cancelled.\n"
