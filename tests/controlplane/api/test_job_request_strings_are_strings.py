"""A job request's text fields take JSON strings only. DRF's CharField turned the number 1 into
"1", so `env: {"A": 1}` ran the job with A=1, and `command: 42`, `team: 7` or
`gpu_types: [100]` were read as text the client never wrote (Kubernetes refuses a non-string
env value too). Each is a 400 naming the field, and nothing is written."""

from __future__ import annotations

import pytest

from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


@pytest.mark.parametrize(
    ("extra", "field", "said"),
    [
        ({"env": {"LR": "0.1", "A": 1}}, "env.A", ["must be text, got a number"]),
        ({"env": {"DEBUG": True}}, "env.DEBUG", ["must be text, got a boolean (true)"]),
        ({"env": {"X": None}}, "env.X", None),
        ({"command": 42}, "command", ["must be text, got a number"]),
        ({"team": 7}, "team", ["must be text, got a number"]),
        ({"project": ["a"]}, "project", ["must be text, got a list"]),
        ({"priority_class": 500}, "priority_class", ["must be text, got a number"]),
        ({"gpu_types": [100]}, "gpu_types.0", ["must be text, got a number"]),
        ({"gpu_type": 80.5}, "gpu_type", ["must be text, got a number"]),
    ],
    ids=["env-number", "env-true", "env-null", "command", "team", "project", "priority-class", "gpu-types",
         "gpu-type"],
)
def test_a_text_field_given_no_string_is_a_400_naming_it(fleet, alice, extra, field, said) -> None:
    body = {"name": "x", "gpus": 1, "command": "true", **extra}
    r = alice.post(J, body, format="json")

    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    assert list(errors) == [field]
    if said is not None:
        assert errors[field] == said
    assert not Job.objects.exists() and not f.trail().exists()


def test_an_array_given_as_a_number_is_refused(fleet, alice) -> None:
    r = alice.post("/api/v1/job-arrays/", {"name": "sweep", "gpus": 1, "array": 5, "command": "true"}, format="json")

    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {"array": ["must be text, got a number"]}
    assert not Job.objects.exists()


def test_string_values_are_taken_as_written(fleet, alice) -> None:
    env = {"A": "1", "EMPTY": "", "SPACES": "  kept  "}
    r = alice.post(J, {"name": "ok", "gpus": 1, "command": "echo $A", "env": env}, format="json")

    assert r.status_code == 201, r.content
    assert Job.objects.get().env == env
