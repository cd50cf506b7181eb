"""The agent endpoints against hostile bodies: every one is a 4xx naming the field (when there
is one), never a 500, and nothing of a refused request is written.

Real HTTP requests through the test client, against PostgreSQL. Each row: the endpoint, the
body (JSON, or raw bytes), the status, and the field the 400 names. The rows marked "was a 500"
were found by this table on 5 Dec:
  - a body nested deeper than Python's JSON decoder goes raised RecursionError (not the
    ValueError DRF's parser catches): every agent endpoint answered 500;
  - a lone surrogate (`"\\ud800"`, valid JSON, no UTF-8 form) passed the fast validation path
    that the CharField would refuse: in a log chunk's text, a batch item's name or token, or a
    launch failure's words, PostgreSQL's driver or the token hash raised UnicodeEncodeError;
  - an unknown token with a node name holding NUL or a lone surrogate (a registration's body,
    or the path of a heartbeat) was looked up to say "retired": DataError/UnicodeEncodeError;
and the rows marked "was 2xx" went through unbounded: a device's index and memory (into the
node's registration event as given), a duplicate device index, a generation beyond a bigint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test.utils import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import EventKind
from controlplane.models import Allocation, Event, Job, JobLogChunk, Node, UsageSample
from controlplane.services import cycle
from tests.controlplane.built_once import Shared, built_once
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    agent_client,
    build_loop_fleet,
    make_job,
    register_node,
)

pytestmark = pytest.mark.django_db

REGISTER = {"name": "gpu-01", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96,
            "memory_gb": 1024, "leaf_switch": "leaf-1", "spine": "spine-1"}
DEEP = "[" * 100_000 + "]" * 100_000
SURROGATE = "\ud800"  # json.dumps writes it as the escape "\ud800", which json.loads gives back


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@dataclass
class Node0:
    """gpu-0, registered, running one job's generation `gen`."""

    token: str
    gen: int
    now: str


def devices(*entries: dict[str, Any]) -> dict[str, Any]:
    return {**REGISTER, "devices": list(entries)}


