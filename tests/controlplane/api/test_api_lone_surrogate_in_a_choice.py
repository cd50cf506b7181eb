"""A lone surrogate (`"\\ud800"`, which JSON may carry but UTF-8 cannot) in a field whose error
repeats the value given (a choice, a dependency) is a 400 on that field, the value written as its
escape, and nothing written. Until 6 Dec the error was built, then could not be encoded: a 500
with no body (found by an exploratory run over every write body's fields)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.models import Event, Job, Node, PriceRate

pytestmark = pytest.mark.django_db
LONE = "\ud800"
TASK = {"name": "j", "gpus": 1, "command": "python train.py"}


def _pending(alice: Any) -> int:
    return alice.post("/api/v1/jobs/", TASK, format="json").json()["id"]


def _array(alice: Any) -> str:
    return alice.post("/api/v1/job-arrays/", {**TASK, "array": "0-1"}, format="json").json()["array_id"]


NODE = {"name": "n-new", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 64, "memory_gb": 512}
PRICE = {"gpu_type": "A100-40GB", "usd_per_gpu_hour": "1.5", "effective_from": "2026-12-01T00:00:00Z"}

CASES = [
    ("owner", "post", lambda c: "jobs/", {**TASK, "workload": LONE}, "workload"),
    ("owner", "post", lambda c: "jobs/", {**TASK, "topology": LONE}, "topology"),
    ("owner", "post", lambda c: "jobs/", {**TASK, "dependency_mode": LONE}, "dependency_mode"),
    ("owner", "post", lambda c: "jobs/", {**TASK, "dependencies": LONE}, "dependencies"),
    ("owner", "post", lambda c: "jobs/", {**TASK, "dependencies": [{"job": 1, "condition": LONE}]}, "dependencies"),
    ("owner", "patch", lambda c: f"jobs/{_pending(c)}/", {"topology": LONE}, "topology"),
    ("owner", "patch", lambda c: f"jobs/{_pending(c)}/", {"dependency_mode": LONE}, "dependency_mode"),
    ("owner", "post", lambda c: f"job-arrays/{_array(c)}/requeue/", {"states": [LONE]}, "states"),
    ("admin", "post", lambda c: "nodes/", {**NODE, "capacity_tier": LONE}, "capacity_tier"),
    ("admin", "patch", lambda c: f"nodes/{Node.objects.get(name='h100-1').pk}/", {"capacity_tier": LONE}, "capacity_tier"),
    ("admin", "post", lambda c: "price-rates/", {**PRICE, "capacity_tier": LONE}, "capacity_tier"),
]


@pytest.mark.parametrize(("role", "method", "path", "body", "field"), CASES,
                         ids=[f"{i}-{method}-{field}" for i, (_, method, _, _, field) in enumerate(CASES)])
def test_a_lone_surrogate_is_a_400_on_its_field(fleet, clients, role, method, path, body, field) -> None:
    client = clients[role]
    url = f"/api/v1/{path(client)}"
    before = (Job.objects.count(), Event.objects.count(), Node.objects.count(), PriceRate.objects.count(),
              list(Job.objects.order_by("pk").values_list("topology", "dependency_mode", "state")),
              list(Node.objects.order_by("pk").values_list("capacity_tier", flat=True)))

    r = getattr(client, method)(url, data=json.dumps(body), content_type="application/json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r["Content-Type"] == "application/json"
    errors = r.json()["errors"]
    named = [k for k in errors if k == field or k.startswith(f"{field}.")]
    assert named, errors
    assert "\\ud800" in " ".join(m for k in named for m in errors[k]), errors  # the value, escaped
    assert LONE not in r.content.decode("utf-8")
    assert (Job.objects.count(), Event.objects.count(), Node.objects.count(), PriceRate.objects.count(),
            list(Job.objects.order_by("pk").values_list("topology", "dependency_mode", "state")),
            list(Node.objects.order_by("pk").values_list("capacity_tier", flat=True))) == before
