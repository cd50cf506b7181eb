"""The agent endpoints' fast validation path: whatever it accepts, the DRF serializers accept
with the same validated data; whatever they refuse, it hands to them (so the 400 still names
the field)."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import pytest

from controlplane.api.agent import BatchItemSerializer, SyncSerializer, _fast_sync
from tests.controlplane.loop_fixtures import agent_client, register_node

AT = "2026-03-01T12:00:00.250000+00:00"
EARLIER = "2026-03-01T11:59:50+00:00"


def agent_body() -> dict[str, Any]:
    """What qm-agent sends after a wave of short jobs."""
    return {
        "running": [7, 9],
        "known": "v1:0123456789abcdef0123",
        "reports": [
            {"kind": "started", "generation": 7, "at": AT},
            {"kind": "sample", "generation": 8, "started_at": EARLIER, "at": AT, "gpu_activity": 0.0, "steps": 0,
             "useful_tokens": 0},
            {"kind": "progress", "generation": 8, "at": AT, "steps": 12, "useful_tokens": 4096,
             "last_checkpoint_at": EARLIER},
            {"kind": "exited", "generation": 8, "at": AT, "exit_code": 0, "message": ""},
            {"kind": "lost", "generation": 5, "at": AT, "exit_code": -9, "message": "stopped: lease"},
            {"kind": "refused", "generation": 4, "at": "2026-03-01T13:00:00+01:00", "message": "older"},
        ],
    }


def drf(data: Any, batch_item: bool = False) -> dict[str, Any] | None:
    serializer = (BatchItemSerializer if batch_item else SyncSerializer)(data=data)
    if not serializer.is_valid():
        return None
    return normalise(serializer.validated_data)


def normalise(value: Any) -> Any:
    """Plain dicts and lists, datetimes as UTC instants (the serializer gives them in the
    current time zone, the fast path in UTC: the same instant)."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    return value


def test_what_the_agent_sends_takes_the_fast_path_with_the_serializers_result() -> None:
    body = agent_body()
    fast = _fast_sync(body)

    assert fast is not None
    assert normalise(fast) == drf(body)
    assert fast["reports"][5]["at"] == datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def test_a_batch_item_takes_the_fast_path_with_the_serializers_result() -> None:
    body = {**agent_body(), "name": "sim-001", "token": "qma_x", "renew": False}

    fast = _fast_sync(body, batch_item=True)

    assert fast is not None and normalise(fast) == drf(body, batch_item=True)


