"""PUT replaces the whole record: a writable field left out is a 400 naming it, never kept.

Found 6 Dec: every endpoint taking PUT (the fleet's records and a user's webhooks) took one
that left out an optional field and kept the stored value, so PUT was PATCH under another
name: `PUT quotas/7/ {"team": "ml", "gpu_type": "H100-80GB", "nominal_gpus": 20}` answered 200
and the quota kept its borrowing limit, though a client replacing the record meant "no limit".
Which default a field left out should fall back to is not always plain (a team's priority
classes: [] means every class), so PUT now asks for every writable field the GET shows
("Required on PUT, …: use PATCH to change only some fields"), all named in one answer, and
writes nothing. PATCH keeps changing only what it is given. A field no GET shows (a hook's
`secret`, write-only) is the one exception: a record read and written back has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.models import Cohort, Event, NotificationHook, PriceRate, Quota
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db
J = "/api/v1"
HOOK = {"url": "https://hooks.slack.com/services/T0/B0/x", "events": ["started"], "team": "ml"}


def _hook(fleet: Fleet, alice: APIClient) -> str:
    made = alice.post(f"{J}/notification-hooks/", HOOK, format="json")
    assert made.status_code == 201, made.json()
    return f"{J}/notification-hooks/{made.json()['id']}/"


# endpoint: (its record's URL, a writable field with a default to leave out, another to change)
ENDPOINTS: dict[str, tuple[Callable[[Fleet, APIClient], str], str, tuple[str, Any]]] = {
    "teams": (lambda fl, _: f"{J}/teams/{fl.ml.pk}/", "priority_classes", ("description", "the ML team")),
    "projects": (lambda fl, _: f"{J}/projects/{fl.llm.pk}/", "description", ("name", "llm-2")),
    "cohorts": (lambda fl, _: f"{J}/cohorts/{Cohort.objects.get(name='all').pk}/", "description",
                ("name", "everyone")),
    "quotas": (lambda fl, _: f"{J}/quotas/{Quota.objects.get(team=fl.ml, gpu_type=fl.h100).pk}/",
               "borrowing_limit", ("nominal_gpus", 20)),
    "priority-classes": (lambda fl, _: f"{J}/priority-classes/{fl.research.pk}/", "preemption_budget",
                         ("description", "may be preempted")),
    "gpu-types": (lambda fl, _: f"{J}/gpu-types/{fl.a100.pk}/", "relative_throughput", ("memory_gb", 48)),
    "price-rates": (lambda fl, _: f"{J}/price-rates/{PriceRate.objects.get().pk}/", "capacity_tier",
                    ("usd_per_gpu_hour", "3.0000")),
    "nodes": (lambda fl, _: f"{J}/nodes/{fl.nodes[2].pk}/", "capacity_tier", ("pool", "h100-b")),
    "notification-hooks": (_hook, "active", ("events", ["started", "failed"])),
}


@pytest.fixture(params=list(ENDPOINTS))
def endpoint(request: Any, fleet: Fleet, alice: APIClient) -> tuple[str, str, tuple[str, Any]]:
    url_of, left_out, change = ENDPOINTS[request.param]
    return url_of(fleet, alice), left_out, change


def test_a_put_leaving_out_a_writable_field_is_refused_naming_it_and_writes_nothing(admin, endpoint) -> None:
    url, left_out, (changed, value) = endpoint
    before = admin.get(url).json()
    events = Event.objects.count()
    body = {k: v for k, v in before.items() if k != left_out}
    body[changed] = value

    r = admin.put(url, body, format="json")

    assert r.status_code == 400, (r.status_code, r.json())
    assert list(r.json()["errors"]) == [left_out], r.json()
    said = r.json()["errors"][left_out][0]
    assert "Required on PUT" in said and "PATCH" in said, said
    assert left_out in r.json()["detail"]
    assert admin.get(url).json() == before  # nothing half-written: the field changed alongside neither
    assert Event.objects.count() == events


def test_a_put_of_the_record_as_read_with_a_change_replaces_it(admin, endpoint) -> None:
    url, _, (changed, value) = endpoint
    body = {**admin.get(url).json(), changed: value}

    r = admin.put(url, body, format="json")

    assert r.status_code == 200, r.json()
    assert admin.get(url).json()[changed] == value


def test_a_patch_leaving_fields_out_keeps_them(admin, endpoint) -> None:
    url, left_out, (changed, value) = endpoint
    before = admin.get(url).json()

    r = admin.patch(url, {changed: value}, format="json")

    assert r.status_code == 200, r.json()
    after = admin.get(url).json()
    assert after[changed] == value and after[left_out] == before[left_out]


def test_a_put_names_every_writable_field_left_out_at_once(fleet, admin) -> None:
    r = admin.put(f"{J}/priority-classes/{fleet.research.pk}/", {"name": "research", "value": 100}, format="json")

    assert r.status_code == 400
    assert sorted(r.json()["errors"]) == [
        "budget_window_s", "default_runtime_limit_s", "description", "grace_period_s", "max_runtime_limit_s",
        "may_preempt_lower", "min_runtime_s", "preemptible", "preemption_budget"], r.json()


def test_a_put_with_a_bad_value_and_a_field_left_out_names_both(fleet, admin) -> None:
    url = f"{J}/gpu-types/{fleet.a100.pk}/"
    body = {k: v for k, v in admin.get(url).json().items() if k != "relative_throughput"}

    r = admin.put(url, {**body, "memory_gb": -1}, format="json")

    assert r.status_code == 400
    assert sorted(r.json()["errors"]) == ["memory_gb", "relative_throughput"], r.json()


def test_a_hooks_secret_no_get_shows_may_be_left_out_and_is_kept(fleet, alice) -> None:
    url = _hook(fleet, alice)

    secret = NotificationHook.objects.get().secret
    body = {k: v for k, v in alice.get(url).json().items()}
    assert "secret" not in body

    r = alice.put(url, {**body, "active": False}, format="json")

    assert r.status_code == 200, r.json()
    assert NotificationHook.objects.get().secret == secret and "secret" not in r.json()


def test_the_schema_says_a_put_requires_every_writable_field_and_a_patch_none() -> None:
    """A client generated from the schema sends what it marks required: PUT's body is a
    component of its own ("Whole…Request") listing every writable field a GET shows as required;
    POST's keeps its defaults, PATCH's requires nothing."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]

    def body(path: str, method: str) -> dict[str, Any]:
        ref = schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        return dict(components[ref.rsplit("/", 1)[1]])

    for path, writable in (
        ("/api/v1/quotas/{id}/", ["borrowing_limit", "gpu_type", "lending_limit", "nominal_gpus", "team"]),
        ("/api/v1/teams/{id}/", ["cohort", "default_priority_class", "description", "name", "priority_classes"]),
        ("/api/v1/notification-hooks/{id}/", ["active", "events", "team", "url"]),
    ):
        assert sorted(body(path, "put")["required"]) == writable, path
        assert "borrowing_limit" not in body("/api/v1/quotas/", "post").get("required", [])
        assert not body(path, "patch").get("required")
    assert "secret" in body("/api/v1/notification-hooks/{id}/", "put")["properties"]
