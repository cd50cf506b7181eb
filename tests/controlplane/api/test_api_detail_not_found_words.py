"""Every detail endpoint's 404 in words, as a job's already was ("No job 999, or not yours to
see."): the others said Django's "No PriorityClass matches the given query." (a Python class's
name) and, for an id that is no number (`nodes/abc/`), "Not found.". And finance's 403 on any job
action names the actions ("they cannot submit or cancel jobs" answered a hold or a requeue)."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"

DETAILS = [
    ("nodes", "node"), ("teams", "team"), ("projects", "project"), ("cohorts", "cohort"), ("quotas", "quota"),
    ("priority-classes", "priority class"), ("gpu-types", "GPU type"), ("price-rates", "price rate"),
    ("events", "event"), ("maintenance-windows", "maintenance window"), ("notification-hooks", "notification hook"),
]


@pytest.mark.parametrize(("path", "noun"), DETAILS)
@pytest.mark.parametrize("key", ["987654", "abc"])
def test_a_missing_object_is_named_in_words(fleet, admin, path, noun, key) -> None:
    r = admin.get(f"{J}/{path}/{key}/")

    assert r.status_code == 404, r.content
    assert r.json() == {"detail": f"No {noun} {key}, or not yours to see.", "code": "not_found"}


def test_the_jobs_and_arrays_own_words_are_kept(fleet, alice) -> None:
    assert alice.get(f"{J}/jobs/987654/").json()["detail"] == "No job 987654, or not yours to see."
    assert alice.get(f"{J}/job-arrays/00000000-0000-0000-0000-000000000000/").json()["detail"] == (
        "No such job array, or not yours to see.")


def test_an_action_on_a_missing_node_says_it_too(fleet, admin) -> None:
    r = admin.post(f"{J}/nodes/987654/cordon/")

    assert r.status_code == 404
    assert r.json()["detail"] == "No node 987654, or not yours to see."


def test_a_long_key_is_cut(fleet, admin) -> None:
    r = admin.get(f"{J}/teams/{'x' * 200}/")

    assert r.json()["detail"] == f"No team {'x' * 40}, or not yours to see."


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "jobs/", {"name": "x", "gpus": 1}), ("post", "jobs/{job}/hold/", None),
    ("post", "jobs/{job}/requeue/", None), ("patch", "jobs/{job}/", {"name": "y"}),
    ("post", "jobs/{job}/cancel/", None),
])
def test_finance_is_told_every_job_action_is_not_theirs(fleet, clients, method, path, body) -> None:
    """A hold or requeue by finance was refused with "they cannot submit or cancel jobs"."""
    job = f.make_job(fleet.ml)

    r = getattr(clients["finance"], method)(f"{J}/{path.format(job=job.pk)}", body, format="json")

    assert r.status_code == 403
    assert r.json()["detail"] == ("Finance accounts read showback and costs; they cannot submit, change, hold, "
                                  "release, cancel or requeue jobs.")


# Found by a fleet admin's review (6 Dec): `GET nodes/h100-05/` (as `kubectl get node` or
# `scontrol show node` take a name) answered "No node h100-05, or not yours to see." to an admin,
# of a node that exists: the path takes the id. It now says so, and which id the name has, when
# the reader may see the record; a record they may not see is answered as before.
NAMED = [("nodes", "node", "h100-1"), ("teams", "team", "ml"), ("cohorts", "cohort", "all"),
         ("priority-classes", "priority class", "research"), ("gpu-types", "GPU type", "H100-80GB")]


@pytest.mark.parametrize(("path", "noun", "name"), NAMED)
def test_a_name_where_the_path_takes_an_id_says_the_id(fleet, admin, path, noun, name) -> None:
    from django.apps import apps

    model = {"nodes": "Node", "teams": "Team", "cohorts": "Cohort", "priority-classes": "PriorityClass",
             "gpu-types": "GpuType"}[path]
    pk = apps.get_model("controlplane", model).objects.get(name=name).pk

    r = admin.get(f"{J}/{path}/{name}/")

    assert r.status_code == 404, r.content
    assert r.json()["detail"] == (f"No {noun} with id {name}: the path takes the {noun}'s id, not its name; "
                                  f"{noun} {name} is {pk}: {J}/{path}/{pk}/."), r.json()


def test_an_action_by_name_says_the_path_with_the_id(fleet, admin) -> None:
    node = fleet.nodes[1]

    r = admin.post(f"{J}/nodes/{node.name}/drain/")

    assert r.status_code == 404
    assert r.json()["detail"].endswith(f"node h100-1 is {node.pk}: {J}/nodes/{node.pk}/drain/."), r.json()


def test_a_name_the_reader_may_not_see_is_answered_as_any_missing_one(fleet, alice) -> None:
    assert alice.get(f"{J}/teams/vision/").json()["detail"] == "No team vision, or not yours to see."
