"""`qm list`, `qm explain`, `qm status` and `qm sprio` say when the scheduling loop has stalled or
has never run, as `qm sinfo` does (controlplane/cli/loop_state.py, one sentence). Found on the
operator's walk (7 Dec): with no cycle committed for minutes they showed queue positions, START
and ETAs and the waiting reasons as on a healthy fleet, though all were the dead loop's last word
and nothing would start. Each reads the loop's state from the answer it already asks for (the
`loop` of jobs/, jobs/{id}/explain/ and jobs/priority/, /healthz's); the tables say it on stderr,
so a piped table stays the table, the one-job reports in a line of their own."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import SchedulerLease
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow

NEVER = "No scheduling cycle has run yet: no job starts until the scheduling loop runs (qm config)."


def _last_cycle(at):
    SchedulerLease.objects.update_or_create(name="scheduler", defaults={"last_cycle_at": at})
    return at


def _stalled(last, dated: str = "") -> str:
    """The sentence qm says of a loop whose last cycle committed at `last`, 10 minutes ago."""
    as_of = f"{dated} are as of then, and " if dated else ""
    return (f"The scheduling loop has stalled: no cycle has committed for 10 min (the last at {last:%Y-%m-%d %H:%M:%S} "
            f"UTC); {as_of}no job starts until it runs again (/healthz, qm config).")


def _ten_minutes_ago():
    return _last_cycle((timezone.now() - timedelta(minutes=10)).replace(microsecond=0))


def _waiting(fleet):
    return f.make_job(fleet.ml, fleet.research, name="big", gpus=8, pending_code="QuotaExceeded",
                      pending_message="Team ml's quota is used.", queue_position=1,
                      eta=timezone.now() + timedelta(hours=2))


def test_list_says_on_stderr_when_the_scheduling_loop_has_stalled(alice_qm, fleet) -> None:
    job = _waiting(fleet)
    never = alice_qm("list")
    assert never.code == 0 and never.err.strip() == NEVER, never.err

    _last_cycle(timezone.now())
    healthy = alice_qm("list")
    assert healthy.code == 0 and healthy.err == "", healthy.err
    assert "scheduling loop" not in healthy.out.lower()

    last = _ten_minutes_ago()
    stalled = alice_qm("list")
    assert stalled.code == 0
    assert stalled.err.strip() == _stalled(last, "the positions, start times and reasons above"), stalled.err
    # the table itself is as it was: piped, it parses as before
    assert "scheduling loop" not in stalled.out.lower()
    # its ETA 2 h away, a few seconds less by now: to the nearest minute, as the page says it
    assert re.search(rf"^\s*{job.pk}\s+big\s+.*\bin 2.0 h\s+QuotaExceeded$", stalled.out, re.M), stalled.out
    # none of yours: still said, the loop is down all the same
    none = alice_qm("list", "--name", "no-such-job")
    assert none.out.strip() == "No jobs pending or running (use --all for finished ones)."
    assert none.err.strip() == _stalled(last), none.err

    page = alice_qm("list", "--json").json()
    assert set(page) == {"count", "next", "previous", "loop", "results"}
    assert page["loop"]["stalled"] is True and page["loop"]["last_cycle_age_s"] >= 600
    assert [j["id"] for j in page["results"]] == [job.pk]


def test_explain_and_status_say_when_the_scheduling_loop_has_stalled(alice_qm, fleet) -> None:
    job = _waiting(fleet)
    dated = "its reason, queue position and start above"
    for command in ("explain", "status"):
        never = alice_qm(command, str(job.pk))
        assert never.code == 0 and NEVER in never.out.splitlines()[-1], (command, never.out)

    _last_cycle(timezone.now())
    for command in ("explain", "status"):
        healthy = alice_qm(command, str(job.pk))
        assert healthy.code == 0 and "scheduling loop" not in healthy.out.lower(), (command, healthy.out)

    last = _ten_minutes_ago()
    explained = alice_qm("explain", str(job.pk))
    assert explained.out.splitlines()[-1] == "  " + _stalled(last, dated), explained.out
    assert explained.out.count("scheduling loop") == 1
    status = alice_qm("status", str(job.pk))
    assert status.out.splitlines()[-1] == _stalled(last, dated), status.out
    assert status.out.count("scheduling loop") == 1

    body = alice_qm("explain", str(job.pk), "--json").json()
    assert body["loop"]["stalled"] is True and body["reason_code"] == "QuotaExceeded"

    # a job that no longer waits has no reason, place or ETA of the last cycle's to date
    done = f.make_job(fleet.ml, name="done", state=JobState.SUCCEEDED, finished_at=timezone.now(), exit_code=0)
    assert "scheduling loop" not in alice_qm("status", str(done.pk)).out.lower()

def test_sprio_says_on_stderr_when_the_scheduling_loop_has_stalled(alice_qm, fleet) -> None:
    job = _waiting(fleet)
    assert alice_qm("sprio").err.strip() == NEVER

    _last_cycle(timezone.now())
    healthy = alice_qm("sprio")
    assert healthy.code == 0 and healthy.err == "", healthy.err

    last = _ten_minutes_ago()
    stalled = alice_qm("sprio")
    assert stalled.code == 0 and stalled.out == healthy.out
    assert stalled.err.strip() == _stalled(last), stalled.err
    body = alice_qm("sprio", "--json").json()
    assert body["loop"]["stalled"] is True and [r["job"] for r in body["jobs"]] == [job.pk]
