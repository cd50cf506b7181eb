"""Submitting jobs: defaults, validation that names the field, nothing half-written, arrays,
idempotent retries."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
ARRAYS = "/api/v1/job-arrays/"


def post(client: APIClient, url: str, body: Any, **headers: str) -> Any:
    return client.post(url, body, format="json", **headers)


def test_submit_needs_only_name_and_gpus_and_fills_documented_defaults(alice, fleet) -> None:
    r = post(alice, JOBS, {"name": "tiny", "gpus": 1})

    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["team"] == "ml"  # the user's team
    assert body["priority_class"] == "research"  # the team's default class
    assert body["runtime_limit_s"] == fleet.research.default_runtime_limit_s  # the class default
    assert body["submitter"] == "alice"
    assert body["state"] == JobState.PENDING
    assert body["topology"] == "any" and body["gpu_types"] == [] and body["workload"] == "training"


def test_submit_records_a_job_submitted_event_naming_the_user(alice, fleet) -> None:
    r = post(alice, JOBS, {"name": "tiny", "gpus": 2})

    event = Event.objects.get(job_id=r.json()["id"])
    assert event.kind == EventKind.JOB_SUBMITTED
    assert event.actor == "user:alice"
    assert event.team_id == fleet.ml.pk


def test_submit_accepts_every_documented_field(alice, fleet) -> None:
    body = {
        "name": "full", "gpus": 16, "gpus_per_node": 8, "gpu_type": "H100-80GB", "min_gpu_memory_gb": 40,
        "cpus_per_gpu": 8, "memory_gb_per_gpu": 64, "topology": "same_spine", "min_gpus": 8, "max_gpus": 32,
        "priority_class": "production", "project": "llm", "runtime_limit_s": 7200, "checkpoint_interval_s": 600,
        "command": "python train.py --lr 3e-4", "env": {"WANDB_MODE": "offline"}, "workload": "training",
        "team": "ml",
    }
    r = post(alice, JOBS, body)

    assert r.status_code == 201, r.json()
    job = Job.objects.get(pk=r.json()["id"])
    assert (job.gpus, job.gpus_per_node, job.gpu_types, job.min_gpus, job.max_gpus) == (16, 8, ["H100-80GB"], 8, 32)
    assert job.project.name == "llm" and job.priority_class.name == "production"
    assert job.env == {"WANDB_MODE": "offline"} and job.checkpoint_interval_s == 600


def test_gpu_types_list_is_an_alternative_to_gpu_type(alice, fleet) -> None:
    r = post(alice, JOBS, {"name": "either", "gpus": 4, "gpu_types": ["H100-80GB", "A100-40GB"]})

    assert r.status_code == 201, r.json()
    assert r.json()["gpu_types"] == ["H100-80GB", "A100-40GB"]


BAD_SUBMITS = [
    ("zero_gpus", {"name": "x", "gpus": 0}, "gpus", "a job needs at least 1 GPU"),
    ("negative_gpus", {"name": "x", "gpus": -4}, "gpus", "a job needs at least 1 GPU"),
    ("gpus_not_a_number", {"name": "x", "gpus": "eight"}, "gpus", "is not a whole number"),
    ("gpus_fractional", {"name": "x", "gpus": 1.5}, "gpus", "is not a whole number"),
    ("gpus_boolean", {"name": "x", "gpus": True}, "gpus", "is not a whole number"),
    ("gpus_beyond_integer_range", {"name": "x", "gpus": 2**40}, "gpus", "a job may ask for at most 65,536 GPUs"),
    ("many_tiny_members_beyond_the_fleet", {"name": "x", "gpus": 65536, "gpus_per_node": 1}, "gpus",
     "can never give more than 48"),
    ("missing_name", {"gpus": 1}, "name", "required"),
    ("missing_gpus", {"name": "x"}, "gpus", "required"),
    ("unknown_gpu_type", {"name": "x", "gpus": 1, "gpu_type": "B200"}, "gpu_type", "unknown GPU type 'B200'"),
    ("unknown_priority_class", {"name": "x", "gpus": 1, "priority_class": "vip"}, "priority_class",
     "unknown priority class 'vip'"),
    ("one_node_shape_larger_than_any_node", {"name": "x", "gpus": 16, "gpus_per_node": 16}, "gpus_per_node",
     "asks 16 GPUs on one node; the largest node has 8"),
    ("same_node_larger_than_any_node", {"name": "x", "gpus": 16, "topology": "same_node"}, "gpus",
     "asks 16 GPUs on one node; the largest node has 8"),
    ("more_gpus_than_the_fleet_has", {"name": "x", "gpus": 64}, "gpus",
     "asks 64 GPUs; the fleet can never give more than 48 capable GPUs"),
    ("more_gpus_of_a_type_than_the_fleet_has", {"name": "x", "gpus": 24, "gpu_type": "A100-40GB"}, "gpus",
     "can never give more than 16 A100-40GB GPUs"),
    ("gpu_memory_nobody_has", {"name": "x", "gpus": 1, "min_gpu_memory_gb": 141}, "min_gpu_memory_gb",
     "at least 141 GB"),
    ("cpus_beyond_any_node", {"name": "x", "gpus": 8, "gpus_per_node": 8, "cpus_per_gpu": 16}, "cpus_per_gpu",
     "asks 128 CPUs on one node"),
    ("memory_beyond_any_node", {"name": "x", "gpus": 8, "memory_gb_per_gpu": 200}, "memory_gb_per_gpu",
     "1600 GB of memory on one node"),
    ("same_leaf_larger_than_any_leaf", {"name": "x", "gpus": 24, "gpu_type": "H100-80GB", "topology": "same_leaf"},
     "topology", "the largest leaf switch has 16"),
    ("runtime_limit_beyond_class_max", {"name": "x", "gpus": 1, "runtime_limit_s": 8 * 86400}, "runtime_limit_s",
     "beyond the maximum of priority class 'research' (604800 s)"),
    ("min_gpus_above_gpus", {"name": "x", "gpus": 4, "min_gpus": 8}, "min_gpus", "more than gpus"),
    ("max_gpus_below_gpus", {"name": "x", "gpus": 4, "max_gpus": 2}, "max_gpus", "less than gpus"),
    ("unknown_field", {"name": "x", "gpus": 1, "gpu_per_node": 8}, "gpu_per_node", "Unknown field"),
    ("read_only_field_sent", {"name": "x", "gpus": 1, "state": "running"}, "state", "Unknown field"),
    ("unknown_topology", {"name": "x", "gpus": 1, "topology": "nearby"}, "topology", "not a valid choice"),
    ("unknown_team", {"name": "x", "gpus": 1, "team": "nope"}, "team", "no team named 'nope'"),
    ("other_teams_name", {"name": "x", "gpus": 1, "team": "vision"}, "team", "no team named 'vision'"),
    ("unknown_project", {"name": "x", "gpus": 1, "project": "nope"}, "project", "has no project 'nope'"),
    ("both_gpu_type_and_gpu_types", {"name": "x", "gpus": 1, "gpu_type": "H100-80GB", "gpu_types": ["A100-40GB"]},
     "gpu_type", "not both"),
    ("env_not_an_object", {"name": "x", "gpus": 1, "env": ["A=1"]}, "env", "dictionary"),
    ("env_bad_variable_name", {"name": "x", "gpus": 1, "env": {"1BAD": "v"}}, "env", "variable names"),
    # a regex's "$" matches before a trailing newline: "A\n" read as a valid name
    ("env_variable_name_ending_in_newline", {"name": "x", "gpus": 1, "env": {"A\n": "v"}}, "env", "variable names"),
    ("env_value_not_a_string", {"name": "x", "gpus": 1, "env": {"A": {"nested": 1}}}, "env.A", "must be text, got an object"),
    ("nul_character_in_name", {"name": "a\x00b", "gpus": 1}, "name", "contains a control character (U+0000, a NUL) at position 2"),
    ("name_too_long", {"name": "x" * 200, "gpus": 1}, "name", "no more than 128"),
]


@pytest.mark.parametrize("body,field,message", [c[1:] for c in BAD_SUBMITS], ids=[c[0] for c in BAD_SUBMITS])
def test_bad_submit_is_a_400_naming_the_field_and_writes_nothing(alice, fleet, body, field, message) -> None:
    before = (Job.objects.count(), Event.objects.count())

    r = post(alice, JOBS, body)

    assert r.status_code == 400, r.content
    error = r.json()
    assert field in error["errors"], error
    assert message in " ".join(error["errors"][field]), error
    assert f"{field}:" in error["detail"]  # the one-line summary names the field too
    assert (Job.objects.count(), Event.objects.count()) == before


def test_malformed_json_is_a_400(alice, fleet) -> None:
    r = alice.post(JOBS, data='{"name": "x", "gpus": ', content_type="application/json")

    assert r.status_code == 400
    assert "Malformed JSON" in r.json()["detail"]


def test_json_that_is_not_an_object_is_a_400(alice, fleet) -> None:
    r = alice.post(JOBS, data="[1, 2]", content_type="application/json")

    assert r.status_code == 400
    assert "Expected a dictionary" in r.json()["detail"]


def test_nan_is_refused_as_malformed_json(alice, fleet) -> None:
    r = alice.post(JOBS, data='{"name": "x", "gpus": NaN}', content_type="application/json")

    assert r.status_code == 400
    assert "NaN" in r.json()["detail"]


def test_oversized_body_is_refused_with_413_before_parsing(alice, fleet) -> None:
    body = json.dumps({"name": "x", "gpus": 1, "command": "a" * (2 * 1024 * 1024)})

    r = alice.post(JOBS, data=body, content_type="application/json")

    assert r.status_code == 413
    assert "limit" in r.json()["detail"]
    assert Job.objects.count() == 0


def test_wrong_content_type_is_a_415(alice, fleet) -> None:
    r = alice.post(JOBS, data="name=x&gpus=1", content_type="application/x-www-form-urlencoded")

    assert r.status_code == 415
    assert "application/x-www-form-urlencoded" in r.json()["detail"]


def test_finance_cannot_submit(clients, fleet) -> None:
    r = post(clients["finance"], JOBS, {"name": "x", "gpus": 1})

    assert r.status_code == 403
    assert Job.objects.count() == 0


def test_admin_without_a_team_must_name_one(admin, fleet) -> None:
    assert post(admin, JOBS, {"name": "x", "gpus": 1}).json()["errors"]["team"] == [
        "you belong to no team; name the team to submit for"
    ]
    r = post(admin, JOBS, {"name": "x", "gpus": 1, "team": "vision"})
    assert r.status_code == 201 and r.json()["team"] == "vision" and r.json()["priority_class"] == "production"


def test_team_without_default_class_gets_the_lowest_class(clients, fleet) -> None:
    fleet.vision.default_priority_class = None
    fleet.vision.save()

    r = post(clients["other_team"], JOBS, {"name": "x", "gpus": 1})

    assert r.json()["priority_class"] == "research"


def test_a_job_on_an_empty_fleet_is_accepted_and_left_to_the_engine(db) -> None:
    team = f.make_team("solo", default_priority_class=f.make_priority_class("only"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(f.make_user('sam', team=team))}")

    assert post(client, JOBS, {"name": "x", "gpus": 1024}).status_code == 201


# --------------------------------------------------------------------------------- arrays


def test_job_array_of_1000_tasks_in_one_call(alice, fleet) -> None:
    r = post(alice, ARRAYS, {"name": "sweep", "gpus": 1, "array": "0-999", "command": "python sweep.py"})

    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["count"] == 1000 and body["states"] == {"pending": 1000}
    assert body["indices"] == list(range(1000))
    jobs = Job.objects.filter(array_id=body["array_id"]).order_by("array_index")
    assert jobs.count() == 1000
    assert [j.array_index for j in jobs[:3]] == [0, 1, 2]
    assert jobs[999].env["QM_ARRAY_INDEX"] == "999"
    assert Event.objects.filter(kind=EventKind.JOB_SUBMITTED, job__array_id=body["array_id"]).count() == 1000
    assert body["job_ids"] == sorted(body["job_ids"]) and body["job_ids"] == [j.pk for j in jobs]


def test_job_array_tasks_copy_the_request_and_carry_their_own_index(alice, fleet) -> None:
    r = post(alice, ARRAYS, {"name": "sweep", "gpus": 2, "array": "5-7", "env": {"LR": "0.1"}, "project": "llm",
                             "gpu_type": "H100-80GB"}, HTTP_IDEMPOTENCY_KEY="sweep-1")

    tasks = list(Job.objects.filter(array_id=r.json()["array_id"]).order_by("array_index"))
    assert [t.array_index for t in tasks] == [5, 6, 7]
    assert [t.env["QM_ARRAY_INDEX"] for t in tasks] == ["5", "6", "7"]
    assert {t.env["LR"] for t in tasks} == {"0.1"} and {t.env["QM_ARRAY_ID"] for t in tasks} == {r.json()["array_id"]}
    assert {(t.gpus, t.project.name, tuple(t.gpu_types), t.submitter.username) for t in tasks} == {
        (2, "llm", ("H100-80GB",), "alice")}
    assert [t.idempotency_key for t in tasks] == ["sweep-1", None, None]
    events = [Event.objects.get(job=t) for t in tasks]
    assert [e.data["array_index"] for e in events] == [5, 6, 7]
    assert ["request_fingerprint" in e.data for e in events] == [True, False, False]
    assert {e.team_id for e in events} == {fleet.ml.pk} and {e.actor for e in events} == {"user:alice"}


def test_job_array_accepts_lists_and_steps(alice, fleet) -> None:
    r = post(alice, ARRAYS, {"name": "sweep", "gpus": 1, "array": "1,3,10-16:3"})

    assert r.json()["indices"] == [1, 3, 10, 13, 16]


@pytest.mark.parametrize("spec,message", [
    ("9-1", "ends before it starts"),
    ("0-20000", "at most 10000 tasks"),
    ("a-b", "is not an index"),
    ("0-10:0", "step 0"),
    ("0-3\n,5", "contains a control character (U+000A, a new line) at position 4"),
], ids=["backwards", "too_many_tasks", "not_numbers", "zero_step", "newline_inside"])
def test_bad_array_spec_is_a_400_on_array(alice, fleet, spec, message) -> None:
    r = post(alice, ARRAYS, {"name": "sweep", "gpus": 1, "array": spec})

    assert r.status_code == 400
    assert message in r.json()["errors"]["array"][0]
    assert Job.objects.count() == 0


def test_job_array_summary_is_visible_to_its_team_only(alice, clients, fleet) -> None:
    array_id = post(alice, ARRAYS, {"name": "sweep", "gpus": 1, "array": "0-4"}).json()["array_id"]

    assert alice.get(f"{ARRAYS}{array_id}/").json()["count"] == 5
    assert clients["other_team"].get(f"{ARRAYS}{array_id}/").status_code == 404
    assert alice.get(JOBS, {"array_id": array_id}).json()["count"] == 5


def test_impossible_array_task_shape_writes_no_task(alice, fleet) -> None:
    r = post(alice, ARRAYS, {"name": "sweep", "gpus": 9, "topology": "same_node", "array": "0-99"})

    assert r.status_code == 400 and "gpus" in r.json()["errors"]
    assert Job.objects.count() == 0 and f.trail().count() == 0


# ----------------------------------------------------------------------------- idempotency


def test_retried_submit_with_same_idempotency_key_returns_the_first_job(alice, fleet) -> None:
    body = {"name": "once", "gpus": 2}
    first = post(alice, JOBS, body, HTTP_IDEMPOTENCY_KEY="k-123")
    again = post(alice, JOBS, body, HTTP_IDEMPOTENCY_KEY="k-123")

    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1


def test_same_idempotency_key_with_a_different_body_is_a_409(alice, fleet) -> None:
    post(alice, JOBS, {"name": "once", "gpus": 2}, HTTP_IDEMPOTENCY_KEY="k-9")

    r = post(alice, JOBS, {"name": "once", "gpus": 4}, HTTP_IDEMPOTENCY_KEY="k-9")

    assert r.status_code == 409
    assert "different request" in r.json()["detail"]
    assert Job.objects.count() == 1


def test_idempotency_keys_belong_to_their_user(alice, clients, fleet) -> None:
    body = {"name": "once", "gpus": 1, "team": "ml"}
    post(alice, JOBS, body, HTTP_IDEMPOTENCY_KEY="shared")

    r = post(clients["admin"], JOBS, body, HTTP_IDEMPOTENCY_KEY="shared")

    assert r.status_code == 201
    assert Job.objects.count() == 2


def test_retried_array_with_same_key_returns_the_same_array(alice, fleet) -> None:
    body = {"name": "sweep", "gpus": 1, "array": "0-9"}
    first = post(alice, ARRAYS, body, HTTP_IDEMPOTENCY_KEY="arr-1").json()
    again = post(alice, ARRAYS, body, HTTP_IDEMPOTENCY_KEY="arr-1")

    assert again.status_code == 200
    assert again.json()["array_id"] == first["array_id"] and again.json()["job_ids"] == first["job_ids"]
    assert Job.objects.count() == 10


@pytest.mark.parametrize("key", ["has space", "ends-in-newline\n"])
def test_malformed_idempotency_key_is_a_400(alice, fleet, key) -> None:
    r = post(alice, JOBS, {"name": "x", "gpus": 1}, HTTP_IDEMPOTENCY_KEY=key)

    assert r.status_code == 400 and "Idempotency-Key" in r.json()["errors"]
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_key_create_one_job(fleet) -> None:
    """Two clients race with one key: the unique constraint lets one insert win; the other
    request rolls back whole and answers with the winner's job."""
    token = f.token_for(fleet.users["owner"])
    results: list[Any] = []
    barrier = threading.Barrier(4)

    def submit() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        barrier.wait()
        try:
            results.append(post(client, JOBS, {"name": "race", "gpus": 1}, HTTP_IDEMPOTENCY_KEY="race-1"))
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(r.status_code for r in results).count(201) == 1
    assert all(r.status_code in (200, 201) for r in results)
    assert len({r.json()["id"] for r in results}) == 1
    assert Job.objects.filter(name="race").count() == 1


