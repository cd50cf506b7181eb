"""Finished-job history, as `sacct` answers it: `GET jobs/?finished_after=…&finished_before=…`,
`started_after/before`, `exit_code`, `ran_longer_than_s`, `ran_on=NODE` (any job that ever held
GPUs there), ordering by `finished_at`, `started_at` and `elapsed`, and each job's `elapsed_s`,
`gpu_hours` (the accounting's allocated GPU-hours), `lost_gpu_hours` and `ran_on`.

Before, the list had only `submitted_after/before`: nobody could ask which jobs ended yesterday,
which failed with exit code 137, how long they ran or what GPU-hours they burnt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.api.serializers import JobSerializer, job_payload
from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from controlplane.services import accounting, job_costs
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
EDGE = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)  # the window's ends: [Nov 29, Nov 30)
END = EDGE + timedelta(days=1)
_generation = iter(range(1, 10_000))


def _ids(r: Any) -> list[int]:
    assert r.status_code == 200, r.content[:400]
    return sorted(j["id"] for j in r.json()["results"])


def _held(job: Job, node: Node, start: datetime, end: datetime | None, gpus: int = 2) -> Allocation:
    allocation = Allocation.objects.create(
        job=job, generation=next(_generation), epoch=1, created_at=start, started_at=start, released_at=end,
        state=AllocationState.ACTIVE if end is None else AllocationState.RELEASED)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=end is None)
                                      for i in range(gpus))
    return allocation


def _ended(fleet: Any, name: str, started: datetime, finished: datetime, **kw: Any) -> Job:
    kw.setdefault("state", JobState.SUCCEEDED)
    return f.make_job(fleet.ml, name=name, submitted_at=started - timedelta(minutes=5), started_at=started,
                      finished_at=finished, **kw)


# ----------------------------------------------------------------------- the time windows


def test_finished_window_takes_its_start_and_leaves_its_end(fleet, alice) -> None:
    before = _ended(fleet, "before", EDGE - timedelta(hours=2), EDGE - timedelta(microseconds=1))
    at_start = _ended(fleet, "at-start", EDGE - timedelta(hours=1), EDGE)
    inside = _ended(fleet, "inside", EDGE + timedelta(hours=1), END - timedelta(microseconds=1))
    at_end = _ended(fleet, "at-end", EDGE + timedelta(hours=2), END)
    f.make_job(fleet.ml, name="still-running", state=JobState.RUNNING, started_at=EDGE)

    window = {"finished_after": EDGE.isoformat(), "finished_before": END.isoformat()}
    assert _ids(alice.get(J, window)) == sorted([at_start.pk, inside.pk])
    assert _ids(alice.get(J, {"finished_before": EDGE.isoformat()})) == [before.pk]
    assert _ids(alice.get(J, {"finished_after": END.isoformat()})) == [at_end.pk]


def test_started_window_reads_the_latest_start(fleet, alice) -> None:
    early = _ended(fleet, "early", EDGE - timedelta(seconds=1), EDGE + timedelta(hours=1))
    on_time = _ended(fleet, "on-time", EDGE, EDGE + timedelta(hours=1))
    running = f.make_job(fleet.ml, name="running", state=JobState.RUNNING, started_at=EDGE + timedelta(hours=3))
    f.make_job(fleet.ml, name="never-started", state=JobState.CANCELLED, finished_at=EDGE + timedelta(hours=1))

    assert _ids(alice.get(J, {"started_after": EDGE.isoformat(), "started_before": END.isoformat()})) == sorted(
        [on_time.pk, running.pk])
    assert _ids(alice.get(J, {"started_before": EDGE.isoformat()})) == [early.pk]


@pytest.mark.parametrize("field", ["finished_after", "finished_before", "started_after", "started_before"])
def test_a_time_that_is_no_time_is_a_400_naming_its_field(alice, field) -> None:
    r = alice.get(J, {field: "yesterday-ish"})
    assert r.status_code == 400, r.content
    assert list(r.json()["errors"]) == [field]


def test_a_time_with_an_offset_is_compared_in_utc(fleet, alice) -> None:
    job = _ended(fleet, "tokyo", EDGE - timedelta(hours=3), EDGE + timedelta(hours=1))
    # 09:00 in Tokyo on the 29th is 00:00 UTC: the job ended an hour after it.
    assert _ids(alice.get(J, {"finished_after": "2026-11-29T09:00:00+09:00"})) == [job.pk]
    assert _ids(alice.get(J, {"finished_after": "2026-11-29T10:00:01+09:00"})) == []


@pytest.mark.parametrize("when", ["submitted", "started", "finished"])
def test_a_window_that_ends_before_it_starts_is_a_400_naming_its_end(alice, when) -> None:
    """Found on the docs walk (5 Dec): `finished_after=2026-12-01&finished_before=2026-11-01` answered
    200 with no job, as if none had ended, where `qm history` refuses an --until not after --since."""
    r = alice.get(J, {f"{when}_after": "2026-12-01T00:00:00Z", f"{when}_before": "2026-11-01T00:00:00Z"})
    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {f"{when}_before": [
        f"2026-11-01 00:00:00 UTC is not after {when}_after (2026-12-01 00:00:00 UTC): the window holds nothing"]}
    same = alice.get(J, {f"{when}_after": "2026-12-01T00:00:00Z", f"{when}_before": "2026-12-01T00:00:00Z"})
    assert same.status_code == 400 and list(same.json()["errors"]) == [f"{when}_before"], same.content
    assert alice.get(J, {f"{when}_after": "2026-11-01T00:00:00Z",
                         f"{when}_before": "2026-12-01T00:00:00Z"}).status_code == 200


# ------------------------------------------------------------------ exit codes and lengths


def test_exit_code_filters_on_the_code_the_processes_ended_with(fleet, alice) -> None:
    oom = _ended(fleet, "oom", EDGE, EDGE + timedelta(hours=1), state=JobState.FAILED, exit_code=137)
    _ended(fleet, "ok", EDGE, EDGE + timedelta(hours=1), exit_code=0)
    _ended(fleet, "minus", EDGE, EDGE + timedelta(hours=1), state=JobState.FAILED, exit_code=-9)

    assert _ids(alice.get(J, {"exit_code": 137})) == [oom.pk]
    assert [j["name"] for j in alice.get(J, {"exit_code": -9}).json()["results"]] == ["minus"]
    failed = alice.get(J, {"state": ["failed", "timed_out"], "ordering": "name"}).json()["results"]
    assert [(j["name"], j["exit_code"]) for j in failed] == [("minus", -9), ("oom", 137)]


@pytest.mark.parametrize("value", ["1.5", "abc", "99999999999"])
def test_an_exit_code_that_is_no_whole_number_is_a_400_naming_it(alice, value) -> None:
    r = alice.get(J, {"exit_code": value})
    assert r.status_code == 400 and list(r.json()["errors"]) == ["exit_code"], r.content


def test_ran_longer_than_s_compares_the_latest_run_strictly(fleet, alice) -> None:
    hour = timedelta(hours=1)
    _ended(fleet, "exactly-an-hour", EDGE, EDGE + hour)
    longer = _ended(fleet, "a-second-more", EDGE, EDGE + hour + timedelta(seconds=1))
    running = f.make_job(fleet.ml, name="running-2h", state=JobState.RUNNING,
                         started_at=timezone.now() - 2 * hour)
    f.make_job(fleet.ml, name="running-10m", state=JobState.RUNNING, started_at=timezone.now() - timedelta(minutes=10))
    f.make_job(fleet.ml, name="cancelled-waiting", state=JobState.CANCELLED, finished_at=EDGE + 5 * hour)

    assert _ids(alice.get(J, {"ran_longer_than_s": 3600})) == sorted([longer.pk, running.pk])
    assert len(_ids(alice.get(J, {"ran_longer_than_s": 0}))) == 4  # every job that ran, none that never did


@pytest.mark.parametrize("value", ["-1", "1h", "2.5"])
def test_ran_longer_than_s_takes_whole_seconds_only(alice, value) -> None:
    r = alice.get(J, {"ran_longer_than_s": value})
    assert r.status_code == 400 and list(r.json()["errors"]) == ["ran_longer_than_s"], r.content


# --------------------------------------------------------------------------- where it ran


def test_ran_on_lists_a_job_that_moved_off_the_node_where_node_does_not(fleet, alice) -> None:
    a, b = fleet.nodes[1], fleet.nodes[2]
    moved = f.make_job(fleet.ml, name="moved", state=JobState.RUNNING, started_at=EDGE + timedelta(hours=2),
                       requeue_count=1, preemption_count=1)
    _held(moved, a, EDGE, EDGE + timedelta(hours=1))  # preempted off a
    _held(moved, b, EDGE + timedelta(hours=2), None)  # running again on b
    finished = _ended(fleet, "finished-on-a", EDGE, EDGE + timedelta(hours=1))
    _held(finished, a, EDGE, EDGE + timedelta(hours=1), gpus=1)
    theirs = f.make_job(fleet.vision, name="theirs", state=JobState.SUCCEEDED)
    _held(theirs, a, EDGE, EDGE + timedelta(hours=1), gpus=1)

    assert _ids(alice.get(J, {"ran_on": a.name})) == sorted([moved.pk, finished.pk])  # not another team's
    assert _ids(alice.get(J, {"node": a.name})) == []  # nobody holds GPUs there now
    assert _ids(alice.get(J, {"ran_on": b.name})) == [moved.pk] == _ids(alice.get(J, {"node": b.name}))
    row = alice.get(f"{J}{moved.pk}/").json()
    assert (row["ran_on"], row["nodes"]) == ([a.name, b.name], [b.name])
    # each job once, though it held several GPU rows there in several runs
    _held(finished, a, EDGE - timedelta(hours=3), EDGE - timedelta(hours=2), gpus=2)
    assert alice.get(J, {"ran_on": a.name}).json()["count"] == 2


# ------------------------------------------------------------------------------- ordering


def test_ordering_by_finished_started_and_elapsed(fleet, alice) -> None:
    short = _ended(fleet, "short", EDGE + timedelta(hours=5), EDGE + timedelta(hours=5, minutes=1))
    long_ = _ended(fleet, "long", EDGE, EDGE + timedelta(hours=4))
    running = f.make_job(fleet.ml, name="running", state=JobState.RUNNING, started_at=timezone.now() - timedelta(hours=2))
    f.make_job(fleet.ml, name="waiting")

    def names(ordering: str) -> list[str]:
        r = alice.get(J, {"ordering": ordering})
        assert r.status_code == 200, r.content
        return [j["name"] for j in r.json()["results"]]

    # without the value (not finished, never started) last either way, the newest first among them
    assert names("finished_at") == ["long", "short", "waiting", "running"]
    assert names("-finished_at") == ["short", "long", "waiting", "running"]
    assert names("started_at") == ["long", "short", "running", "waiting"]
    assert names("-elapsed") == ["long", "running", "short", "waiting"]  # a running job counts to now
    assert names("elapsed") == ["short", "running", "long", "waiting"]
    assert alice.get(J, {"ordering": "elapsed"}).json()["results"][0]["id"] == short.pk != long_.pk != running.pk
    # with a state filter (the list's SELECT DISTINCT) too
    assert [j["name"] for j in alice.get(J, {"state": ["succeeded", "running"], "ordering": "-elapsed"})
            .json()["results"]] == ["long", "running", "short"]


# -------------------------------------------------------------------------- the read fields


def test_elapsed_s_is_the_latest_run_and_null_without_one(fleet, alice) -> None:
    done = _ended(fleet, "done", EDGE, EDGE + timedelta(hours=1, seconds=30))
    running = f.make_job(fleet.ml, name="running", state=JobState.RUNNING,
                         started_at=timezone.now() - timedelta(minutes=10))
    requeued = f.make_job(fleet.ml, name="requeued", requeue_count=1, lost_gpu_seconds=5400.0)
    never = f.make_job(fleet.ml, name="never", state=JobState.CANCELLED, finished_at=EDGE)
    rows = {j["name"]: j for j in alice.get(J).json()["results"]}

    assert rows["done"]["elapsed_s"] == 3630 == alice.get(f"{J}{done.pk}/").json()["elapsed_s"]
    assert 600 <= rows["running"]["elapsed_s"] < 660
    assert rows["requeued"]["elapsed_s"] is None and rows["never"]["elapsed_s"] is None
    assert (rows["requeued"]["lost_gpu_hours"], rows["requeued"]["requeue_count"]) == (1.5, 1)
    assert (rows["never"]["gpu_hours"], rows["never"]["ran_on"]) == (0.0, [])
    assert rows["running"]["id"] == running.pk and (rows["requeued"]["id"], rows["never"]["id"]) == (requeued.pk, never.pk)


def test_gpu_hours_agree_with_the_accounting_for_a_preempted_and_restarted_job(fleet, alice) -> None:
    """8 GPUs for 30 minutes on h100-1 (preempted), then 4 GPUs for 30 minutes on h100-2: 6 GPU-hours,
    not gpus × elapsed (4 × 0.5) nor the first run's alone, and the job page's cost says the same."""
    t0 = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=3)
    job = f.make_job(fleet.ml, name="restarted", gpus=8, min_gpus=4, max_gpus=8, state=JobState.SUCCEEDED,
                     started_at=t0 + timedelta(minutes=40), finished_at=t0 + timedelta(minutes=70), exit_code=0,
                     preemption_count=1, requeue_count=1, lost_gpu_seconds=8 * 600.0)
    _held(job, fleet.nodes[1], t0, t0 + timedelta(minutes=30), gpus=8)
    _held(job, fleet.nodes[2], t0 + timedelta(minutes=40), t0 + timedelta(minutes=70), gpus=4)
    accounting.catch_up(t0 + timedelta(minutes=120))

    row = alice.get(f"{J}{job.pk}/").json()
    listed = alice.get(J, {"ran_on": fleet.nodes[1].name}).json()["results"][0]

    assert job_costs.job_cost(job.pk)["gpu_hours_allocated"] == Decimal("6.0000")
    assert row["gpu_hours"] == listed["gpu_hours"] == 6.0
    assert (row["lost_gpu_hours"], row["preemption_count"], row["elapsed_s"]) == (1.3333, 1, 1800)
    assert row["ran_on"] == [fleet.nodes[1].name, fleet.nodes[2].name]


def test_a_page_of_history_costs_one_query_more_than_a_queue_whatever_its_length(fleet, alice) -> None:
    def queries(**params: Any) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert alice.get(J, {"limit": 100, **params}).status_code == 200
        return len(captured)

    for i in range(3):
        f.make_job(fleet.ml, name=f"waiting-{i}")
    queue = queries()
    for i in range(3):
        _held(_ended(fleet, f"f{i}", EDGE, EDGE + timedelta(hours=1)), fleet.nodes[i % 4], EDGE, EDGE + timedelta(hours=1))
    three = queries(state="succeeded")
    for i in range(40):
        _held(_ended(fleet, f"g{i}", EDGE, EDGE + timedelta(hours=1)), fleet.nodes[i % 4], EDGE, EDGE + timedelta(hours=1))
    forty = queries(state="succeeded")
    assert three == forty == queue + 1


def test_the_documented_serializer_says_the_history_fields_as_the_payload(fleet) -> None:
    job = _ended(fleet, "documented", EDGE, EDGE + timedelta(hours=2), lost_gpu_seconds=900.0, requeue_count=1)
    _held(job, fleet.nodes[3], EDGE, EDGE + timedelta(hours=2))
    stored = Job.objects.select_related("team", "project", "submitter", "priority_class", "place").get(pk=job.pk)
    payload = job_payload(stored)
    assert payload == dict(JobSerializer(stored).data)
    assert (payload["elapsed_s"], payload["lost_gpu_hours"], payload["ran_on"]) == (7200, 0.25, [fleet.nodes[3].name])


def test_the_history_filters_are_in_the_schema(admin) -> None:
    schema = admin.get("/api/schema/", {"format": "json"}).json()
    names = {p["name"] for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    assert {"finished_after", "finished_before", "started_after", "started_before", "exit_code",
            "ran_longer_than_s", "ran_on"} <= names


def test_the_history_fields_are_read_only(alice) -> None:
    r = alice.post(J, {"name": "x", "gpus": 1, "gpu_hours": 3, "ran_on": ["h100-1"]}, format="json")
    assert r.status_code == 400 and {"gpu_hours", "ran_on"} <= set(r.json()["errors"])