def mutate(path: list[Any], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(agent_body())
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


ODD_BODIES = [
    mutate(["running"], [0]), mutate(["running"], ["7"]), mutate(["running"], [True]), mutate(["running"], "7"),
    mutate(["goodbye"], "true"), mutate(["goodbye"], 1), mutate(["goodbye"], None), mutate(["known"], " v1 "),
    mutate(["known"], "x" * 65), mutate(["known"], None), mutate(["known"], ""), mutate(["known"], 5),
    mutate(["reports"], {}), mutate(["reports", 0, "kind"], "launched"), mutate(["reports", 0, "generation"], 0),
    mutate(["reports", 0, "generation"], "7"), mutate(["reports", 0, "generation"], 7.0),
    mutate(["reports", 0, "generation"], True), mutate(["reports", 0, "at"], "yesterday"),
    mutate(["reports", 0, "at"], "2026-03-01T12:00:00"), mutate(["reports", 0, "at"], None),
    mutate(["reports", 0, "at"], KeyError), mutate(["reports", 0, "at"], "2026-03-01T12:00:00Z"),
    mutate(["reports", 3, "exit_code"], KeyError), mutate(["reports", 3, "exit_code"], None),
    mutate(["reports", 3, "exit_code"], 256), mutate(["reports", 3, "exit_code"], -256),
    mutate(["reports", 3, "exit_code"], "0"), mutate(["reports", 3, "message"], "x" * 501),
    mutate(["reports", 3, "message"], " padded "), mutate(["reports", 3, "message"], "nul\x00"),
    mutate(["reports", 3, "message"], 12), mutate(["reports", 1, "started_at"], AT),
    mutate(["reports", 1, "started_at"], None), mutate(["reports", 1, "gpu_activity"], None),
    mutate(["reports", 1, "gpu_activity"], 1.5), mutate(["reports", 1, "gpu_activity"], 1),
    mutate(["reports", 1, "gpu_activity"], "0.5"), mutate(["reports", 1, "gpu_activity"], float("nan")),
    mutate(["reports", 2, "steps"], -1), mutate(["reports", 2, "steps"], None), mutate(["reports", 2, "steps"], 2.5),
    mutate(["reports", 2, "steps"], 2**63), mutate(["reports", 2, "useful_tokens"], 2**63),
    mutate(["reports", 2, "steps"], 2**63 - 1),
    mutate(["reports", 2, "last_checkpoint_at"], None), mutate(["reports", 2, "last_checkpoint_at"], "soon"),
    mutate(["reports", 0], "started"), mutate(["reports", 0, "extra"], {"ignored": True}),
]


@pytest.mark.parametrize("body", ODD_BODIES)
def test_the_fast_path_never_accepts_what_the_serializer_refuses_nor_differs_from_it(body: dict[str, Any]) -> None:
    fast = _fast_sync(body)
    expected = drf(body)

    if fast is not None:
        assert expected is not None and normalise(fast) == expected


def test_a_malformed_report_still_gets_a_400_naming_the_field(fleet: Any) -> None:
    _, token = register_node("gpu-01")
    body = mutate(["reports", 3, "exit_code"], KeyError)

    response = agent_client(token).post("/api/v1/agent/nodes/gpu-01/report", body, format="json")

    assert response.status_code == 400
    assert "exit_code" in response.content.decode()


@pytest.mark.parametrize("field", ["steps", "useful_tokens"])
def test_a_count_beyond_a_bigint_is_a_400_naming_it_and_the_largest_is_kept(fleet: Any, field: str) -> None:
    # Job.steps and Job.useful_tokens are bigints: 2**63 went through both paths and PostgreSQL's
    # "bigint out of range" made the whole report a 500 (the agent caps what a job writes at
    # 2**63 - 1; a report of another agent or a bug need not).
    from django.utils import timezone as django_timezone

    from controlplane.choices import EventKind
    from controlplane.models import Allocation, Event, Job
    from controlplane.services import cycle
    from tests.controlplane.loop_fixtures import make_job

    _, token = register_node("gpu-01")
    job = make_job(fleet, gpus=1)
    assert cycle.run_cycle("test").binds == 1
    generation = Allocation.objects.get(job=job).generation
    client = agent_client(token)

    def progress(value: int) -> Any:
        return client.post("/api/v1/agent/nodes/gpu-01/report", {"reports": [
            {"kind": "started", "generation": generation, "at": django_timezone.now().isoformat()},
            {"kind": "progress", "generation": generation, "at": django_timezone.now().isoformat(), field: value},
        ]}, format="json")

    def written() -> tuple[Any, ...]:
        # (the node's `node.agent_refused` event aside: a refused contact records it, from 6 Dec)
        return (list(Job.objects.filter(pk=job.pk).values()), list(Allocation.objects.filter(job=job).values()),
                Event.objects.exclude(kind=EventKind.NODE_AGENT_REFUSED).count())

    before = written()
    too_big = progress(2**63)
    assert too_big.status_code == 400 and field in too_big.json()["detail"], too_big.content
    # nothing of the refused batch was written, its 'started' report neither
    assert written() == before
    assert Event.objects.filter(kind=EventKind.NODE_AGENT_REFUSED, node__name="gpu-01").count() == 1
    assert progress(2**63 - 1).status_code == 200
    assert getattr(Job.objects.get(pk=job.pk), field) == 2**63 - 1


def test_a_log_chunk_offset_beyond_a_bigint_is_a_400_naming_it(fleet: Any) -> None:
    # JobLogChunk.offset is a bigint: until 5 Dec an offset of 2**63 passed both paths and
    # PostgreSQL's "bigint out of range" made the agent's whole contact a 500
    from controlplane.models import Allocation, JobLogChunk
    from controlplane.services import cycle
    from tests.controlplane.loop_fixtures import make_job

    _, token = register_node("gpu-01")
    job = make_job(fleet, gpus=1)
    assert cycle.run_cycle("test").binds == 1
    generation = Allocation.objects.get(job=job).generation
    chunk = {"generation": generation, "rank": 0, "offset": 2**63, "bytes": 3, "text": "abc"}

    response = agent_client(token).post("/api/v1/agent/nodes/gpu-01/heartbeat", {"logs": [chunk]}, format="json")

    assert response.status_code == 400, response.content
    assert "logs.0.offset" in response.json()["errors"]
    assert _fast_sync({"logs": [chunk]}) is None
    assert not JobLogChunk.objects.exists()
