"""Job actions (cancel, events, explain), node actions, metrics, quotas' audit trail, list query
counts, throttling, and the documentation pages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node, SchedulerLease
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _run(job: Job, node: Node, gpus: int, generation: int = 1) -> Allocation:
    """Put a job on `gpus` GPUs of `node` as a bind would (rows only, no cycle)."""
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=now)
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=node, gpu_index=i) for i in range(gpus)
    )
    return allocation


# ------------------------------------------------------------------------------ job actions


def test_cancelling_a_pending_job_cancels_it_and_records_who(fleet, alice) -> None:
    job = f.make_job(fleet.ml)

    r = alice.post(f"{J}/jobs/{job.pk}/cancel/")

    assert r.status_code == 200 and r.json()["job"]["state"] == JobState.CANCELLED
    assert Event.objects.filter(job=job, kind=EventKind.JOB_CANCELLED, actor="user:alice").exists()


def test_cancelling_a_running_job_signals_its_allocation_to_stop(fleet, alice) -> None:
    SchedulerLease.objects.create(epoch=1)
    job = f.make_job(fleet.ml, gpus=2)
    allocation = _run(job, fleet.nodes[1], 2)

    r = alice.post(f"{J}/jobs/{job.pk}/cancel/")

    assert r.status_code == 200, r.json()
    assert "is stopping" in r.json()["detail"]
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING and allocation.release_reason == "Cancelled"


def test_job_events_list_the_audit_trail_oldest_first(fleet, alice) -> None:
    job_id = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1}, format="json").json()["id"]
    alice.post(f"{J}/jobs/{job_id}/cancel/")

    kinds = [e["kind"] for e in alice.get(f"{J}/jobs/{job_id}/events/").json()["results"]]

    assert kinds[0] == EventKind.JOB_SUBMITTED and EventKind.JOB_CANCELLED in kinds


def test_explain_gives_the_engines_reason_position_eta_and_remedy(fleet, alice) -> None:
    eta = timezone.now() + timedelta(minutes=42)
    job = f.make_job(
        fleet.ml, gpus=16, pending_code="QuotaExceeded", queue_position=3, eta=eta,
        pending_message="needs 16 H100-80GB GPUs; team ml has 4 of its 16 left and can borrow 0",
        pending_would_start_if="12 more GPUs of quota free up, or the cohort lends 12",
    )

    body = alice.get(f"{J}/jobs/{job.pk}/explain/").json()

    assert body["reason_code"] == "QuotaExceeded"
    assert body["reason"].startswith("needs 16 H100-80GB GPUs")
    assert body["queue_position"] == 3 and body["resolvable"] is True
    assert body["eta"].startswith(eta.strftime("%Y-%m-%dT%H:%M"))
    assert body["would_start_if"].startswith("12 more GPUs")


def test_explain_of_a_finished_job_says_how_it_ended(fleet, alice) -> None:
    job = f.make_job(fleet.ml, state=JobState.FAILED, finished_at=timezone.now(), exit_code=3)

    body = alice.get(f"{J}/jobs/{job.pk}/explain/").json()

    assert body["reason_code"] == "" and "Failed" in body["reason"] and "exit code 3" in body["reason"]


def test_job_list_filters_by_state_team_priority_class_user_and_time(fleet, admin) -> None:
    old = timezone.now() - timedelta(days=3)
    f.make_job(fleet.ml, name="a", submitter=fleet.users["owner"], submitted_at=old)
    f.make_job(fleet.ml, name="b", state=JobState.RUNNING)
    f.make_job(fleet.vision, name="c", priority_class=fleet.production)

    def names(**query: Any) -> list[str]:
        return sorted(j["name"] for j in admin.get(f"{J}/jobs/", query).json()["results"])

    assert names(team="ml") == ["a", "b"]
    assert names(state="running") == ["b"]
    assert names(priority_class="production") == ["c"]
    assert names(user="alice") == ["a"]
    assert names(submitted_before=(old + timedelta(hours=1)).isoformat()) == ["a"]
    assert admin.get(f"{J}/jobs/", {"state": "bogus"}).status_code == 400


def test_filtering_by_waiting_reason_lists_only_jobs_that_still_wait(fleet, admin) -> None:
    """Found by QA: a job keeps its last reason after it leaves the queue, so
    ?pending_code=QuotaExceeded also listed cancelled and finished jobs."""
    f.make_job(fleet.ml, name="waits", pending_code="QuotaExceeded")
    f.make_job(fleet.ml, name="gave-up", state=JobState.CANCELLED, pending_code="QuotaExceeded")
    f.make_job(fleet.ml, name="ran", state=JobState.SUCCEEDED, pending_code="QuotaExceeded")
    f.make_job(fleet.ml, name="never", state=JobState.UNSCHEDULABLE, pending_code="CanNeverRun")

    def names(code: str) -> list[str]:
        return sorted(j["name"] for j in admin.get(f"{J}/jobs/", {"pending_code": code}).json()["results"])

    assert names("QuotaExceeded") == ["waits"]
    assert names("CanNeverRun") == ["never"]


# ----------------------------------------------------------------------------- node actions


@pytest.mark.parametrize("action,start,end", [
    ("cordon", NodeState.READY, NodeState.CORDONED),
    ("drain", NodeState.READY, NodeState.DRAINING),
    ("uncordon", NodeState.CORDONED, NodeState.READY),
    ("uncordon", NodeState.DRAINING, NodeState.READY),
    ("cordon", NodeState.DRAINING, NodeState.CORDONED),
], ids=["cordon_ready", "drain_ready", "uncordon_cordoned", "uncordon_draining", "cordon_draining"])
def test_node_action_changes_state_and_records_an_event(fleet, admin, action, start, end) -> None:
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(state=start)

    r = admin.post(f"{J}/nodes/{node.pk}/{action}/")

    assert r.status_code == 200 and r.json()["state"] == end
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE)
    assert event.actor == "user:root"
    assert event.data == {"from": start, "to": end, "action": action, "unschedulable": action != "uncordon"}
    assert r.json()["unschedulable"] is (action != "uncordon")


def test_cordoning_a_down_node_keeps_it_down_and_out_of_service_when_it_returns(fleet, admin) -> None:
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(state=NodeState.DOWN)

    r = admin.post(f"{J}/nodes/{node.pk}/cordon/")

    assert r.status_code == 200 and r.json()["state"] == NodeState.DOWN and r.json()["unschedulable"] is True
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE)
    assert event.data["returns"] == NodeState.CORDONED


def test_uncordoning_a_suspect_node_is_refused_with_409(fleet, admin) -> None:
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(state=NodeState.SUSPECT)

    r = admin.post(f"{J}/nodes/{node.pk}/uncordon/")

    assert r.status_code == 409 and "suspect" in r.json()["detail"]
    assert Node.objects.get(pk=node.pk).state == NodeState.SUSPECT
    assert not Event.objects.filter(node=node).exists()


def test_repeating_a_node_action_changes_nothing_and_records_nothing(fleet, admin) -> None:
    node = fleet.nodes[2]
    admin.post(f"{J}/nodes/{node.pk}/cordon/")

    r = admin.post(f"{J}/nodes/{node.pk}/cordon/")

    assert r.status_code == 200 and Event.objects.filter(node=node).count() == 1


def test_node_state_cannot_be_patched_around_the_actions(fleet, admin) -> None:
    node = fleet.nodes[2]

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"state": "ready", "pool": "h100"}, format="json")

    assert r.status_code == 200 and Node.objects.get(pk=node.pk).state == NodeState.READY
    r = admin.patch(f"{J}/nodes/{node.pk}/", {"state": "down"}, format="json")
    assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_node_lists_the_gpus_held_by_live_allocations(fleet, admin) -> None:
    _run(f.make_job(fleet.ml, gpus=3), fleet.nodes[1], 3)

    body = admin.get(f"{J}/nodes/{fleet.nodes[1].pk}/").json()

    assert body["allocated_gpus"] == 3 and "agent_token_hash" not in body


# ---------------------------------------------------------------------------------- metrics


def test_queue_metrics_count_pending_by_reason_class_and_team(fleet, alice) -> None:
    f.make_job(fleet.ml, gpus=4, pending_code="QuotaExceeded", submitted_at=timezone.now() - timedelta(minutes=10))
    f.make_job(fleet.ml, gpus=2, pending_code="InsufficientContiguousGpus")
    f.make_job(fleet.vision, gpus=8, pending_code="QuotaExceeded", priority_class=fleet.production)
    _run(f.make_job(fleet.vision, gpus=1), fleet.nodes[1], 1)
    f.make_job(fleet.vision, gpus=99, state=JobState.UNSCHEDULABLE)

    body = alice.get(f"{J}/metrics/queue/").json()

    assert body["pending_jobs"] == 3 and body["pending_gpus"] == 14
    assert body["pending_by_reason"] == {"InsufficientContiguousGpus": 1, "QuotaExceeded": 2}
    assert body["pending_by_priority_class"] == {"production": 1, "research": 2}
    assert body["pending_by_team"] == {"ml": 2, "vision": 1}
    assert body["running_jobs"] == 1 and body["running_gpus"] == 1 and body["unschedulable_jobs"] == 1
    assert 590 < body["oldest_pending_s"] < 700


def test_fragmentation_counts_stranded_gpus_only_while_a_whole_node_job_waits(fleet, alice) -> None:
    # h100-0 holds 6 of 8, h100-1 holds 1 of 8: 2 + 7 = 9 free GPUs on partially used nodes.
    _run(f.make_job(fleet.ml, gpus=6), fleet.nodes[0], 6, generation=1)
    _run(f.make_job(fleet.ml, gpus=1), fleet.nodes[1], 1, generation=2)
    Node.objects.filter(name="h100-3").update(state=NodeState.CORDONED)

    before = alice.get(f"{J}/metrics/fragmentation/").json()
    f.make_job(fleet.vision, gpus=16, gpus_per_node=8, pending_code="InsufficientContiguousGpus")
    after = alice.get(f"{J}/metrics/fragmentation/").json()

    h100 = next(p for p in before["pools"] if p["pool"] == "h100")
    assert (h100["total_gpus"], h100["allocated_gpus"], h100["free_gpus"], h100["unavailable_gpus"]) == (32, 7, 17, 8)
    assert h100["largest_free_block"] == 8 and h100["whole_free_nodes"] == 1 and h100["partially_used_nodes"] == 2
    assert before["stranded_gpus"] == 0
    assert after["stranded_gpus"] == 9 and after["pending_for_contiguous_gpus"] == 1
    a100 = next(p for p in after["pools"] if p["pool"] == "a100")
    assert a100["stranded_gpus"] == 0 and a100["free_gpus"] == 16


# ------------------------------------------------------------------------------- audit trail


def test_quota_change_is_recorded_with_before_and_after(fleet, admin) -> None:
    quota = fleet.ml.quotas.get()

    admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 24, "borrowing_limit": 8}, format="json")

    event = Event.objects.get(kind=EventKind.QUOTA_CHANGED)
    assert event.team == fleet.ml and event.actor == "user:root"
    assert event.data["before"]["nominal_gpus"] == 16 and event.data["after"]["nominal_gpus"] == 24


def test_priority_class_with_default_beyond_max_is_a_400(fleet, admin) -> None:
    r = admin.post(f"{J}/priority-classes/", {"name": "odd", "value": 1, "default_runtime_limit_s": 10,
                                             "max_runtime_limit_s": 5}, format="json")

    assert r.status_code == 400 and "default_runtime_limit_s" in r.json()["errors"]


def test_lending_limit_above_nominal_is_a_400_naming_it_and_changes_nothing(fleet, admin) -> None:
    quota = fleet.ml.quotas.get()

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"lending_limit": 17}, format="json")
    lowered = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 4, "lending_limit": 8}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["lending_limit"]
    assert "more than nominal_gpus (16)" in r.json()["errors"]["lending_limit"][0]
    assert lowered.status_code == 400 and "more than nominal_gpus (4)" in lowered.json()["errors"]["lending_limit"][0]
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.lending_limit) == (16, None)
    assert admin.patch(f"{J}/quotas/{quota.pk}/", {"lending_limit": 16}, format="json").status_code == 200


def test_admin_form_refuses_a_lending_limit_above_nominal(fleet) -> None:
    quota = fleet.ml.quotas.get()
    quota.lending_limit = 40
    with pytest.raises(DjangoValidationError) as caught:
        quota.full_clean()
    assert "lending_limit" in caught.value.message_dict


def test_duplicate_quota_is_a_400_naming_the_rule(fleet, admin) -> None:
    r = admin.post(f"{J}/quotas/", {"team": "ml", "gpu_type": "H100-80GB", "nominal_gpus": 1}, format="json")

    # on the field, naming the quota to change (test_adminapi_quota_duplicate.py)
    assert r.status_code == 400 and "ml already has a quota for H100-80GB" in r.json()["errors"]["gpu_type"][0]


# ------------------------------------------------------------------------------ query counts

LISTS = [
    ("jobs", lambda fl, i: f.make_job(fl.ml if i % 2 else fl.vision, project=fl.llm if i % 2 else None,
                                      submitter=fl.users["owner"])),
    ("teams", lambda fl, i: f.make_team(cohort=fl.ml.cohort, default_priority_class=fl.research)),
    ("projects", lambda fl, i: f.make_project(fl.ml)),
    ("cohorts", lambda fl, i: f.make_team(cohort=f.make_cohort())),
    ("quotas", lambda fl, i: f.make_quota(f.make_team(), fl.h100)),
    ("priority-classes", lambda fl, i: f.make_priority_class()),
    ("gpu-types", lambda fl, i: f.make_gpu_type()),
    ("price-rates", lambda fl, i: f.make_price_rate(f.make_gpu_type())),
    ("nodes", lambda fl, i: f.make_node(fl.a100)),
    ("events", lambda fl, i: Event.objects.create(created_at=timezone.now(), kind=EventKind.NODE_STATE, actor="t",
                                                  node=fl.nodes[0], team=fl.ml)),
]


@pytest.mark.parametrize("resource,make", LISTS, ids=[name for name, _ in LISTS])
def test_list_query_count_does_not_grow_with_rows(fleet, django_assert_max_num_queries, resource, make) -> None:
    """Token, membership, count, page (plus one prefetch where a list holds a list): 5 at
    most, for 3 rows or 40; quotas four more, once per page: three for what each team lends (the
    cohort split needs every team's quota, the live holdings and the fleet's capacity) and one
    for its `warnings` (every team's nominal per GPU type, against that same capacity); jobs one
    more, its page's ids read apart from their rows (services/job_pages.py), and one for the scheduling
    loop's state its page says (`loop`, api/pagination.py's JobsPagination)."""
    client = client_for(fleet, "admin")
    for i in range(40):
        make(fleet, i)

    with django_assert_max_num_queries(5 + {"quotas": 4, "jobs": 2}.get(resource, 0)):
        r = client.get(f"{J}/{resource}/", {"limit": 100})

    assert r.status_code == 200 and r.json()["count"] >= 40


def test_job_submit_query_count_is_bounded(fleet, alice, django_assert_max_num_queries) -> None:
    """Token, membership, team (with its default class), named class, project, the fleet and
    its GPU types (one query), and one statement for the job and its event; in the test's
    transaction a savepoint pair wraps that statement."""
    with django_assert_max_num_queries(9):
        r = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 8, "gpu_type": "H100-80GB", "priority_class": "research",
                                      "project": "llm"}, format="json")
    assert r.status_code == 201


# -------------------------------------------------------------------------------- throttling


def test_per_user_throttle_answers_429_with_retry_after(fleet, settings) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"user": "3/hour", "login": "1000/minute"}}
    user = f.make_user(team=fleet.ml)  # a fresh user: its counter starts at zero
    client = client_for(fleet, "owner")
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(user)}")

    codes = [client.get(f"{J}/jobs/").status_code for _ in range(4)]

    assert codes == [200, 200, 200, 429]
    r = client.get(f"{J}/jobs/")
    assert 0 < int(r.headers["Retry-After"]) <= 3600 and r.json()["code"] == "throttled"
    other = client_for(fleet, "other_team")  # others are not affected
    assert other.get(f"{J}/jobs/").status_code == 200


# ------------------------------------------------------------------------------------- docs


def test_schema_is_served_as_openapi_json(fleet, alice) -> None:
    r = alice.get("/api/schema/", {"format": "json"})

    assert r.status_code == 200
    schema = r.json()
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/jobs/{id}/explain/" in schema["paths"]
    submit = schema["components"]["schemas"]["JobSubmitRequest"]
    assert sorted(submit["required"]) == ["gpus", "name"]


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_api_viewers_load_their_scripts_from_our_static_files(fleet, page) -> None:
    client = client_for(fleet, "owner")
    html = client.get(page).content.decode()

    assert "/static/drf_spectacular_sidecar/" in html
    assert "cdn" not in html.lower()


def test_fast_job_payload_matches_the_documented_serializer(fleet, alice) -> None:
    """The submit and detail responses are built by job_payload; JobSerializer describes them
    in the schema. Every field, every type, identical."""
    from controlplane.api.serializers import JobSerializer, job_payload

    job = f.make_job(fleet.ml, project=fleet.llm, submitter=fleet.users["owner"], gpu_types=["H100-80GB"],
                     env={"A": "1"}, queue_position=4, eta=timezone.now(), started_at=timezone.now(), exit_code=0,
                     array_id="6f1c1ad2-6bb5-4c5e-9d5b-3a5b1e2f0c11", array_index=3)
    bare = f.make_job(fleet.vision)
    for one in (Job.objects.get(pk=job.pk), Job.objects.get(pk=bare.pk)):
        assert job_payload(one) == dict(JobSerializer(one).data)
    detail, page = alice.get(f"{J}/jobs/{job.pk}/").json(), alice.get(f"{J}/jobs/", {"name": job.name}).json()
    loop = detail.pop("loop")  # the detail's, as the list page's (not a row's)
    assert (loop["last_cycle_at"], loop["stalled"]) == (page["loop"]["last_cycle_at"], page["loop"]["stalled"])
    assert detail == page["results"][0]
