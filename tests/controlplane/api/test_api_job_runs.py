"""GET /api/v1/jobs/{id}/runs/: a job's runs, oldest first (as `sacct --duplicates` lists a requeued
job's), each with how it ended, its GPUs, the GPU-hours it held, its borrowed quota and the work
its requeue lost; as visible as the job itself, paged as events/, in a fixed number of queries."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import schemathesis
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job
from controlplane.services import reconcile, transitions
from controlplane.wsgi import application
from tests.controlplane import factories as f
from tests.controlplane.api.schema_fuzz import _fuzz_operation, keep_test_connection  # noqa: F401
from tests.controlplane.job_runs_story import NOTICE, bind_at, preempted_then_succeeded

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def _job(fleet: Any, **kw: Any) -> Job:
    return f.make_job(fleet.ml, submitter=fleet.users["owner"], **{"name": "train-7b", "gpus": 2, **kw})


def _iso(at: Any) -> str:
    return at.isoformat().replace("+00:00", "Z")


def test_a_job_preempted_requeued_and_run_again_lists_its_runs_oldest_first(fleet, alice) -> None:
    now = timezone.now()
    job = _job(fleet)
    story = preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=now)
    # Requeued after it ended (RequeuedAfterEnd), and running again on h100-1.
    r = alice.post(f"{J}{job.pk}/requeue/", {"reason": "one more epoch"}, format="json")
    assert r.status_code == 200, r.content[:400]
    run3 = bind_at(job, [(fleet.nodes[1], [0, 1], "")], at=now - timedelta(minutes=10))

    r = alice.get(f"{J}{job.pk}/runs/")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert body["count"] == 3 and body["next"] is None
    first, second, third = body["results"]
    assert [x["run"] for x in body["results"]] == [1, 2, 3]
    assert [x["generation"] for x in body["results"]] == [
        story.preempted.generation, story.succeeded.generation, run3.generation]
    # 1: preempted, requeued, its work since the checkpoint lost; on borrowed quota.
    t0 = story.t0
    assert first["bound_at"] == _iso(t0)
    assert first["started_at"] == _iso(t0 + timedelta(minutes=1))
    assert first["ended_at"] == _iso(t0 + timedelta(minutes=90, seconds=30))
    assert (first["state"], first["reason"], first["outcome"]) == ("released", "Preempted", "requeued")
    assert first["ended_how"] == "Preempted; requeued"
    assert first["notice"].startswith(NOTICE)
    assert first["exit_code"] == 143  # as its agents reported it: stopped by SIGTERM
    assert (first["gpus"], first["nodes"], first["borrowed"]) == (2, ["h100-1"], True)
    assert first["placement"] == [{"node": "h100-1", "gpu_indices": [0, 1], "role": ""}]
    assert first["gpu_hours"] == pytest.approx(2 * 5430 / 3600, abs=1e-4)  # 3.0167
    assert first["lost_gpu_hours"] == pytest.approx(2 * 1830 / 3600, abs=1e-4)  # 1.0167
    assert first["elapsed_s"] == 5430  # from its bind, as its GPU-hours (from its agents' report, 60 s later, before)
    assert first["requeued_after_end"] is None
    # 2: ran to success, then the job was put back in the queue after it ended.
    assert (second["reason"], second["outcome"], second["exit_code"]) == ("Exited", "succeeded", 0)
    assert second["ended_how"] == "Succeeded (exit code 0)"
    assert second["notice"] == ""
    assert (second["nodes"], second["borrowed"], second["lost_gpu_hours"]) == (["h100-2"], False, None)
    assert second["gpu_hours"] == pytest.approx(4.0, abs=1e-4)
    assert second["elapsed_s"] == 2 * 3600
    after = second["requeued_after_end"]
    assert (after["by"], after["reason"], after["held"]) == ("alice", "one more epoch", False)
    # 3: running now, its GPU-hours counted to now.
    assert (third["state"], third["reason"], third["outcome"], third["ended_at"]) == ("active", "", "running", None)
    assert third["gpu_hours"] == pytest.approx(2 * 600 / 3600, abs=0.01)
    # What the job says overall agrees: requeued twice, once preempted, lost work as run 1's.
    detail = alice.get(f"{J}{job.pk}/").json()
    assert (detail["requeue_count"], detail["preemption_count"]) == (2, 1)
    assert detail["lost_gpu_hours"] == pytest.approx(first["lost_gpu_hours"], abs=1e-4)


def test_pages_keep_the_run_numbers_of_the_whole_list(fleet, alice) -> None:
    job = _job(fleet)
    story = preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())

    r = alice.get(f"{J}{job.pk}/runs/", {"limit": 1, "offset": 1})

    assert r.status_code == 200
    body = r.json()
    assert body["count"] == 2 and body["previous"] is not None and body["next"] is None
    assert [(x["run"], x["generation"]) for x in body["results"]] == [(2, story.succeeded.generation)]


def test_a_job_that_never_ran_has_no_runs(fleet, alice) -> None:
    job = _job(fleet)
    body = alice.get(f"{J}{job.pk}/runs/").json()
    assert (body["count"], body["results"]) == (0, [])


def test_another_teams_member_gets_the_404_the_job_itself_gives(fleet, clients) -> None:
    job = _job(fleet)
    preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())
    bob = clients["other_team"]

    runs, detail = bob.get(f"{J}{job.pk}/runs/"), bob.get(f"{J}{job.pk}/")

    assert runs.status_code == detail.status_code == 404
    assert runs.json() == detail.json()
    assert f"No job {job.pk}, or not yours to see." in runs.json()["detail"]
    assert clients["anonymous"].get(f"{J}{job.pk}/runs/").status_code == 401
    assert clients["admin"].get(f"{J}{job.pk}/runs/").json()["count"] == 2
    missing = clients["owner"].get(f"{J}999999/runs/")
    assert missing.status_code == 404 and "No job 999999" in missing.json()["detail"]


@pytest.mark.parametrize(("query", "field"), [
    ({"limit": "abc"}, "limit"), ({"limit": "0"}, "limit"), ({"offset": "-1"}, "offset"),
    ({"offset": "1.5"}, "offset"), ({"state": "running"}, "state"), ({"limit": "0" * 30}, "limit"),
])
def test_bad_query_parameters_are_a_400_naming_them(fleet, alice, query, field) -> None:
    job = _job(fleet)
    r = alice.get(f"{J}{job.pk}/runs/", query)
    assert r.status_code == 400, r.content[:300]
    assert field in r.json()["errors"], r.json()


def _gang_run(job: Job, fleet: Any, i: int, at: Any) -> None:
    """One run of `job` across two nodes with roles, preempted and requeued."""
    run = bind_at(job, [(fleet.nodes[4], [0], "ps"), (fleet.nodes[5], [0, 1], "worker")], at=at)
    transitions.signal_stop(run.pk, run.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                            at=at + timedelta(seconds=50), actor="scheduler", message=f"Preempted {i}")
    transitions.complete_release(run.pk, exit_code=143, at=at + timedelta(seconds=55), actor="agent:test")


def test_the_runs_are_read_in_a_fixed_number_of_queries(fleet, alice) -> None:
    f.make_price_rate(fleet.a100, "1.2000")
    counts = {}
    for runs in (1, 25):
        job = _job(fleet, gpus=3)
        start = timezone.now() - timedelta(hours=1)
        for i in range(runs):
            _gang_run(job, fleet, i, start + timedelta(seconds=60 * i))
        with CaptureQueriesContext(connection) as queries:
            r = alice.get(f"{J}{job.pk}/runs/")
        assert r.status_code == 200 and r.json()["count"] == runs
        counts[runs] = len(queries)
        last = r.json()["results"][-1]
        assert last["roles"] == {"ps": 1, "worker": 2} and last["nodes"] == ["a100-0", "a100-1"]
        assert last["gpus"] == 3 and last["gpu_hours"] == pytest.approx(3 * 55 / 3600, abs=1e-4)
        assert last["ended_how"] == "Preempted; requeued" and last["notice"] == f"Preempted {runs - 1} (on a100-0, a100-1)"
        # Each run: 3 GPUs × 55 s × $1.20/h = $0.055; the cents are rounded cumulatively so the runs
        # add up to the total ($0.06 for one; 25 × $0.055 = $1.375, $1.38: 13 runs at $0.06).
        costs = [Decimal(str(x["cost_usd"])) for x in r.json()["results"]]
        assert sum(costs) == Decimal(str(r.json()["total_cost_usd"])) == {1: Decimal("0.06"), 25: Decimal("1.38")}[runs]
        assert costs.count(Decimal("0.06")) == {1: 1, 25: 13}[runs]
    # token, job, count, the page, its GPUs, its events; what all its runs cost: their spans, gang
    # members' early exits, the changes of their borrowed flag (accounting.held_spans), the price
    # rates
    assert counts[1] == counts[25] == 10, counts


def test_a_gang_member_that_ended_early_stops_counting_then(fleet, alice) -> None:
    """As the accounting counts allocated time: h100-2's GPUs were free from the member's exit."""
    from controlplane.choices import EventKind

    job = _job(fleet, gpus=4)
    at = timezone.now() - timedelta(hours=2)
    run = bind_at(job, [(fleet.nodes[1], [0, 1], ""), (fleet.nodes[2], [0, 1], "")], at=at)
    AllocationGpu.objects.filter(allocation=run, node=fleet.nodes[2]).update(live=False)
    transitions.record_event(EventKind.ALLOCATION_RELEASED, "agent:h100-2", job=job, allocation=run,
                             node=fleet.nodes[2], at=at + timedelta(hours=1), reason="MemberExited",
                             data={"generation": run.generation, "exit_code": 0, "gpus": 2, "stopping": False})
    assert transitions.complete_release(run.pk, exit_code=0, at=at + timedelta(hours=2), actor="agent:h100-1")

    (row,) = alice.get(f"{J}{job.pk}/runs/").json()["results"]

    assert row["gpu_hours"] == pytest.approx(2 * 2 + 2 * 1, abs=1e-4)
    assert row["outcome"] == "succeeded" and row["nodes"] == ["h100-1", "h100-2"]


def test_a_fenced_run_keeps_its_own_generation_and_says_which_node_stopped_answering(fleet, alice) -> None:
    job = _job(fleet)
    at = timezone.now() - timedelta(minutes=30)
    run = bind_at(job, [(fleet.nodes[3], [5, 6], "")], at=at)
    from django.db import transaction

    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        assert transitions.fence_allocation(run.pk, lease=lease, at=at + timedelta(minutes=20), actor="reconcile",
                                            reason="NodeLeaseExpired")
    fenced_to = Allocation.objects.get(pk=run.pk).generation
    assert fenced_to != run.generation

    (row,) = alice.get(f"{J}{job.pk}/runs/").json()["results"]

    assert (row["generation"], row["fenced_generation"]) == (run.generation, fenced_to)
    assert (row["state"], row["reason"], row["outcome"]) == ("fenced", "NodeLeaseExpired", "requeued")
    assert row["ended_how"] == "Fenced off h100-3, which stopped answering; requeued"
    assert row["gpu_hours"] == pytest.approx(2 * 20 / 60, abs=1e-4)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_the_schema_describes_the_runs_and_generated_requests_find_no_fault(fleet, keep_test_connection) -> None:  # noqa: F811
    job = _job(fleet)
    preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())
    headers = {"Authorization": f"Token {f.token_for(fleet.users['owner'])}"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers)
    operation = schema["/api/v1/jobs/{id}/runs/"]["GET"]
    # The job that has runs, and any id the fuzzer draws (mostly a 404).
    explicit = operation.Case(path_parameters={"id": job.pk}, headers=headers)
    response = explicit.call()
    assert response.status_code == 200 and response.json()["count"] == 2
    explicit.validate_response(response)
    _fuzz_operation(operation, {"owner": headers}, {"/api/v1/jobs/": [job.pk]})


def _stopped(fleet: Any, alice: Any, how: str) -> Job:
    """A job run once on h100-1 for an hour and stopped `how`, its processes gone 20 s later."""
    job = _job(fleet)
    at = timezone.now() - timedelta(hours=1)
    run = bind_at(job, [(fleet.nodes[1], [0, 1], "")], at=at)
    stop = at + timedelta(minutes=30)
    if how == "requeued":
        assert alice.post(f"{J}{job.pk}/requeue/", {"reason": "XID 79 on h100-1"}, format="json").status_code == 200
    elif how == "cancelled":
        assert transitions.cancel_job(job, "user:alice", at=stop)
    else:
        reason = {"resized": transitions.RELEASE_RESIZED, "timed_out": transitions.RELEASE_RUNTIME_LIMIT,
                  "gang_failed": "GangMemberFailed"}[how]
        assert transitions.signal_stop(run.pk, run.generation, reason=reason, grace_period_s=30, at=stop,
                                       actor="scheduler", message=f"Stopping: {how}")
    code = 1 if how == "gang_failed" else 143
    assert transitions.complete_release(run.pk, exit_code=code, at=stop + timedelta(seconds=20), actor="agent:test")
    return job


@pytest.mark.parametrize(("how", "reason", "outcome", "words", "lost"), [
    ("resized", "Resized", "requeued", "Stopped to resize; requeued", True),
    ("requeued", "Requeued", "requeued", "Requeued by alice: XID 79 on h100-1", True),
    ("cancelled", "Cancelled", "cancelled", "Cancelled", False),
    ("timed_out", "RuntimeLimitExceeded", "timed_out", "Timed out at its runtime limit", False),
    ("gang_failed", "GangMemberFailed", "failed", "A gang member failed; the job failed (exit code 1)", False),
])
def test_each_way_a_run_ends_is_said_with_its_code_and_words(fleet, alice, how, reason, outcome, words, lost) -> None:
    job = _stopped(fleet, alice, how)

    (row,) = alice.get(f"{J}{job.pk}/runs/").json()["results"]

    assert (row["state"], row["reason"], row["outcome"], row["ended_how"]) == ("released", reason, outcome, words)
    assert (row["lost_gpu_hours"] is not None) is lost
    if how == "requeued":
        assert row["notice"].startswith("Requeued by alice: XID 79 on h100-1")
    elif how == "cancelled":
        assert row["notice"].startswith("Cancelled by alice")


SHOWBACK = "/api/v1/showback/"


def _showback_cost(client: Any, group_by: str, name: str) -> Decimal:
    body = client.get(SHOWBACK, {"window": "1d", "group_by": group_by}).json()
    return Decimal(str(body["data"][0][name]["gpuCost"]))


def test_each_run_costs_what_showback_charges_across_gpu_types_and_a_price_change(fleet, clients) -> None:
    """Run 1 on H100s across a price change ($2.50, then $3.10 from 30 min in), run 2 on A100s
    ($1.73): each run's cost is its GPU time at the rate in force at each instant, and the runs
    add up to what showback charges the job and its project, and what the job page says, once the
    rollup has caught up. A rate added afterwards with effect from the past (a repricing) moves
    the run and showback alike."""
    from controlplane.services import accounting, job_costs

    alice, finance = clients["owner"], clients["finance"]
    now = timezone.now()
    job = _job(fleet, project=fleet.llm)
    t0 = now - timedelta(hours=5)
    f.make_price_rate(fleet.h100, "3.1000", effective_from=t0 + timedelta(minutes=30))
    f.make_price_rate(fleet.a100, "1.7300")
    story = preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[4], now=now)
    assert story.t0 == t0
    accounting.catch_up(timezone.now())

    body = alice.get(f"{J}{job.pk}/runs/").json()

    first, second = body["results"]
    # 2 GPUs × 30 min × $2.50 + 2 GPUs × 3,630 s × $3.10/h = $2.50 + $6.2517 = $8.7517
    assert (first["nodes"], first["cost_usd"]) == (["h100-1"], 8.75)
    # 2 GPUs × 2 h × $1.73
    assert (second["nodes"], second["cost_usd"]) == (["a100-0"], 6.92)
    assert body["total_cost_usd"] == 15.67
    assert _showback_cost(alice, "job", str(job.pk)) == Decimal("15.67")
    assert _showback_cost(finance, "project", "ml/llm") == Decimal("15.67")
    assert job_costs.job_cost(job.pk)["cost_usd"] == Decimal("15.67")

    # Finance learns the A100s cost $2.00 from the second run's second hour on: repriced.
    f.make_price_rate(fleet.a100, "2.0000", effective_from=t0 + timedelta(hours=3))
    accounting.reprice(t0 + timedelta(hours=3), timezone.now())

    body = alice.get(f"{J}{job.pk}/runs/").json()
    assert [x["cost_usd"] for x in body["results"]] == [8.75, 3.46 + 4.00]
    assert body["total_cost_usd"] == 16.21
    assert _showback_cost(alice, "job", str(job.pk)) == Decimal("16.21")


def test_a_running_run_costs_to_now_and_time_before_any_price_is_free(fleet, alice) -> None:
    """As the accounting: GPU time before its type's first rate costs nothing (the A100s here
    have none), and a run holding GPUs is costed to the moment of the answer."""
    job = _job(fleet)
    bind_at(job, [(fleet.nodes[4], [0, 1], "")], at=timezone.now() - timedelta(hours=1))
    (row,) = alice.get(f"{J}{job.pk}/runs/").json()["results"]
    assert (row["state"], row["cost_usd"]) == ("active", 0.0)

    other = _job(fleet)
    bind_at(other, [(fleet.nodes[1], [0, 1], "")], at=timezone.now() - timedelta(hours=1))
    body = alice.get(f"{J}{other.pk}/runs/").json()
    # 2 GPUs × 1 h (and the moments of the request) × $2.50
    assert body["results"][0]["cost_usd"] == body["total_cost_usd"] == pytest.approx(5.00, abs=0.011)


def test_a_limit_or_offset_of_thousands_of_digits_is_no_500(fleet, alice) -> None:
    """More digits than Python reads into an int (4,300) answered a 500. Such an offset is
    beyond 2⁶³−1, a 400 naming it (until 5 Dec it was read as past the end, capped at a
    billion: test_api_pages_past_the_end.py); such a limit is 1,000, as any above it."""
    job = _job(fleet)
    preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())
    far = alice.get(f"{J}{job.pk}/runs/", {"offset": "9" * 5000})
    assert far.status_code == 400 and list(far.json()["errors"]) == ["offset"]
    many = alice.get(f"{J}{job.pk}/runs/", {"limit": "9" * 5000})
    assert many.status_code == 200 and len(many.json()["results"]) == 2


def test_a_later_page_still_says_what_all_the_runs_cost(fleet, alice) -> None:
    job = _job(fleet)
    preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())
    whole = alice.get(f"{J}{job.pk}/runs/").json()
    page = alice.get(f"{J}{job.pk}/runs/", {"limit": 1, "offset": 1}).json()
    # 2 × 5,430 s and 2 × 2 h at $2.50: $7.54 and $10.00
    assert [x["cost_usd"] for x in whole["results"]] == [7.54, 10.00]
    assert page["total_cost_usd"] == whole["total_cost_usd"] == 17.54
    assert [x["cost_usd"] for x in page["results"]] == [10.00]
    assert list(page) == ["count", "next", "previous", "total_cost_usd", "results"]


def test_a_gang_across_gpu_types_with_a_member_gone_early_and_a_price_change_mid_minute(fleet, alice) -> None:
    """Run 1: a gang of 2 H100s (h100-1) and 2 A100s (a100-0) whose A100 member exits 40 min in,
    preempted at 90 min; the H100 price moves from $2.50 to $3.3333 at 60 min 30 s (inside a
    minute). Run 2: 4 H100s, still running. Each run is priced by hand; and at one instant the
    runs' total is to the cent what the rollup charges the job for its minutes (`job_cost`)."""
    from controlplane.choices import EventKind
    from controlplane.services import accounting, job_costs

    now = timezone.now()
    t0 = accounting.floor_to(now, accounting.MINUTE) - timedelta(hours=3)
    f.make_price_rate(fleet.h100, "3.3333", effective_from=t0 + timedelta(minutes=60, seconds=30))
    f.make_price_rate(fleet.a100, "1.7300")
    job = _job(fleet, gpus=4)
    run1 = bind_at(job, [(fleet.nodes[1], [0, 1], ""), (fleet.nodes[4], [0, 1], "")], at=t0)
    AllocationGpu.objects.filter(allocation=run1, node=fleet.nodes[4]).update(live=False)
    transitions.record_event(EventKind.ALLOCATION_RELEASED, "agent:a100-0", job=job, allocation=run1,
                             node=fleet.nodes[4], at=t0 + timedelta(minutes=40), reason="MemberExited",
                             data={"generation": run1.generation, "exit_code": 0, "gpus": 2, "stopping": False})
    assert transitions.signal_stop(run1.pk, run1.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                                   at=t0 + timedelta(minutes=89), actor="scheduler", message="Preempted")
    assert transitions.complete_release(run1.pk, exit_code=143, at=t0 + timedelta(minutes=90), actor="agent:test")
    bind_at(job, [(fleet.nodes[2], [0, 1, 2, 3], "")], at=t0 + timedelta(hours=2))

    before = timezone.now()
    first, second = alice.get(f"{J}{job.pk}/runs/").json()["results"]
    after = timezone.now()

    # 2 × 3,630 s × $2.50 + 2 × 1,770 s × $3.3333 + 2 × 2,400 s × $1.73, per hour
    exact = (2 * 3630 * Decimal("2.50") + 2 * 1770 * Decimal("3.3333") + 2 * 2400 * Decimal("1.73")) / 3600
    assert first["cost_usd"] == float(exact.quantize(Decimal("0.01"))) == 10.63
    assert first["gpu_hours"] == pytest.approx((2 * 90 + 2 * 40) / 60, abs=1e-4)
    # 4 H100s at $3.3333 from 2 h in to the answer (within a cent of its own rounding)
    held = [(moment - t0 - timedelta(hours=2)).total_seconds() for moment in (before, after)]
    assert second["outcome"] == "running"
    assert 4 * held[0] * 3.3333 / 3600 - 0.011 <= second["cost_usd"] <= 4 * held[1] * 3.3333 / 3600 + 0.011

    at = timezone.now()
    accounting.catch_up(at)
    costs = job_costs.run_costs(job.pk, at)
    assert costs.total_usd == job_costs.job_cost(job.pk)["cost_usd"]
    assert costs.of(run1.pk) == Decimal("10.63") and sum(costs.usd.values()) == costs.total_usd


