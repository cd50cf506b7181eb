"""A waiting job's position, ETA and the numbers of its reason live in PendingPlace; the API
shows them exactly as the engine said them, and a cycle whose only news for a job is a moved
position (or ETA, or number) writes no jobs row for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

import scheduler_core as engine
from controlplane.api.serializers import engine_times
from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, PendingPlace
from controlplane.models.jobs import NUMBER_MARK, fill_numbers, split_numbers
from controlplane.services import cycle
from tests.controlplane import factories as f

J = "/api/v1"


@given(st.text())
def test_a_sentence_split_into_words_and_numbers_fills_back_to_itself(text: str) -> None:
    words, numbers = split_numbers(text)
    assert not any(ch in "0123456789" for ch in words)
    assert fill_numbers(words, numbers) == text.replace(NUMBER_MARK, "")


def test_words_keep_their_shape_when_only_the_numbers_move() -> None:
    a = split_numbers("Needs 32 a100-40gb GPUs; 20 are free. Estimated start t=1795966968: 0.25 h.")
    b = split_numbers("Needs 32 a100-40gb GPUs; 12 are free. Estimated start t=1795967001: 0.5 h.")
    assert a[0] == b[0] and a[1] != b[1]
    assert a[1] == ["32", "100", "40", "20", "1795966968", "0.25"]


def _xmin(ids: list[int]) -> dict[int, str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, xmin::text FROM {Job._meta.db_table} WHERE id = ANY(%s)", [ids])
        return dict(cursor.fetchall())


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[engine.Plan]:
    """Every plan the cycle's engine call returns, to compare what the API shows with it."""
    seen: list[engine.Plan] = []
    schedule = cycle.engine.schedule

    def keep(*args: Any, **kwargs: Any) -> engine.Plan:
        plan = schedule(*args, **kwargs)
        seen.append(plan)
        return plan

    monkeypatch.setattr(cycle.engine, "schedule", keep)
    return seen


def _assert_api_says_what_the_engine_said(client: Any, plan: engine.Plan) -> None:
    for e in plan.pending:
        body = client.get(f"{J}/jobs/{e.job_id}/").json()
        if body["state"] != JobState.PENDING:
            continue
        eta = datetime.fromtimestamp(e.eta, tz=UTC) if e.eta else None
        assert body["pending_code"] == e.reason
        assert body["pending_message"] == engine_times(cycle.fit_stored(e.message, cycle.REASON_CHARS))
        assert body["pending_would_start_if"] == engine_times(e.would_start_if[:300])
        assert body["queue_position"] == e.queue_position
        assert body["eta"] == (eta.isoformat().replace("+00:00", "Z") if eta else None)
        why = client.get(f"{J}/jobs/{e.job_id}/explain/").json()
        assert (why["reason_code"], why["reason"], why["queue_position"], why["would_start_if"]) == (
            e.reason, engine_times(e.message[:500]), e.queue_position, engine_times(e.would_start_if[:300]))
        page = client.get(f"{J}/jobs/", {"name": body["name"]}).json()
        # the loop's state is the detail's, as it is the list page's (not its rows')
        loop, listed_loop = body.pop("loop"), page["loop"]
        assert loop["last_cycle_at"] == listed_loop["last_cycle_at"] and loop["stalled"] == listed_loop["stalled"]
        assert [row for row in page["results"] if row["id"] == body["id"]] == [body]


def test_a_moved_position_rewrites_no_job_row_yet_the_api_shows_it(fleet: Any, alice: Any, plans: list) -> None:
    now = timezone.now()
    jobs = [
        f.make_job(fleet.ml, name=f"gang-{i}", gpus=8, gpus_per_node=8, gpu_types=["H100-80GB"],
                   submitted_at=now - timedelta(minutes=30 - i), pending_code="Submitted",
                   pending_message="Waiting for the next scheduling cycle")
        for i in range(7)
    ]
    cycle.run_cycle("worker-1")
    cycle.run_cycle("worker-1")
    waiting = list(Job.objects.filter(pk__in=[j.pk for j in jobs], state=JobState.PENDING).select_related("place"))
    assert len(waiting) >= 3
    _assert_api_says_what_the_engine_said(alice, plans[-1])
    before = {j.pk: (j.pending_code, j.pending_words, j.would_start_if_words, j.queue_position) for j in waiting}
    rows = _xmin(list(before))

    # The head of the queue is cancelled: everyone behind it moves up one place.
    head = min(waiting, key=lambda j: j.queue_position or 0)
    Job.objects.filter(pk=head.pk).update(state=JobState.CANCELLED)
    events = Event.objects.filter(job_id__in=list(before)).count()
    cycle.run_cycle("worker-1")

    after = {j.pk: j for j in Job.objects.filter(pk__in=list(before), state=JobState.PENDING).select_related("place")}
    rows_after = _xmin(list(after))
    same_words = [pk for pk, j in after.items()
                  if (j.pending_code, j.pending_words, j.would_start_if_words) == before[pk][:3]]
    assert same_words, "some job's reason stayed the same: the case under test"
    for pk in same_words:
        assert after[pk].queue_position == before[pk][3] - 1  # moved up...
        assert rows_after[pk] == rows[pk]  # ...without its jobs row being written
    changed = [pk for pk in after if pk not in same_words]
    for pk in changed:
        assert rows_after[pk] != rows[pk]
    # A changed reason is an Event; a moved position is not.
    new_reasons = [pk for pk in changed if after[pk].pending_code != before[pk][0]]
    assert Event.objects.filter(job_id__in=list(before)).count() == events + len(new_reasons)
    assert Event.objects.filter(job_id__in=new_reasons, kind__in=[EventKind.JOB_PENDING, EventKind.JOB_UNSCHEDULABLE]
                                ).count() >= len(new_reasons)
    _assert_api_says_what_the_engine_said(alice, plans[-1])

    # The frontend's live cells read the same place.
    browser = Client()
    browser.force_login(fleet.users["owner"])
    cell = browser.get("/ui/jobs.json", {"ids": ",".join(str(pk) for pk in same_words)})
    assert cell.status_code == 200
    for pk in same_words:
        assert f"#{after[pk].queue_position}" in cell.json()["html"][f"job-state-{pk}"]


def test_a_bound_job_loses_its_place_and_shows_no_position(fleet: Any, alice: Any) -> None:
    job = f.make_job(fleet.ml, gpus=1, queue_position=7, eta=timezone.now() + timedelta(hours=1),
                     pending_code="InsufficientGpus", pending_message="Needs 1 GPUs; 0 are free.")
    assert alice.get(f"{J}/jobs/{job.pk}/").json()["queue_position"] == 7
    cycle.run_cycle("worker-1")
    body = alice.get(f"{J}/jobs/{job.pk}/").json()
    assert body["state"] == JobState.RUNNING
    assert (body["queue_position"], body["eta"], body["pending_message"], body["pending_would_start_if"]) == (
        None, None, "", "")
    assert not PendingPlace.objects.filter(job=job).exists()


def test_a_sentence_stored_before_the_split_reads_as_it_was(fleet: Any, alice: Any) -> None:
    """Rows written before migration 0008 (and the requeue and submit sentences) carry no marks."""
    job = f.make_job(fleet.ml, gpus=1, pending_code="Requeued",
                     pending_message="Requeued whole after being preempted; 1.25 GPU-hours were lost")
    body = alice.get(f"{J}/jobs/{job.pk}/").json()
    assert body["pending_message"] == "Requeued whole after being preempted; 1.25 GPU-hours were lost"
    assert body["queue_position"] is None
