"""A submit's or a change's choice field given a value it does not take lists the values it
takes, as the list filters do: `"topology": "same_rack"` said "\\"same_rack\\" is not a valid
choice." (found walking a researcher's week: a YAML file's `topology: same_rack`, a dependency's
`"condition": "afterbad"`)."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.django_db
JOBS = "/api/v1/jobs/"


def _errors(r) -> dict[str, list[str]]:
    assert r.status_code == 400, r.content
    return r.json()["errors"]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("topology", "same_rack", "'same_rack' is not a valid choice; choose one of: any, same_node, same_leaf, same_spine."),
    ("workload", "gaming", "'gaming' is not a valid choice; choose one of: training, serving, interactive, batch."),
    ("dependency_mode", "some", "'some' is not a valid choice; choose one of: all, any."),
])
def test_a_submit_choice_lists_the_choices(fleet, alice, field, value, message) -> None:
    errors = _errors(alice.post(JOBS, {"name": "x", "gpus": 1, field: value}, format="json"))

    assert errors == {field: [message]}
    assert not Job.objects.exists()


def test_a_dependency_condition_lists_the_conditions(fleet, alice) -> None:
    up = alice.post(JOBS, {"name": "up", "gpus": 1}, format="json").json()["id"]

    errors = _errors(alice.post(JOBS, {"name": "x", "gpus": 1,
                                       "dependencies": [{"job": up, "condition": "afterbad"}]}, format="json"))

    assert errors == {"dependencies.0.condition": [
        "'afterbad' is not a valid choice; choose one of: after, afterok, afternotok, afterany, aftercorr, singleton."]}


def test_a_change_lists_them_too_and_good_choices_pass(fleet, alice) -> None:
    job = alice.post(JOBS, {"name": "x", "gpus": 1, "topology": "same_node", "workload": "batch"}, format="json")
    assert job.status_code == 201, job.content

    errors = _errors(alice.patch(f"{JOBS}{job.json()['id']}/", {"topology": "rack"}, format="json"))

    assert errors == {"topology": ["'rack' is not a valid choice; choose one of: any, same_node, same_leaf, same_spine."]}


def test_an_array_requeue_keeps_its_own_words(fleet, alice) -> None:
    array = alice.post("/api/v1/job-arrays/", {"name": "a", "gpus": 1, "array": "0-1"}, format="json").json()

    errors = _errors(alice.post(f"/api/v1/job-arrays/{array['array_id']}/requeue/", {"states": ["bogus"]},
                                format="json"))

    assert errors == {"states.0": ['"bogus" cannot be requeued; choose among running, succeeded, failed, cancelled, '
                                   "timed_out"]}


def test_showback_and_utilization_choices_list_them(fleet, alice) -> None:
    from controlplane.services.showback import GROUP_BY

    showback = _errors(alice.get("/api/v1/showback/", {"group_by": "colour"}))
    utilization = _errors(alice.get("/api/v1/metrics/utilization/", {"bucket": "week"}))

    assert showback == {"group_by": [f"'colour' is not a valid choice; choose one of: {', '.join(GROUP_BY)}."]}
    assert utilization == {"bucket": ["'week' is not a valid choice; choose one of: minute, hour, day."]}
