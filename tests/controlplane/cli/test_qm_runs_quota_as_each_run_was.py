"""`qm runs`' QUOTA is what each run was: the API's `borrowed` is a run's flag now or at its
release, so a run bound within its team's quota that came to count as borrowed while it ran (the
quota lowered under it) read `borrowed` as if it had been bound so. It now reads `own→borrowed`,
and a line under the table says from when and why; a run borrowed from its bind still reads
`borrowed`, one within quota `own`. Since 7 Dec qm reads when and why from the run's own
`borrowed_from` and `borrowed_because` (services/job_runs.py, as the job page does), not from
the job's events."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.signals import request_started
from django.utils import timezone

from controlplane.cli import output
from controlplane.cli.jobs.runs import _quota_cell
from controlplane.models import Quota
from controlplane.services import cycle
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for
from tests.controlplane.job_runs_story import bind_at

pytestmark = pytest.mark.slow


def _quota_cells(out: str) -> list[str]:
    """The QUOTA cell of each run's row (the rows under the header, up to the notes)."""
    lines = out.splitlines()
    at = lines[0].index("QUOTA")
    rows = [line for line in lines[1:] if re.match(r"\s*\d+  ", line)]
    return [line[at:].split()[0] for line in rows]


def test_a_run_that_came_to_count_as_borrowed_reads_own_then_borrowed(alice_qm, fleet) -> None:  # noqa: ANN001
    now = timezone.now()
    older = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="older", gpus=8, runtime_limit_s=4 * 3600)
    newer = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="newer", gpus=8, runtime_limit_s=4 * 3600)
    bind_at(older, [(fleet.nodes[1], range(8), "")], at=now - timedelta(minutes=30))
    bind_at(newer, [(fleet.nodes[2], range(8), "")], at=now - timedelta(minutes=10))
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    lowered = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", {"nominal_gpus": 8},
                                               content_type="application/json")
    assert lowered.status_code == 200, lowered.content
    cycle.run_cycle("worker-1")

    changed = alice_qm("runs", str(newer.pk), "--wide")
    unchanged = alice_qm("runs", str(older.pk), "--wide")

    assert changed.code == 0 and unchanged.code == 0, changed.err + unchanged.err
    assert _quota_cells(changed.out) == ["own→borrowed"], changed.out
    assert "run 1: from " in changed.out and "Now counts as borrowed: team ml holds 16 H100-80GB GPUs" in changed.out
    assert _quota_cells(unchanged.out) == ["own"], unchanged.out


def test_a_run_borrowed_from_its_bind_reads_borrowed(alice_qm, fleet) -> None:  # noqa: ANN001
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="lent", gpus=2)
    bind_at(job, [(fleet.nodes[1], [0, 1], "")], at=timezone.now() - timedelta(minutes=5), borrowed=True)

    r = alice_qm("runs", str(job.pk), "--wide")

    assert r.code == 0, r.err
    assert _quota_cells(r.out) == ["borrowed"], r.out
    assert "Now counts as borrowed" not in r.out


def test_qm_says_when_and_why_from_the_runs_own_fields_without_reading_events(alice_qm, fleet) -> None:  # noqa: ANN001
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="newer", gpus=8, runtime_limit_s=4 * 3600)
    other = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="older", gpus=8, runtime_limit_s=4 * 3600)
    bind_at(other, [(fleet.nodes[1], range(8), "")], at=timezone.now() - timedelta(minutes=30))
    bind_at(job, [(fleet.nodes[2], range(8), "")], at=timezone.now() - timedelta(minutes=10))
    Quota.objects.filter(team=fleet.ml, gpu_type=fleet.h100).update(nominal_gpus=8)
    cycle.run_cycle("worker-1")
    (run,) = client_for(fleet, "owner").get(f"/api/v1/jobs/{job.pk}/runs/").json()["results"]
    assert run["borrowed_from"] != run["bound_at"], run
    paths: list[str] = []

    def heard(sender, environ, **kwargs) -> None:  # noqa: ANN001, ANN003
        paths.append(environ["PATH_INFO"])

    # The live server answers in a thread of this process: each request it serves is heard here.
    request_started.connect(heard)
    try:
        r = alice_qm("runs", str(job.pk), "--wide")
    finally:
        request_started.disconnect(heard)

    assert r.code == 0, r.err
    assert _quota_cells(r.out) == ["own→borrowed"], r.out
    assert f"run 1: from {output.utc_text(run['borrowed_from'])}: {run['borrowed_because']}" in r.out
    assert f"/api/v1/jobs/{job.pk}/runs/" in paths
    assert not [p for p in paths if p.startswith("/api/v1/events/")], paths


@pytest.mark.parametrize(("run", "cell"), [
    ({"borrowed": True, "bound_at": "2026-12-07T10:00:00Z"}, "borrowed"),
    ({"borrowed": False, "bound_at": "2026-12-07T10:00:00Z"}, "own"),
    ({"borrowed": True, "bound_at": "2026-12-07T10:00:00Z", "borrowed_from": None}, "borrowed"),
    ({"borrowed": True, "bound_at": "2026-12-07T10:00:00Z", "borrowed_from": "2026-12-07T10:00:00Z"}, "borrowed"),
    ({"borrowed": True, "bound_at": "2026-12-07T10:00:00Z", "borrowed_from": "2026-12-07T10:20:00Z"},
     "own→borrowed"),
])
def test_a_server_without_borrowed_from_reads_the_plain_flag(run: dict[str, object], cell: str) -> None:
    """A server from before 7 Dec sends no `borrowed_from`: qm reads `borrowed` alone, never
    `own→borrowed`, and does not fail on the missing key."""
    assert _quota_cell(run) == cell
