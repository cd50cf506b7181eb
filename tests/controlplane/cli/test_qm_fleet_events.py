"""`qm events` without a job: the fleet's events the reader may see, from the API's `events/`
(admins: all; members: their teams'), filtered by --since, --kind, --node and --team, the latest
--limit of them (or --all, read page by page) printed oldest first. Found by the operator review
(7 Dec): an operator had no fleet-wide event view in `qm` (events were per job, fleet-wide only
in the API and the admin)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


@pytest.fixture
def events(fleet) -> dict[str, Event]:
    now = timezone.now()
    # the setup's users (each a UserCreated event, f.trail) are put before every event here
    Event.objects.exclude(pk__in=f.trail()).update(created_at=now - timedelta(days=3))
    job = f.make_job(fleet.ml, name="train")
    theirs = f.make_job(fleet.vision, name="detect")

    def event(name: str, ago: timedelta, kind: str, **fields) -> Event:
        return Event.objects.create(kind=kind, actor="system", message=name, created_at=now - ago, **fields)

    return {
        "old-down": event("old-down", timedelta(days=2), EventKind.NODE_STATE, node=fleet.nodes[1]),
        "down": event("down", timedelta(hours=1), EventKind.NODE_STATE, node=fleet.nodes[1]),
        "other-node": event("other-node", timedelta(minutes=50), EventKind.NODE_STATE, node=fleet.nodes[2]),
        "ml-job": event("ml-job", timedelta(minutes=40), EventKind.JOB_SUBMITTED, job=job, team=fleet.ml),
        "vision-job": event("vision-job", timedelta(minutes=30), EventKind.JOB_SUBMITTED, job=theirs, team=fleet.vision),
    }


def _whats(out: str) -> list[str]:
    """The WHAT cell of each row, in the order printed."""
    return [line.split()[-1] for line in out.splitlines()[1:] if line and not line.startswith("The latest")]


def test_an_admin_reads_the_fleets_events_filtered_oldest_first(qm, events) -> None:
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    every = qm("events")
    assert every.code == 0, every.err
    assert every.out.splitlines()[0].split() == ["TIME", "(UTC)", "EVENT", "JOB", "NODE", "TEAM", "BY", "WHAT"]
    assert _whats(every.out)[-5:] == ["old-down", "down", "other-node", "ml-job", "vision-job"]

    assert _whats(qm("events", "--since", "2h").out) == ["down", "other-node", "ml-job", "vision-job"]
    assert _whats(qm("events", "--since", "2h", "--kind", "node.state").out) == ["down", "other-node"]
    assert _whats(qm("events", "--node", "h100-1").out) == ["old-down", "down"]
    assert _whats(qm("events", "--team", "vision").out) == ["vision-job"]
    row = next(line for line in qm("events", "--team", "ml").out.splitlines() if line.endswith("ml-job"))
    assert row.split()[2:6] == ["job.submitted", str(events["ml-job"].job_id), "-", "ml"], row


def test_the_latest_n_and_all_read_page_by_page(qm, events) -> None:
    now = timezone.now()
    Event.objects.bulk_create(Event(kind=EventKind.NODE_STATE, actor="system", message=f"bulk-{i}",
                                    created_at=now - timedelta(minutes=20, seconds=-i)) for i in range(1100))
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    latest = qm("events", "--since", "2h", "--limit", "3")
    assert _whats(latest.out) == ["bulk-1097", "bulk-1098", "bulk-1099"]
    assert "The latest 3 of 1,104 events; --limit N or --all for more" in latest.out

    every = qm("events", "--since", "2h", "--all", "--json")
    assert every.code == 0, every.err
    assert len(every.json()) == 1104 and len({e["id"] for e in every.json()}) == 1104   # two pages, none twice
    assert [e["message"] for e in every.json()][:4] == ["down", "other-node", "ml-job", "vision-job"]


def test_a_member_reads_their_teams_events_and_a_bad_filter_names_its_flag(alice_qm, events) -> None:
    mine = alice_qm("events", "--since", "2h")
    assert mine.code == 0, mine.err
    assert "ml-job" in _whats(mine.out) and "vision-job" not in _whats(mine.out)

    refused = alice_qm("events", "--kind", "node.stat")
    assert refused.code == 1 and "kind (--kind node.stat): 'node.stat' is not a valid choice" in refused.err, refused.err
    refused = alice_qm("events", "--team", "vision")
    assert refused.code == 1 and "no team named 'vision' whose events you may read" in refused.err, refused.err
    refused = alice_qm("events", "--since", "lately")
    assert refused.code == 2 and "--since: 'lately' is not a time" in refused.err, refused.err


def test_a_jobs_events_take_no_fleet_filter(alice_qm, events) -> None:
    job = events["ml-job"].job_id
    assert "ml-job" in alice_qm("events", str(job)).out
    refused = alice_qm("events", str(job), "--kind", "job.submitted")
    assert refused.code == 2 and "--kind filter the fleet's events: give no job id" in refused.err, refused.err
    refused = alice_qm("events", "--follow")
    assert refused.code == 2 and "--follow watches one job" in refused.err, refused.err