def dev(index: Any = 0, **fields: Any) -> dict[str, Any]:
    return {"index": index, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{index}", "memory_mb": 81559, **fields}


def report(n: Node0, **fields: Any) -> dict[str, Any]:
    return {"reports": [{"kind": "progress", "generation": n.gen, "at": n.now, **fields}]}


def chunk(n: Node0, **fields: Any) -> dict[str, Any]:
    return {"logs": [{"generation": n.gen, "rank": 0, "offset": 0, "bytes": 3, "text": "abc", **fields}]}


def item(n: Node0, **fields: Any) -> dict[str, Any]:
    return {"nodes": [{"name": "gpu-0", "token": n.token, **fields}]}


Body = Callable[[Node0], Any]
# (id, who asks: register | stranger | node, path, body, content type, status, field the 400 names)
CASES: list[tuple[str, str, str, Body, str, int, str | None]] = [
    # registration: the devices (was 2xx, bar the negative ones)
    ("device_memory_1e30", "register", "register", lambda n: devices(dev(0), dev(1), dev(2, memory_mb=10**30)),
     "json", 400, "devices.2.memory_mb"),
    ("device_memory_2**31", "register", "register", lambda n: devices(dev(0, memory_mb=2**31)), "json", 400,
     "devices.0.memory_mb"),
    ("device_memory_negative", "register", "register", lambda n: devices(dev(0, memory_mb=-1)), "json", 400,
     "devices.0.memory_mb"),
    ("device_memory_float", "register", "register", lambda n: devices(dev(0, memory_mb=1.5)), "json", 400,
     "devices.0.memory_mb"),
    ("device_index_negative", "register", "register", lambda n: devices(dev(0), dev(-1)), "json", 400,
     "devices.1.index"),
    ("device_index_1024", "register", "register", lambda n: devices(dev(1024)), "json", 400, "devices.0.index"),
    ("device_index_2**63", "register", "register", lambda n: devices(dev(2**63)), "json", 400, "devices.0.index"),
    ("device_index_fraction", "register", "register", lambda n: devices(dev(1.5)), "json", 400, "devices.0.index"),
    ("device_index_word", "register", "register", lambda n: devices(dev("one")), "json", 400, "devices.0.index"),
    ("device_index_null", "register", "register", lambda n: devices(dev(None)), "json", 400, "devices.0.index"),
    ("device_index_twice", "register", "register", lambda n: devices(dev(0), dev(1), dev(0)), "json", 400,
     "devices.2.index"),
    ("device_null", "register", "register", lambda n: devices(dev(0), None), "json", 400, "devices.1"),
    ("devices_not_a_list", "register", "register", lambda n: {**REGISTER, "devices": "0,1"}, "json", 400, "devices"),
    ("devices_1025", "register", "register", lambda n: devices(*(dev(i % 1024) for i in range(1025))), "json", 400,
     "devices"),
    ("device_name_nul", "register", "register", lambda n: devices(dev(0, name="H100\x00")), "json", 400,
     "devices.0.name"),
    ("device_name_surrogate", "register", "register", lambda n: devices(dev(0, name=SURROGATE)), "json", 400,
     "devices.0.name"),
    ("device_uuid_long", "register", "register", lambda n: devices(dev(0, uuid="G" * 129)), "json", 400,
     "devices.0.uuid"),
    # registration: the node's own fields
    ("register_running_2**63", "register", "register", lambda n: {**REGISTER, "running": [2**63]}, "json", 400, "running.0"),
    ("gpu_count_1025", "register", "register", lambda n: {**REGISTER, "gpu_count": 1025}, "json", 400, "gpu_count"),
    ("cpus_negative", "register", "register", lambda n: {**REGISTER, "cpus": -1}, "json", 400, "cpus"),
    ("memory_gb_1e30", "register", "register", lambda n: {**REGISTER, "memory_gb": 1e30}, "json", 400, "memory_gb"),
    ("gpu_type_nul", "register", "register", lambda n: {**REGISTER, "gpu_type": "H100-80GB\x00"}, "json", 400,
     "gpu_type"),
    ("gpu_type_surrogate", "register", "register", lambda n: {**REGISTER, "gpu_type": SURROGATE}, "json", 400,
     "gpu_type"),
    ("pool_100k", "register", "register", lambda n: {**REGISTER, "pool": "p" * 100_000}, "json", 400, "pool"),
    ("leaf_switch_nul", "register", "register", lambda n: {**REGISTER, "leaf_switch": "a\x00"}, "json", 400,
     "leaf_switch"),
    ("name_nul", "register", "register", lambda n: {**REGISTER, "name": "gpu\x00"}, "json", 400, "name"),
    ("name_null", "register", "register", lambda n: {**REGISTER, "name": None}, "json", 400, "name"),
    ("self_fenced_before_year_1", "register", "register",
     lambda n: {**REGISTER, "self_fenced_at": "0001-01-01T00:00:00+01:00"}, "json", 400, "self_fenced_at"),
    ("simulated_word", "register", "register", lambda n: {**REGISTER, "simulated": "maybe"}, "json", 400,
     "simulated"),
    ("register_list", "register", "register", lambda n: [REGISTER], "json", 400, "non_field_errors"),
    ("register_null", "register", "register", lambda n: "null", "json", 400, "non_field_errors"),
    ("register_nan", "register", "register", lambda n: json.dumps(REGISTER)[:-1] + ', "cpus": NaN}', "json", 400,
     None),
    ("register_infinity", "register", "register", lambda n: json.dumps(REGISTER)[:-1] + ', "cpus": Infinity}',
     "json", 400, None),
    ("register_deep", "register", "register", lambda n: DEEP, "json", 400, None),  # was a 500
    ("register_not_json", "register", "register", lambda n: "name=gpu-01", "json", 400, None),
    ("register_not_utf8", "register", "register", lambda n: b'{"name": "\xff"}', "json", 400, None),
    ("register_text_plain", "register", "register", lambda n: json.dumps(REGISTER), "text/plain", 415, None),
    ("register_form", "register", "register", lambda n: "name=gpu-01", "application/x-www-form-urlencoded", 415,
     None),
    # an unknown token: the node named is looked up only to say "retired"
    ("stranger_name_nul", "stranger", "register", lambda n: {**REGISTER, "name": "gpu\x00"}, "json", 401,
     None),  # was a 500
    ("stranger_name_surrogate", "stranger", "register", lambda n: {**REGISTER, "name": SURROGATE}, "json", 401,
     None),  # was a 500
    ("device_name_escape", "register", "register", lambda n: devices(dev(0, name="NVIDIA\x1b]0;owned\x07")),
     "json", 400, "devices.0.name"),
    ("gpu_type_rlo", "register", "register", lambda n: {**REGISTER, "gpu_type": "H100\u202e-80GB"}, "json", 400,
     "gpu_type"),
    ("stranger_deep", "stranger", "register", lambda n: DEEP, "json", 400, None),  # was a 500
    ("stranger_path_nul", "stranger", "nodes/gpu%00/heartbeat", lambda n: {}, "json", 401, None),  # was a 500
    # heartbeats and reports
    ("report_generation_2**63", "node", "nodes/gpu-0/report", lambda n: report(n, generation=2**63), "json", 400,
     "reports.0.generation"),
    ("report_generation_zero", "node", "nodes/gpu-0/report", lambda n: report(n, generation=0), "json", 400,
     "reports.0.generation"),
    ("report_generation_word", "node", "nodes/gpu-0/report", lambda n: report(n, generation="seven"), "json", 400,
     "reports.0.generation"),
    ("report_launch_failed_surrogate", "node", "nodes/gpu-0/report",
     lambda n: report(n, kind="exited", exit_code=126, message="launch failed: " + SURROGATE), "json", 400,
     "reports.0.message"),  # was a 500
    # text by the one rule for it (services/plain_text.py), as the rest of the API reads text (7 Dec;
    # the exact words: test_agent_text_fields_read_by_the_rule_for_text below)
    ("report_message_escape", "node", "nodes/gpu-0/report",
     lambda n: report(n, kind="exited", exit_code=126, message="launch failed: \x1b[2J"), "json", 400,
     "reports.0.message"),
    ("report_message_rlo", "node", "nodes/gpu-0/report", lambda n: report(n, message="done \u202egpj.exe"), "json",
     400, "reports.0.message"),
    ("known_bidi", "node", "nodes/gpu-0/heartbeat", lambda n: {"known": "v1\u2066"}, "json", 400, "known"),
    ("batch_name_escape", "node", "nodes/heartbeats",
     lambda n: {"nodes": [{"name": "gpu-0\x1b[31m", "token": n.token}]}, "json", 400, "nodes.0.name"),
    ("report_at_before_year_1", "node", "nodes/gpu-0/report", lambda n: report(n, at="0001-01-01T00:00:00+01:00"),
     "json", 400, "reports.0.at"),
    ("report_at_number", "node", "nodes/gpu-0/report", lambda n: report(n, at=1764950400), "json", 400,
     "reports.0.at"),
    ("report_steps_negative", "node", "nodes/gpu-0/report", lambda n: report(n, steps=-1), "json", 400,
     "reports.0.steps"),
    ("report_exit_code_word", "node", "nodes/gpu-0/report",
     lambda n: report(n, kind="exited", exit_code="boom"), "json", 400, "reports.0.exit_code"),
    ("report_activity_1e400", "node", "nodes/gpu-0/report",
     lambda n: json.dumps(report(n, kind="sample", started_at="2026-01-01T00:00:00Z")).replace(
         '"sample"', '"sample", "gpu_activity": 1e400'), "json", 400, "reports.0.gpu_activity"),
    ("report_activity_infinity", "node", "nodes/gpu-0/report",
     lambda n: json.dumps(report(n, kind="sample", started_at="2026-01-01T00:00:00Z")).replace(
         '"sample"', '"sample", "gpu_activity": Infinity'), "json", 400, None),
    ("report_message_object", "node", "nodes/gpu-0/report", lambda n: report(n, message={"a": None}), "json", 400,
     "reports.0.message"),
    ("report_null", "node", "nodes/gpu-0/report", lambda n: {"reports": [None]}, "json", 400, "reports.0"),
    ("reports_null", "node", "nodes/gpu-0/report", lambda n: {"reports": None}, "json", 400, "reports"),
    ("reports_2001", "node", "nodes/gpu-0/report", lambda n: {"reports": report(n)["reports"] * 2001}, "json", 400,
     "reports"),
    ("heartbeat_running_2**63", "node", "nodes/gpu-0/heartbeat", lambda n: {"running": [n.gen, 2**63]}, "json", 400,
     "running.1"),
    ("running_null", "node", "nodes/gpu-0/heartbeat", lambda n: {"running": [None]}, "json", 400, "running.0"),
    ("known_surrogate", "node", "nodes/gpu-0/heartbeat", lambda n: {"known": SURROGATE}, "json", 400, "known"),
    ("goodbye_null", "node", "nodes/gpu-0/heartbeat", lambda n: {"goodbye": None}, "json", 400, "goodbye"),
    ("log_generation_2**63", "node", "nodes/gpu-0/heartbeat", lambda n: chunk(n, generation=2**63), "json", 400,
     "logs.0.generation"),
    ("log_text_surrogate", "node", "nodes/gpu-0/heartbeat", lambda n: chunk(n, text="a" + SURROGATE + "c"), "json",
     400, "logs.0.text"),  # was a 500
    ("log_text_beyond_its_bytes", "node", "nodes/gpu-0/heartbeat", lambda n: chunk(n, bytes=1), "json", 400,
     "logs.0.text"),  # was 2xx: 3 characters stored for 1 byte, the contact's byte cap bypassed
    ("log_text_nul", "node", "nodes/gpu-0/heartbeat", lambda n: chunk(n, text="a\x00c"), "json", 400, "logs.0.text"),
    ("log_rank_negative", "node", "nodes/gpu-0/heartbeat", lambda n: chunk(n, rank=-1), "json", 400, "logs.0.rank"),
    ("log_null", "node", "nodes/gpu-0/heartbeat", lambda n: {"logs": [None]}, "json", 400, "logs.0"),
    ("heartbeat_list", "node", "nodes/gpu-0/heartbeat", lambda n: [], "json", 400, "non_field_errors"),
    ("heartbeat_deep", "node", "nodes/gpu-0/heartbeat", lambda n: DEEP, "json", 400, None),  # was a 500
    ("heartbeat_nan", "node", "nodes/gpu-0/heartbeat", lambda n: '{"running": [NaN]}', "json", 400, None),
    ("heartbeat_not_json", "node", "nodes/gpu-0/heartbeat", lambda n: "{running: []}", "json", 400, None),
    ("heartbeat_text_plain", "node", "nodes/gpu-0/heartbeat", lambda n: "{}", "text/plain", 415, None),
    # a batch of heartbeats (each item carries its node's token)
    ("batch_token_surrogate", "node", "nodes/heartbeats",
     lambda n: {"nodes": [{"name": "gpu-0", "token": "qma_" + SURROGATE}]}, "json", 400,
     "nodes.0.token"),  # was a 500
    ("batch_name_surrogate", "node", "nodes/heartbeats",
     lambda n: {"nodes": [{"name": "gpu-" + SURROGATE, "token": n.token}]}, "json", 400, "nodes.0.name"),  # was a 500
    ("batch_generation_2**63", "node", "nodes/heartbeats", lambda n: item(n, **report(n, generation=2**63)), "json",
     400, "nodes.0.reports.0.generation"),
    ("batch_log_surrogate", "node", "nodes/heartbeats", lambda n: item(n, **chunk(n, text=SURROGATE)), "json", 400,
     "nodes.0.logs.0.text"),  # was a 500
    ("batch_nodes_null", "node", "nodes/heartbeats", lambda n: {"nodes": None}, "json", 400, "nodes"),
    ("batch_deep", "node", "nodes/heartbeats", lambda n: DEEP, "json", 400, None),  # was a 500
    ("wait_name_nul", "node", "nodes/wait", lambda n: {"nodes": [{"name": "gpu\x000", "token": n.token}],
                                                      "timeout_s": 0}, "json", 400, "nodes.0.name"),
    # the long poll
    ("wait_running_2**63", "node", "nodes/wait", lambda n: {**item(n, running=[2**63]), "timeout_s": 0}, "json", 400,
     "nodes.0.running.0"),
    ("wait_timeout_nan", "node", "nodes/wait", lambda n: json.dumps(item(n))[:-1] + ', "timeout_s": NaN}', "json",
     400, None),
    ("wait_timeout_negative", "node", "nodes/wait", lambda n: {**item(n), "timeout_s": -1}, "json", 400,
     "timeout_s"),
    ("wait_nodes_empty", "node", "nodes/wait", lambda n: {"nodes": []}, "json", 400, "nodes"),
    ("wait_deep", "node", "nodes/wait", lambda n: DEEP, "json", 400, None),  # was a 500
]


def _written() -> tuple[Any, ...]:
    """Everything a refused request must leave as it was (a heartbeat's lease renewal too), but
    the node's `node.agent_refused` event a refused contact of its own agent records (from 6 Dec;
    tests/controlplane/api/test_agent_contact_refused_event.py)."""
    return (
        list(Node.objects.order_by("pk").values()), list(Job.objects.order_by("pk").values()),
        list(Allocation.objects.order_by("pk").values()),
        Event.objects.exclude(kind=EventKind.NODE_AGENT_REFUSED).count(), JobLogChunk.objects.count(),
        UsageSample.objects.count(),
    )


AT = "2026-03-01T12:00:00+00:00"
LOG = {"generation": 7, "rank": 0, "offset": 0, "bytes": 3, "text": "abc"}


@pytest.mark.parametrize("body", [
    {"reports": [{"kind": "exited", "generation": 7, "at": AT, "exit_code": 126, "message": "launch failed: \ud800"}]},
    {"reports": [{"kind": "progress", "generation": 2**63, "at": AT}]},
    {"running": [2**63]},
    {"known": "v1:\ud800"},
    {"logs": [{**LOG, "text": "a\ud800c"}]},
    {"logs": [{**LOG, "generation": 2**63}]},
    {"logs": [{**LOG, "bytes": 2}]},
    {"reports": [{"kind": "exited", "generation": 7, "at": AT, "exit_code": 126, "message": "launch failed: \x1b[2J"}]},
    {"reports": [{"kind": "progress", "generation": 7, "at": AT, "message": "ok\u202e"}]},
    {"known": "v1:\x07"},
], ids=["words_surrogate", "report_generation", "running", "known_surrogate", "log_surrogate", "log_generation",
        "log_text_beyond_bytes", "words_escape", "words_rlo", "known_bell"])
def test_the_fast_path_hands_what_the_serializer_refuses_to_it(body: dict[str, Any]) -> None:
    # The fast path accepts only what the serializers accept (test_agent_fast_validation.py);
    # these it let through until 5 Dec.
    from controlplane.api.agent import SyncSerializer, _fast_sync

    assert _fast_sync(body) is None
    assert not SyncSerializer(data=body).is_valid()
    assert _fast_sync({**body, "name": "sim-001", "token": "qma_x"}, batch_item=True) is None


# The fast path's table above comes first: the tests below share one build of gpu-0 at work
# (tests/controlplane/built_once.py), and a test without it may not run beside it.
SHARED = Shared()


@pytest.fixture(scope="module")
def _node0_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Node0]:
    """gpu-0 registered and bound to its job by a cycle, once for the module's 84 tests on it
    instead of for each (three quarters of the file's time: 8.6-13.0 s at a load of 8-10, 5.2-10.1
    s so, side by side). Each test runs in a savepoint of it, rolled back after it: a test that
    registers gpu-01 or reports on gpu-0 leaves the next the rows it would have had."""

    def build() -> Node0:
        with override_settings(QM={**django_settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}):
            fleet = build_loop_fleet()
            _, token = register_node("gpu-0")
            job = make_job(fleet, name="j", gpus=1)
            assert cycle.run_cycle("worker-1").binds == 1
            return Node0(token, Allocation.objects.get(job=job).generation, timezone.now().isoformat())

    yield from built_once(django_db_blocker, build, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "node0")