def test_a_run_bound_within_quota_that_came_to_count_as_borrowed_says_from_when_and_why(fleet, alice) -> None:
    """`borrowed` is a run's flag now or at its release; `borrowed_from` says since when it
    counted as borrowed: its bind for a run bound borrowed, the scheduler's job.borrowing event
    for one bound within its team's quota (the quota lowered under it), null for one on its own."""
    from controlplane.choices import EventKind
    from controlplane.models import Event, Quota
    from controlplane.services import cycle
    from tests.controlplane.fleet_fixture import client_for

    now = timezone.now()
    older = _job(fleet, name="older", gpus=8, runtime_limit_s=4 * 3600)
    newer = _job(fleet, name="newer", gpus=8, runtime_limit_s=4 * 3600)
    lent = _job(fleet, name="lent", gpus=2)
    bind_at(older, [(fleet.nodes[1], range(8), "")], at=now - timedelta(minutes=30))
    marked = bind_at(newer, [(fleet.nodes[2], range(8), "")], at=now - timedelta(minutes=10))
    borrowed = bind_at(lent, [(fleet.nodes[3], [0, 1], "")], at=now - timedelta(minutes=5), borrowed=True)
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    lowered = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", {"nominal_gpus": 8},
                                               content_type="application/json")
    assert lowered.status_code == 200, lowered.content
    cycle.run_cycle("worker-1")
    event = Event.objects.get(kind=EventKind.JOB_BORROWING, allocation_id=marked.pk)

    (own,) = alice.get(f"{J}{older.pk}/runs/").json()["results"]
    (became,) = alice.get(f"{J}{newer.pk}/runs/").json()["results"]
    (bound,) = alice.get(f"{J}{lent.pk}/runs/").json()["results"]

    assert (own["borrowed"], own["borrowed_from"], own["borrowed_because"]) == (False, None, "")
    assert (became["borrowed"], became["borrowed_from"]) == (True, _iso(event.created_at))
    assert became["bound_at"] == _iso(marked.created_at) != became["borrowed_from"]
    assert became["borrowed_because"].startswith("Now counts as borrowed: team ml holds 18 H100-80GB GPUs, 10 above")
    assert (bound["borrowed"], bound["borrowed_from"], bound["borrowed_because"]) == (
        True, _iso(borrowed.created_at), "")
