"""/api/v1/maintenance-windows/: admins schedule, move and cancel windows; everyone signed in
reads them, each with the running jobs that will still hold GPUs when it begins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import Event, MaintenanceWindow, Node
from controlplane.services import reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

URL = "/api/v1/maintenance-windows/"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"nodes": ["h100-1", "h100-2"], "start_at": _iso(timezone.now() + timedelta(hours=1)),
                            "duration_s": 4 * 3600, "reason": "firmware upgrade"}
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def _run(fleet: Fleet, node: str, gpus: int, limit_s: int, team: Any = None, name: str = "train") -> int:
    job = f.make_job(team or fleet.ml, fleet.research, name=name, gpus=gpus, runtime_limit_s=limit_s)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=Node.objects.get(name=node).pk,
                                                         gpu_indices=list(range(gpus)))],
                             lease=lease, borrowed=False, at=timezone.now(), actor="test")
    return job.pk


def test_an_admin_schedules_a_window_and_the_answer_names_the_jobs_to_deal_with(
        admin: APIClient, fleet: Fleet) -> None:
    long = _run(fleet, "h100-1", 4, limit_s=8 * 3600)
    _run(fleet, "h100-2", 2, limit_s=600, name="short")  # ends long before the window

    r = admin.post(URL, _body(), format="json")

    assert r.status_code == 201, r.json()
    window = r.json()
    assert window["nodes"] == ["h100-1", "h100-2"] and window["reason"] == "firmware upgrade"
    assert window["state"] == "upcoming" and window["duration_s"] == 4 * 3600 and window["created_by"] == "root"
    assert window["cancelled_at"] is None
    [job] = window["affected_running_jobs"]
    assert job["id"] == long and job["name"] == "train" and job["team"] == "ml" and job["gpus"] == 4
    assert job["nodes"] == ["h100-1"] and job["runtime_limit_s"] == 8 * 3600
    assert MaintenanceWindow.objects.get(pk=window["id"]).nodes.count() == 2
    assert Event.objects.filter(reason="MaintenanceWindowCreated", actor="user:root").count() == 1


def test_a_pool_is_expanded_to_its_nodes(admin: APIClient, fleet: Fleet) -> None:
    r = admin.post(URL, _body(nodes=None, pool="a100"), format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["nodes"] == ["a100-0", "a100-1"]


@pytest.mark.parametrize(("overrides", "field", "words"), [
    ({"nodes": ["h100-1", "ghost"]}, "nodes", "no node named 'ghost'"),
    ({"nodes": []}, "nodes", "give at least one node"),
    ({"nodes": None, "pool": "tpu"}, "pool", "no pool named 'tpu'"),
    ({"reason": ""}, "reason", "give what the maintenance is"),
    ({"reason": None}, "reason", "give what the maintenance is"),
    ({"start_at": "tomorrow"}, "start_at", "'tomorrow' is not a time: give an RFC 3339 instant with its time zone"),
    ({"start_at": None}, "start_at", "give when the maintenance begins"),
    ({"duration_s": None}, "end_at", "give when the maintenance ends"),
    ({"duration_s": "4h"}, "duration_s", "is not a whole number"),
    ({"duration_s": 30 * 86400}, "duration_s", "a window lasts at most 14 d"),
    ({"duration_s": None, "end_at": "2020-01-01T00:00:00Z"}, "end_at", "not after its start"),
    ({"end_at": "2099-01-01T00:00:00Z"}, "end_at", "not both"),
    ({"starts": "now"}, "starts", "not a field of a maintenance window"),
    ({"start_at": "9999-12-31T23:00:00Z"}, "duration_s", "beyond the calendar"),
])
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(admin: APIClient, fleet: Fleet, overrides: Any,
                                                                 field: str, words: str) -> None:
    r = admin.post(URL, _body(**overrides), format="json")

    assert r.status_code == 400, r.json()
    assert field in r.json()["errors"], r.json()
    assert words in " ".join(r.json()["errors"][field]), r.json()
    assert r.json()["detail"].startswith("Invalid request.") and field in r.json()["detail"]
    assert not MaintenanceWindow.objects.exists()
    assert not Event.objects.filter(reason__startswith="Maintenance").exists()


def test_members_read_windows_but_only_admins_write_them(clients: dict[str, APIClient], admin: APIClient,
                                                         fleet: Fleet) -> None:
    window = admin.post(URL, _body(), format="json").json()
    bob, alice = clients["other_team"], clients["owner"]
    _run(fleet, "h100-2", 8, limit_s=86400, name="secret-run")
    detail = f"{URL}{window['id']}/"

    assert bob.get(URL).status_code == 200 and bob.get(URL).json()["count"] == 1
    # A job of another team: its team only.
    [seen] = bob.get(detail).json()["affected_running_jobs"]
    assert seen["id"] is None and seen["name"] is None and seen["team"] == "ml"
    assert alice.get(detail).json()["affected_running_jobs"][0]["name"] == "secret-run"
    for client in (alice, clients["finance"]):
        assert client.post(URL, _body(), format="json").status_code == 403
        assert client.patch(detail, {"reason": "mine"}, format="json").status_code == 403
        assert client.post(f"{detail}cancel/").status_code == 403
    assert clients["anonymous"].get(URL).status_code == 401
    assert clients["agent"].get(URL).status_code in (401, 403)
    assert admin.delete(detail).status_code == 405
    assert MaintenanceWindow.objects.get(pk=window["id"]).reason == "firmware upgrade"
    assert MaintenanceWindow.objects.count() == 1


def test_patch_moves_a_window_all_or_nothing(admin: APIClient, fleet: Fleet) -> None:
    window = admin.post(URL, _body(), format="json").json()
    detail = f"{URL}{window['id']}/"
    later = timezone.now() + timedelta(hours=5)
    too_late = admin.patch(detail, {"start_at": "9999-12-31T23:00:00Z"}, format="json")
    assert too_late.status_code == 400 and "beyond the calendar" in too_late.json()["errors"]["start_at"][0]

    refused = admin.patch(detail, {"start_at": _iso(later), "nodes": ["h100-0", "nope"]}, format="json")
    moved = admin.patch(detail, {"start_at": _iso(later), "nodes": ["h100-0"], "reason": "BIOS"}, format="json")

    assert refused.status_code == 400 and set(refused.json()["errors"]) == {"nodes"}
    assert moved.status_code == 200, moved.json()
    body = moved.json()
    assert body["nodes"] == ["h100-0"] and body["reason"] == "BIOS"
    assert body["start_at"] == _iso(later) and body["duration_s"] == 4 * 3600
    assert Event.objects.filter(reason="MaintenanceWindowChanged").count() == 1
    assert admin.patch(detail, {}, format="json").status_code == 400


def test_cancel_keeps_the_window_and_a_cancelled_one_is_history(admin: APIClient, fleet: Fleet) -> None:
    window = admin.post(URL, _body(), format="json").json()
    detail = f"{URL}{window['id']}/"

    r = admin.post(f"{detail}cancel/")

    assert r.status_code == 200
    assert r.json()["state"] == "cancelled" and r.json()["cancelled_by"] == "root"
    assert r.json()["affected_running_jobs"] == []
    assert admin.post(f"{detail}cancel/").status_code == 200  # again: nothing changes
    assert Event.objects.filter(reason="MaintenanceWindowCancelled").count() == 1
    changed = admin.patch(detail, {"reason": "again"}, format="json")
    assert changed.status_code == 409 and "was cancelled at" in changed.json()["detail"]
    assert admin.post(f"{detail}cancel/", {"why": "x"}, format="json").status_code == 400
    assert admin.get(detail).json()["state"] == "cancelled"


def test_filters_by_state_and_node(admin: APIClient, fleet: Fleet) -> None:
    now = timezone.now()
    upcoming = admin.post(URL, _body(nodes=["h100-0"]), format="json").json()["id"]
    # Begun a minute ago, it ends before the upcoming one on h100-0 begins (windows may not overlap).
    active = admin.post(URL, _body(nodes=["h100-1", "h100-0"], start_at=_iso(now - timedelta(minutes=1)),
                                   duration_s=1800), format="json").json()["id"]
    cancelled = admin.post(URL, _body(nodes=["a100-0"]), format="json").json()["id"]
    admin.post(f"{URL}{cancelled}/cancel/")

    def ids(query: str) -> list[int]:
        r = admin.get(URL + query)
        assert r.status_code == 200, r.json()
        return [w["id"] for w in r.json()["results"]]

    assert ids("?state=active") == [active]
    assert ids("?state=upcoming") == [upcoming]
    assert sorted(ids("?state=upcoming&state=active")) == sorted([upcoming, active])
    assert ids("?state=cancelled") == [cancelled]
    assert ids("?node=h100-0") == [active, upcoming]
    assert ids("?node=h100-1&state=upcoming") == []
    assert admin.get(URL + "?state=soon").status_code == 400
    assert admin.get(URL + "?nodes=h100-0").status_code == 400


def test_the_list_reads_in_a_number_of_queries_that_does_not_grow(admin: APIClient, fleet: Fleet) -> None:
    _run(fleet, "h100-1", 2, limit_s=86400)
    admin.post(URL, _body(), format="json")
    with CaptureQueriesContext(connection) as one:
        assert admin.get(URL).status_code == 200
    for i in range(8):
        admin.post(URL, _body(pool="h100", nodes=None, reason=f"w{i}", duration_s=3600,  # one after the other:
                              start_at=_iso(timezone.now() + timedelta(hours=6 + 2 * i))), format="json")  # no overlap
    with CaptureQueriesContext(connection) as nine:
        r = admin.get(URL)
    assert r.json()["count"] == 9 and all(len(w["affected_running_jobs"]) == 1 for w in r.json()["results"])
    assert len(nine) == len(one)


def test_the_schema_documents_the_endpoint(admin: APIClient) -> None:
    schema = admin.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    paths = schema["paths"]
    assert set(paths["/api/v1/maintenance-windows/"]) >= {"get", "post"}
    assert set(paths["/api/v1/maintenance-windows/{id}/"]) >= {"get", "patch"}
    assert "delete" not in paths["/api/v1/maintenance-windows/{id}/"]
    assert "post" in paths["/api/v1/maintenance-windows/{id}/cancel/"]


def _stored(nodes: list[str], start_h: float, end_h: float, reason: str, cancelled: bool = False) -> int:
    """A window written straight to the table, as before writes refused overlaps."""
    now = timezone.now()
    window = MaintenanceWindow.objects.create(start_at=now + timedelta(hours=start_h), end_at=now + timedelta(hours=end_h),
                                              reason=reason, created_at=now - timedelta(days=30),
                                              cancelled_at=now if cancelled else None)
    window.nodes.set(Node.objects.filter(name__in=nodes))
    return window.pk


def test_windows_stored_overlapping_before_the_rule_name_each_other(admin: APIClient, fleet: Fleet) -> None:
    a = _stored(["h100-0", "h100-1"], 1, 5, "a")
    b = _stored(["h100-1"], 3, 6, "b")                  # overlaps a on h100-1
    c = _stored(["h100-0"], 5, 7, "c")                  # back to back with a: no overlap
    d = _stored(["h100-2"], 2, 4, "d")                  # at a's time, on another node
    e = _stored(["h100-0"], 2, 3, "e", cancelled=True)  # cancelled: neither lists nor is listed
    f_ = _stored(["h100-1", "h100-0"], 5.5, 8, "f")     # overlaps b on h100-1 and c on h100-0
    past = _stored(["h100-3"], -30, -20, "past")        # ended, overlapping another ended one
    older = _stored(["h100-3"], -25, -10, "older")

    with CaptureQueriesContext(connection) as queries:
        r = admin.get(URL + "?limit=100")
    assert r.status_code == 200, r.json()
    got = {w["id"]: w["overlapping_windows"] for w in r.json()["results"]}
    assert got == {a: [b], b: [a, f_], c: [f_], d: [], e: [], f_: [b, c], past: [older], older: [past]}
    # read for all the windows at once: six more, each overlapping others, add no query
    for i in range(6):
        _stored(["h100-2", "h100-3"], 2 + i * 0.1, 9, f"more{i}")
    with CaptureQueriesContext(connection) as more:
        r = admin.get(URL + "?limit=100")
    assert len(more) == len(queries) and r.json()["count"] == 14
    assert {w["id"]: w["overlapping_windows"] for w in r.json()["results"]}[d] == sorted(
        w["id"] for w in r.json()["results"] if w["reason"].startswith("more"))
    assert admin.get(f"{URL}{b}/").json()["overlapping_windows"] == [a, f_]
    # once one of them is cancelled, the other stands alone
    admin.post(f"{URL}{b}/cancel/")
    assert admin.get(f"{URL}{a}/").json()["overlapping_windows"] == []
    assert admin.get(f"{URL}{b}/").json()["overlapping_windows"] == []
    # a window written through the API overlaps nothing: the rule refuses it
    r = admin.post(URL, _body(nodes=["h100-2"], start_at=_iso(timezone.now() + timedelta(hours=3))), format="json")
    assert r.status_code == 400 and "already in maintenance window" in r.json()["errors"]["nodes"][0], r.json()