@pytest.fixture
def node0(_node0_once: Node0, db: None) -> Node0:
    return _node0_once


def _client(who: str, n: Node0) -> APIClient:
    return agent_client({"register": BOOTSTRAP, "stranger": "qma_never-issued", "node": n.token}[who])


@pytest.mark.parametrize(("who", "path", "body", "content_type", "status", "field"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_hostile_agent_body_is_a_4xx_naming_the_field_and_writes_nothing(
        node0: Node0, who: str, path: str, body: Body, content_type: str, status: int, field: str | None) -> None:
    payload = body(node0)
    raw = payload if isinstance(payload, str | bytes) else json.dumps(payload)
    before = _written()

    response = _client(who, node0).generic("POST", f"/api/v1/agent/{path}", raw,
                                            content_type="application/json" if content_type == "json" else content_type)

    assert response.status_code == status, response.content[:500]
    answer = response.json()
    assert answer["detail"] and answer["code"]
    if field is not None:
        assert field in answer["errors"], answer
    assert _written() == before
    refused = list(Event.objects.filter(kind=EventKind.NODE_AGENT_REFUSED).values_list("node__name", flat=True))
    assert refused in ([], ["gpu-0"])  # at most the one event, of the node whose own token sent it


def test_the_largest_device_values_and_generation_are_taken(node0: Node0) -> None:
    body = devices(dev(0, memory_mb=2**31 - 1), dev(1023, memory_mb=0))

    registered = agent_client(BOOTSTRAP).post("/api/v1/agent/register", body, format="json")

    assert registered.status_code == 201, registered.content
    event = Event.objects.filter(node__name="gpu-01").order_by("pk").first()
    assert event is not None and [(d["index"], d["memory_mb"]) for d in event.data["devices"]] == [
        (0, 2**31 - 1), (1023, 0)]
    # a generation no run has: stale, the agent is told to stop it, not refused
    stale = agent_client(node0.token).post("/api/v1/agent/nodes/gpu-0/report", report(node0, generation=2**63 - 1),
                                           format="json")
    assert stale.status_code == 200 and stale.json()["stale_reports"] == [2**63 - 1]


def test_a_device_given_twice_is_named_with_its_first(node0: Node0) -> None:
    response = agent_client(BOOTSTRAP).post("/api/v1/agent/register", devices(dev(0), dev(1), dev(1)), format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"devices.2.index": ["Device index 1 is given twice (also devices.1)."]}


def test_agent_text_fields_read_by_the_rule_for_text(node0: Node0) -> None:
    """The agent's words and names in the one rule's words (services/plain_text.py), in the agent
    protocol's own error format; a launch failure's words may have several lines."""
    refused = agent_client(node0.token).post(
        "/api/v1/agent/nodes/gpu-0/report", report(node0, message="launch failed: \x1b[2J"), format="json")
    assert refused.status_code == 400, refused.content[:300]
    assert refused.json()["errors"] == {
        "reports.0.message": ["contains a control character (U+001B, an escape) at position 16"]}, refused.json()

    registered = agent_client(BOOTSTRAP).post("/api/v1/agent/register", {**REGISTER, "gpu_type": "H100\u202e-80GB"},
                                              format="json")
    assert registered.status_code == 400, registered.content[:300]
    assert registered.json()["errors"] == {"gpu_type": ["contains a bidirectional control (U+202E) at position 5"]}

    taken = agent_client(node0.token).post(
        "/api/v1/agent/nodes/gpu-0/report", report(node0, message="launch failed:\n\tno such file"), format="json")
    assert taken.status_code == 200, taken.content[:300]


def test_a_jobs_output_keeps_its_escapes_and_carriage_returns(node0: Node0) -> None:
    # process output is the job's own, exempt from the rule for text (colours, progress bars)
    text = "\x1b[32mok\x1b[0m\r"
    response = agent_client(node0.token).post("/api/v1/agent/nodes/gpu-0/heartbeat",
                                              chunk(node0, text=text, bytes=len(text.encode())), format="json")

    assert response.status_code == 200, response.content[:300]
    assert JobLogChunk.objects.get().text == text