def test_orm_write_path_of_the_sqlite_demo_writes_the_same_rows_as_the_set_based_insert(alice, fleet) -> None:
    """The demo's SQLite takes _insert_with_orm; PostgreSQL the one-statement insert. Both,
    given the same templates, must produce the same jobs and events."""
    from django.utils import timezone

    from controlplane.services import jobs as service
    from controlplane.services.transitions import event_fields

    def write(path: Any, key: str) -> list[tuple[Any, ...]]:
        at = timezone.now()
        job = Job(team=fleet.ml, priority_class=fleet.research, submitter=fleet.users["owner"], name=key, gpus=2,
                  runtime_limit_s=60, env={"A": "1", "QM_ARRAY_ID": "x"}, array_id=uuid.uuid4(), idempotency_key=key,
                  submitted_at=at, state_changed_at=at)
        event = Event(**event_fields(EventKind.JOB_SUBMITTED, "user:alice", job=job, reason="Submitted",
                                     message="m", data={"gpus": 2, "request_fingerprint": "f"}, at=at))
        ids, indices = path(job, event, [3, 4])
        rows = []
        for job_id, index in zip(ids, indices):
            task = Job.objects.get(pk=job_id)
            submitted = Event.objects.get(job=task)
            rows.append((index, task.array_index, task.env, task.idempotency_key is not None, task.gpus, task.team_id,
                         submitted.data, submitted.team_id, submitted.kind))
        return rows

    assert write(service._insert_with_orm, "orm") == write(service._insert_jobs_with_events, "sql")
