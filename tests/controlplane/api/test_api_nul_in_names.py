"""A name with a NUL character in it (text PostgreSQL cannot store) names no record: every field
that looks a record up by its name refuses it with a 400 on that field, never a 500 from the
lookup (the schema fuzz found it on POST price-rates/), and writes nothing. Query strings too."""

from __future__ import annotations

import pytest

from controlplane.models import Node, PriceRate, Quota

pytestmark = pytest.mark.django_db
NUL = "\x00"


@pytest.mark.parametrize(("path", "body", "field", "model", "at"), [
    ("price-rates/", {"gpu_type": f"H100-80GB{NUL}", "capacity_tier": "reserved", "usd_per_gpu_hour": "2.5",
                      "effective_from": "2026-12-01T00:00:00Z"}, "gpu_type", PriceRate, 10),
    ("quotas/", {"team": f"ml{NUL}", "gpu_type": "H100-80GB", "nominal_gpus": 8}, "team", Quota, 3),
    ("quotas/", {"team": "ml", "gpu_type": f"{NUL}", "nominal_gpus": 8}, "gpu_type", Quota, 1),
    ("nodes/", {"name": "n-new", "gpu_type": f"H100{NUL}80GB", "gpu_count": 8, "cpus": 64, "memory_gb": 512},
     "gpu_type", Node, 5),
], ids=["price-rate-gpu-type", "quota-team", "quota-gpu-type", "node-gpu-type"])
def test_a_name_with_a_nul_character_is_a_400_on_its_field(admin, path, body, field, model, at) -> None:
    before = model.objects.count()
    r = admin.post(f"/api/v1/{path}", body, format="json")
    assert r.status_code == 400, r.content[:300]
    # the one rule for text's words (services/plain_text.py), a body's text field's
    assert r.json()["errors"][field] == [f"contains a control character (U+0000, a NUL) at position {at}"], r.json()
    assert model.objects.count() == before


@pytest.mark.parametrize("query", ["jobs/?team=ml%00", "jobs/?state=pending%00", "nodes/?gpu_type=a%00",
                                   "events/?kind=job.bound%00", "quotas/?team=%00", "showback/?group_by=team%00",
                                   "jobs/?search=%00"])
def test_a_nul_character_in_a_query_is_never_a_500(admin, query) -> None:
    r = admin.get(f"/api/v1/{query}")
    assert r.status_code < 500, (query, r.status_code, r.content[:300])


# Found by the API audit (4 Dec): the hooks list's own `user` parameter (admins: one user's hooks)
# is no filterset's, and a NUL in it reached PostgreSQL: a DataError, answered 500.
@pytest.mark.parametrize(("user", "at"), [("alice%00", 6), ("%00", 1)])
def test_a_nul_character_in_the_hooks_user_parameter_is_a_400_naming_it(admin, user, at) -> None:
    r = admin.get(f"/api/v1/notification-hooks/?user={user}")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["errors"] == {"user": [f"contains a control character (U+0000, a NUL) at position {at}"]}, r.json()


def test_the_hooks_user_parameter_still_lists_that_users_hooks(admin, alice) -> None:
    made = alice.post("/api/v1/notification-hooks/", {"url": "https://hooks.slack.com/services/T0/B0/x",
                                                      "events": ["failed"]}, format="json")
    assert made.status_code == 201, made.json()

    r = admin.get("/api/v1/notification-hooks/?user=alice")

    assert r.status_code == 200 and [h["id"] for h in r.json()["results"]] == [made.json()["id"]], r.json()
