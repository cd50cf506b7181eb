"""The agent endpoints: authentication, registration, heartbeat and desired state."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node
from tests.controlplane import factories
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, agent_client, bind, make_job, register_node

REGISTER = "/api/v1/agent/register"


def heartbeat_url(name: str) -> str:
    return f"/api/v1/agent/nodes/{name}/heartbeat"


def register_body(name: str = "gpu-01", **overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": name, "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96, "memory_gb": 1024,
        "leaf_switch": "leaf-1", "spine": "spine-1",
    }
    body.update(overrides)
    return body


def test_register_with_the_bootstrap_secret_creates_the_node_and_stores_only_the_token_hash(fleet: LoopFleet) -> None:
    response = agent_client(BOOTSTRAP).post(REGISTER, register_body(), format="json")

    assert response.status_code == 201, response.content
    token = response.json()["token"]
    node = Node.objects.get(name="gpu-01")
    assert node.state == NodeState.READY and node.gpu_count == 8
    assert node.agent_token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in node.agent_token_hash
    assert node.agent_lease_expires_at > timezone.now()
    assert Event.objects.filter(kind=EventKind.NODE_REGISTERED, node=node).exists()


def test_register_without_a_known_secret_is_401(fleet: LoopFleet) -> None:
    response = agent_client("qma_not-a-token").post(REGISTER, register_body(), format="json")

    assert response.status_code == 401
    assert not Node.objects.filter(name="gpu-01").exists()


def test_register_with_an_unknown_gpu_type_is_400_naming_the_field(fleet: LoopFleet) -> None:
    response = agent_client(BOOTSTRAP).post(REGISTER, register_body(gpu_type="B200-192GB"), format="json")

    assert response.status_code == 400
    body = response.json()
    assert "gpu_type" in body["errors"] and "B200-192GB" in body["detail"]
    assert not Node.objects.filter(name="gpu-01").exists()


@pytest.mark.parametrize("field", ["cpus", "memory_gb"])
@pytest.mark.parametrize("value", [2**31, 2**63], ids=["2**31", "2**63"])
def test_register_with_more_than_an_integer_column_holds_is_400_naming_the_field(
        fleet: LoopFleet, field: str, value: int) -> None:
    # Node.cpus and Node.memory_gb are integer columns: until 5 Dec PostgreSQL's "integer out of
    # range" made such a registration a 500
    response = agent_client(BOOTSTRAP).post(REGISTER, register_body(**{field: value}), format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["errors"] and "2147483647" in response.json()["detail"]
    assert not Node.objects.filter(name="gpu-01").exists()
    largest = agent_client(BOOTSTRAP).post(REGISTER, register_body(**{field: 2**31 - 1}), format="json")
    assert largest.status_code == 201 and getattr(Node.objects.get(name="gpu-01"), field) == 2**31 - 1


def test_first_registration_without_inventory_is_400_naming_each_missing_field(fleet: LoopFleet) -> None:
    response = agent_client(BOOTSTRAP).post(REGISTER, {"name": "gpu-01", "gpu_count": 8}, format="json")

    assert response.status_code == 400
    assert {"pool", "gpu_type", "leaf_switch", "spine"} <= set(response.json()["errors"])


def test_a_node_token_cannot_register_another_node(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-01")
    register_node("gpu-02")

    response = agent_client(token).post(REGISTER, register_body("gpu-02"), format="json")

    assert response.status_code == 403
    assert "gpu-02" in response.json()["detail"]


def test_an_agent_may_touch_only_its_own_nodes_endpoints(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-01")
    register_node("gpu-02")

    response = agent_client(token).post(heartbeat_url("gpu-02"), {"running": []}, format="json")

    assert response.status_code == 403
    assert "gpu-01" in response.json()["detail"]


def test_the_bootstrap_secret_only_registers(fleet: LoopFleet) -> None:
    register_node("gpu-01")

    response = agent_client(BOOTSTRAP).post(heartbeat_url("gpu-01"), {"running": []}, format="json")

    assert response.status_code == 403


def test_a_user_token_does_not_open_the_agent_endpoints(fleet: LoopFleet) -> None:
    register_node("gpu-01")
    user = factories.make_user("alice", team=fleet.team)
    client = agent_client("unused")
    client.credentials(HTTP_AUTHORIZATION=f"Token {factories.token_for(user)}")

    response = client.post(heartbeat_url("gpu-01"), {"running": []}, format="json")

    assert response.status_code == 401


def test_an_agent_token_does_not_open_the_user_api(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-01")

    response = agent_client(token).get("/api/v1/jobs/")

    assert response.status_code in (401, 403)


def test_re_registration_replaces_the_token(fleet: LoopFleet) -> None:
    _, old = register_node("gpu-01")
    register_node("gpu-01")

    response = agent_client(old).post(heartbeat_url("gpu-01"), {"running": []}, format="json")

    assert response.status_code == 401


def test_heartbeat_renews_the_lease(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01", now=timezone.now() - timedelta(seconds=10))
    before = node.agent_lease_expires_at

    response = agent_client(token).post(heartbeat_url("gpu-01"), {"running": []}, format="json")

    assert response.status_code == 200
    node.refresh_from_db()
    assert node.agent_lease_expires_at > before
    assert response.json()["reregister"] is False


def test_heartbeat_returns_each_member_of_a_gang_its_gpus_and_ranks(fleet: LoopFleet) -> None:
    a, token_a = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    job = make_job(fleet, gpus=4, gpus_per_node=2, command="python train.py", env={"LR": "0.1"})
    allocation = bind(job, {a: [6, 7], b: [0, 1]})

    desired_a = agent_client(token_a).post(heartbeat_url("gpu-a"), {}, format="json").json()["allocations"]
    desired_b = agent_client(token_b).post(heartbeat_url("gpu-b"), {}, format="json").json()["allocations"]

    (on_a,) = desired_a
    (on_b,) = desired_b
    assert on_a["generation"] == on_b["generation"] == allocation.generation
    assert on_a["gpus"] == [6, 7] and on_a["ranks"] == [0, 1] and on_a["node_rank"] == 0
    assert on_b["gpus"] == [0, 1] and on_b["ranks"] == [2, 3] and on_b["node_rank"] == 1
    assert on_a["world_size"] == on_b["world_size"] == 4 and on_a["nnodes"] == 2
    assert on_a["master_addr"] == on_b["master_addr"] == "gpu-a"
    assert on_a["master_port"] == on_b["master_port"]
    assert on_a["job"]["command"] == "python train.py" and on_a["job"]["env"] == {"LR": "0.1"}
    assert on_a["state"] == AllocationState.ACTIVE and on_a["release"] is None


def test_heartbeat_of_a_releasing_allocation_carries_the_remaining_grace(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    from controlplane.services import transitions

    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                            grace_period_s=30, at=timezone.now(), actor="test", message="make room")

    (desired,) = agent_client(token).post(heartbeat_url("gpu-01"), {}, format="json").json()["allocations"]

    assert desired["state"] == AllocationState.RELEASING
    assert desired["release"]["reason"] == "Preempted"
    assert 25 < desired["release"]["grace_remaining_s"] <= 30


def test_fencing_a_heartbeat_after_the_lease_ran_out_is_not_renewed_and_the_node_is_quarantined(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    old_generation = allocation.generation

    response = agent_client(token).post(heartbeat_url("gpu-01"), {"running": [old_generation]}, format="json")

    body = response.json()
    assert body["reregister"] is True and body["allocations"] == []
    assert body["stop"] == [old_generation]
    node.refresh_from_db()
    assert node.state == NodeState.QUARANTINED
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.FENCED and allocation.generation > old_generation
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.preemption_count == 0 and job.requeue_count == 1


def test_a_heartbeat_holding_the_current_version_is_answered_unchanged_until_the_nodes_work_changes(
    fleet: LoopFleet,
) -> None:
    node, token = register_node("gpu-01")
    other, _ = register_node("gpu-02")
    first = bind(make_job(fleet, name="first"), {node: [0]})
    client = agent_client(token)
    full = client.post(heartbeat_url("gpu-01"), {"running": []}, format="json").json()
    assert [a["generation"] for a in full["allocations"]] == [first.generation] and full["unchanged"] is False

    same = client.post(heartbeat_url("gpu-01"), {"running": [first.generation], "known": full["version"]},
                       format="json").json()
    assert same["unchanged"] is True and same["allocations"] == [] and same["stop"] == []
    assert same["version"] == full["version"] and same["reregister"] is False

    bind(make_job(fleet, name="elsewhere"), {other: [0]})  # another node's work changes nothing here
    assert client.post(heartbeat_url("gpu-01"), {"running": [first.generation], "known": full["version"]},
                       format="json").json()["unchanged"] is True

    second = bind(make_job(fleet, name="second"), {node: [1]})
    grown = client.post(heartbeat_url("gpu-01"), {"running": [first.generation], "known": full["version"]},
                        format="json").json()
    assert grown["unchanged"] is False and grown["version"] != full["version"]
    assert [a["generation"] for a in grown["allocations"]] == [first.generation, second.generation]


def test_fencing_an_agent_holding_an_old_version_still_learns_its_generation_is_stale(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    client = agent_client(token)
    known = client.post(heartbeat_url("gpu-01"), {"running": []}, format="json").json()["version"]
    from django.db import transaction

    from controlplane.services import reconcile, transitions

    with transaction.atomic():
        assert transitions.fence_allocation(allocation.pk, lease=reconcile.lock_scheduler_lease(), at=timezone.now(),
                                            actor="test", reason="Test")

    body = client.post(heartbeat_url("gpu-01"), {"running": [allocation.generation], "known": known},
                       format="json").json()

    assert body["unchanged"] is False and body["allocations"] == []
    assert body["stop"] == [allocation.generation]


def test_a_releasing_allocation_is_always_sent_in_full_with_its_grace(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    from controlplane.services import transitions

    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                            grace_period_s=30, at=timezone.now(), actor="test", message="make room")
    client = agent_client(token)
    known = client.post(heartbeat_url("gpu-01"), {"running": [allocation.generation]}, format="json").json()["version"]

    body = client.post(heartbeat_url("gpu-01"), {"running": [allocation.generation], "known": known},
                       format="json").json()

    assert body["unchanged"] is False
    (desired,) = body["allocations"]
    assert desired["state"] == AllocationState.RELEASING and 25 < desired["release"]["grace_remaining_s"] <= 30


def test_heartbeat_of_a_suspect_node_makes_it_ready_again(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    Node.objects.filter(pk=node.pk).update(state=NodeState.SUSPECT)

    agent_client(token).post(heartbeat_url("gpu-01"), {}, format="json")

    node.refresh_from_db()
    assert node.state == NodeState.READY
    assert Event.objects.filter(node=node, kind=EventKind.NODE_STATE, reason="HeartbeatsResumed").exists()


def test_partition_a_returning_agent_is_told_to_stop_work_that_was_fenced_while_it_was_away(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    old_generation = allocation.generation
    from controlplane.services import reconcile

    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))
    reconcile.reconcile_nodes()

    body = agent_client(token).post(heartbeat_url("gpu-01"), {"running": [old_generation]}, format="json").json()

    assert body["stop"] == [old_generation] and body["reregister"] is True
    assert Event.objects.filter(node=node, reason="StaleWorkStopped").exists()
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED


def test_registering_clean_after_quarantine_makes_the_node_ready(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-01")
    Node.objects.filter(pk=node.pk).update(state=NodeState.QUARANTINED)

    response = agent_client(BOOTSTRAP).post(REGISTER, {"name": "gpu-01", "running": []}, format="json")

    assert response.status_code == 201
    node.refresh_from_db()
    assert node.state == NodeState.READY
    assert Event.objects.filter(node=node, reason="RegisteredClean").exists()


def test_registering_keeps_a_cordoned_node_cordoned(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-01")
    Node.objects.filter(pk=node.pk).update(state=NodeState.CORDONED)

    agent_client(BOOTSTRAP).post(REGISTER, {"name": "gpu-01"}, format="json")

    node.refresh_from_db()
    assert node.state == NodeState.CORDONED


def test_a_restarted_agent_that_runs_nothing_gets_its_active_allocations_fenced_and_requeued(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    # Its old agent started it (one never started is the fresh agent's to start:
    # test_sre_restarted_agent_takes_over_unstarted_work.py).
    agent_client(token).post(heartbeat_url("gpu-01"), {"running": [allocation.generation], "reports": [
        {"kind": "started", "generation": allocation.generation, "at": timezone.now().isoformat()}]}, format="json")

    response = agent_client(BOOTSTRAP).post(REGISTER, {"name": "gpu-01", "running": []}, format="json")

    assert response.json()["settled_generations"] == [allocation.generation]
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.FENCED and allocation.release_reason == "AgentRestarted"
    job.refresh_from_db()
    assert job.state == JobState.PENDING


def test_registering_again_keeps_what_the_agent_still_runs(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})

    response = agent_client(token).post(REGISTER, {"name": "gpu-01", "running": [allocation.generation]}, format="json")

    assert response.json()["settled_generations"] == []
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.ACTIVE


def test_goodbye_takes_the_node_down_and_its_remaining_work_is_fenced(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    bind(job, {node: [0]})

    body = agent_client(token).post(heartbeat_url("gpu-01"), {"goodbye": True}, format="json").json()

    assert body["reregister"] is True
    node.refresh_from_db()
    assert node.state == NodeState.DOWN
    job.refresh_from_db()
    assert job.state == JobState.PENDING


def test_bad_reports_are_400_naming_the_field(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-01")
    now = timezone.now()

    response = agent_client(token).post(
        heartbeat_url("gpu-01"),
        {"reports": [{"kind": "sample", "generation": 1, "at": now.isoformat(), "started_at": now.isoformat(),
                      "gpu_activity": 0.5}]},
        format="json",
    )

    assert response.status_code == 400
    assert "reports.0.started_at" in response.json()["errors"]


def test_desired_state_of_a_busy_node_is_read_in_a_constant_number_of_queries(
    fleet: LoopFleet, django_assert_max_num_queries: object
) -> None:
    node, token = register_node("gpu-01")
    for gpu in range(8):
        bind(make_job(fleet, name=f"j{gpu}"), {node: [gpu]})
    client = agent_client(token)

    with django_assert_max_num_queries(8):  # type: ignore[operator]
        body = client.post(heartbeat_url("gpu-01"), {"running": []}, format="json").json()

    assert len(body["allocations"]) == 8
    assert Job.objects.filter(state=JobState.RUNNING).count() == 8


def test_a_batch_of_heartbeats_answers_every_node_alone_and_refuses_a_token_that_does_not_open_its_node(
    fleet: LoopFleet,
) -> None:
    a, token_a = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    allocation = bind(make_job(fleet), {b: [2]})
    Node.objects.filter(pk=a.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))
    before_b = Node.objects.get(pk=b.pk).agent_lease_expires_at

    response = agent_client("unused").post("/api/v1/agent/nodes/heartbeats", {"nodes": [
        {"name": "gpu-a", "token": token_a},
        {"name": "gpu-b", "token": token_b, "running": [allocation.generation]},
        {"name": "gpu-b", "token": token_a},
        {"name": "gpu-b", "token": "qma_forged"},
    ]}, format="json")

    assert response.status_code == 200
    on_a, on_b, borrowed, forged = response.json()["results"]
    assert on_a["status"] == 200 and on_a["reregister"] is True  # its lease had run out
    assert on_b["status"] == 200 and [x["generation"] for x in on_b["allocations"]] == [allocation.generation]
    assert borrowed["status"] == 403 and "gpu-a" in borrowed["detail"]
    assert forged["status"] == 401
    assert Node.objects.get(pk=a.pk).state == NodeState.QUARANTINED
    assert Node.objects.get(pk=b.pk).agent_lease_expires_at > before_b


def test_a_batch_report_does_not_renew_the_lease(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-a")
    before = Node.objects.get(pk=node.pk).agent_lease_expires_at

    results = agent_client("unused").post("/api/v1/agent/nodes/heartbeats", {"nodes": [
        {"name": "gpu-a", "token": token, "renew": False},
    ]}, format="json").json()["results"]

    assert results[0]["status"] == 200
    assert Node.objects.get(pk=node.pk).agent_lease_expires_at == before


def test_the_desired_state_of_a_whole_batch_is_read_in_a_constant_number_of_queries(
    fleet: LoopFleet, django_assert_max_num_queries: object
) -> None:
    tokens = {}
    for i in range(20):
        node, tokens[f"n{i}"] = register_node(f"n{i}")
        bind(make_job(fleet, name=f"j{i}"), {node: [0]})
    client = agent_client("unused")

    with django_assert_max_num_queries(5):  # type: ignore[operator]
        results = client.post("/api/v1/agent/nodes/heartbeats", {"nodes": [
            {"name": name, "token": token} for name, token in tokens.items()
        ]}, format="json").json()["results"]

    assert [len(r["allocations"]) for r in results] == [1] * 20


WAIT = "/api/v1/agent/nodes/wait"


def test_a_bind_wakes_its_nodes_agents_and_no_other(fleet: LoopFleet, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    node, token = register_node("gpu-01")
    other, other_token = register_node("gpu-02")
    client = agent_client("-")
    first = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}, {"name": "gpu-02", "token": other_token}],
                               "timeout_s": 5}, format="json")
    assert first.status_code == 200, first.content
    assert first.json()["woken"] == []  # no cursor yet: answered at once with the sequence number
    since = first.json()["seq"]

    with django_capture_on_commit_callbacks(execute=True):
        bind(make_job(fleet, gpus=2), {node: [0, 1]})

    started = timezone.now()
    reply = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}, {"name": "gpu-02", "token": other_token}],
                               "since": since, "timeout_s": 30}, format="json")
    assert reply.status_code == 200, reply.content
    assert reply.json()["woken"] == ["gpu-01"] and reply.json()["seq"] > since
    assert (timezone.now() - started).total_seconds() < 15  # at once, not at the end of its 30-s wait

    # Nothing new since: the poll waits its whole timeout and wakes nobody.
    quiet = client.post(WAIT, {"nodes": [{"name": "gpu-02", "token": other_token}], "since": reply.json()["seq"],
                               "timeout_s": 0.3}, format="json")
    assert quiet.status_code == 200 and quiet.json()["woken"] == []


def test_a_stop_wakes_the_agent_of_the_allocations_node(fleet: LoopFleet, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    from controlplane.services import transitions

    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet, gpus=1), {node: [0]})
    since = agent_client("-").post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}]}, format="json").json()["seq"]
    with django_capture_on_commit_callbacks(execute=True):
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                       grace_period_s=5, at=timezone.now(), actor="test", message="make room")
    reply = agent_client("-").post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}], "since": since,
                                          "timeout_s": 5}, format="json")
    assert reply.json()["woken"] == ["gpu-01"]


def test_wait_refuses_a_token_that_does_not_open_its_node(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-01")
    _, other_token = register_node("gpu-02")
    client = agent_client("-")

    alone = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": other_token}]}, format="json")
    assert alone.status_code == 401 and alone.json()["refused"] == ["gpu-01"]

    mixed = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}, {"name": "gpu-02", "token": token}],
                               "timeout_s": 0}, format="json")
    assert mixed.status_code == 200 and mixed.json()["refused"] == ["gpu-02"]


def test_wait_with_bad_input_is_400_naming_the_field(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-01")
    client = agent_client("-")
    too_long = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}], "timeout_s": 3600}, format="json")
    assert too_long.status_code == 400 and "timeout_s" in too_long.content.decode()
    nobody = client.post(WAIT, {"nodes": []}, format="json")
    assert nobody.status_code == 400 and "nodes" in nobody.content.decode()


def test_a_web_process_holds_no_more_waits_than_it_may(fleet: LoopFleet, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QM = {**settings.QM, "AGENT_MAX_WAITS": 0}
    _, token = register_node("gpu-01")
    client = agent_client("-")
    since = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}]}, format="json").json()["seq"]

    held = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": token}], "since": since, "timeout_s": 5},
                       format="json")
    assert held.status_code == 503 and held.json()["code"] == "waits_exhausted"


def test_a_wake_up_can_carry_the_woken_nodes_desired_state(fleet: LoopFleet, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    node, token = register_node("gpu-01")
    _, other_token = register_node("gpu-02")
    old = bind(make_job(fleet, gpus=1), {node: [7]})
    from controlplane.services import transitions

    with django_capture_on_commit_callbacks(execute=True):
        assert transitions.complete_release(old.pk, exit_code=0, at=timezone.now(), actor="test")
    client = agent_client("-")
    items = [{"name": "gpu-01", "token": token, "running": [old.generation]}, {"name": "gpu-02", "token": other_token}]
    since = client.post(WAIT, {"nodes": items, "desired": True}, format="json").json()["seq"]

    with django_capture_on_commit_callbacks(execute=True):
        allocation = bind(make_job(fleet, gpus=2), {node: [0, 1]})
    reply = client.post(WAIT, {"nodes": items, "since": since, "timeout_s": 5, "desired": True}, format="json")

    assert reply.status_code == 200, reply.content
    body = reply.json()
    assert body["woken"] == ["gpu-01"] and set(body["desired"]) == {"gpu-01"}  # only the woken node's
    desired = body["desired"]["gpu-01"]
    # Exactly what a report would answer: the new allocation, and the released one it still
    # runs named to stop; its lease is not renewed (a wait is not a heartbeat).
    assert [a["generation"] for a in desired["allocations"]] == [allocation.generation]
    assert desired["allocations"][0]["gpus"] == [0, 1]
    assert desired["stop"] == [old.generation] and desired["version"] and not desired["unchanged"]
    # ... not recorded as stale work still running there: it was released on its agent's word,
    # and the wait's `running` is as old as the wait (test_stale_work_event_from_old_running_list.py).
    assert not Event.objects.filter(node=node, reason="StaleWorkStopped").exists()
    node.refresh_from_db()
    before = node.agent_lease_expires_at
    again = client.post(WAIT, {"nodes": [{"name": "gpu-01", "token": token, "known": desired["version"]}],
                               "since": since, "timeout_s": 5, "desired": True}, format="json").json()
    assert again["desired"]["gpu-01"]["unchanged"] is True and again["desired"]["gpu-01"]["allocations"] == []
    node.refresh_from_db()
    assert node.agent_lease_expires_at == before

    # Without `desired`, a wake-up only names the nodes, as before.
    plain = client.post(WAIT, {"nodes": items, "since": since, "timeout_s": 5}, format="json").json()
    assert plain["woken"] == ["gpu-01"] and "desired" not in plain
