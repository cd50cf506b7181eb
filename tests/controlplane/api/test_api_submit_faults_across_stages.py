"""A submit wrong in two or three independent ways names every field at fault in one answer, in
the API (a token), in the form's POST (the page's session, as qm.js posts it) and in the form's
live check (/ui/jobs/check.json), with the same fields and the same words in all three: an
array spec and a GPU type no node has, a shape that can never run and a dependency on no job,
an unknown team and a limit beyond the class's maximum and a broken array, and so on. The live
check stopped at its first failing stage (the fields, the array, the shape, the dependencies)
and left team, class, project and limits to the submit: a researcher fixed one fault, and only
then learnt of the next. Where a stage needs another's value it waits only for that value: an
array whose text reads gives the dependencies its tasks even when the project is unknown, and a
shape field that cannot be read leaves the fleet's capability unjudged rather than judged on a
stand-in. Nothing is written on any refusal."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
ARRAYS = "/api/v1/job-arrays/"
CHECK = "/ui/jobs/check.json"

#: (body, {field: words its error says}): the faults come from different stages of the judging.
FAULTS = [
    pytest.param(
        {"name": "sweep", "gpus": 1, "array": "0-99%0", "gpu_types": ["B200"]},
        {"array": "a task limit of 0 would run none of its tasks",
         "gpu_types": "B200"},
        id="array-and-a-gpu-type-no-node-has"),
    pytest.param(
        {"name": "wide", "gpus": 16, "gpus_per_node": 16, "dependencies": "afterok:999999"},
        {"gpus_per_node": "the largest node has 8",
         "dependencies.0.job": "no job 999999 you can see"},
        id="never-runs-and-a-dependency-on-no-job"),
    pytest.param(
        {"name": "sweep", "gpus": 1, "team": "nosuchteam", "priority_class": "research",
         "runtime_limit_s": 30 * 86400, "array": "9-3"},
        {"team": "no team named 'nosuchteam' that you may submit for",
         "runtime_limit_s": "beyond the maximum of priority class 'research'",
         "array": "range 9-3 ends before it starts"},
        id="team-limit-and-array"),
    pytest.param(
        {"name": "big", "gpus": 64, "priority_class": "urgent", "dependencies": "afterok:999999"},
        {"priority_class": "unknown priority class 'urgent'",
         "gpus": "the fleet can never give more than 48",
         "dependencies.0.job": "no job 999999 you can see"},
        id="class-fleet-size-and-dependency"),
    pytest.param(
        {"name": "x", "gpus": 2, "project": "nope", "runtime_limit_s": 30 * 86400,
         "hold_reason": "waiting for data"},
        {"project": "team 'ml' has no project 'nope'",
         "runtime_limit_s": "beyond the maximum of priority class 'research'",
         "hold_reason": "a reason is for a job submitted held"},
        id="project-limit-and-a-reason-without-hold"),
    pytest.param(
        {"name": "x", "gpus": 2, "cpus_per_gpu": -1, "gpu_type": "H100-80GB", "gpu_types": ["A100-40GB"],
         "project": "nope"},
        {"cpus_per_gpu": "host CPUs per GPU: 0 (none asked for) or more",
         "gpu_type": "give gpu_type or gpu_types, not both",
         "project": "team 'ml' has no project 'nope'"},
        id="malformed-field-both-gpu-type-fields-and-project"),
    pytest.param(
        {"name": "x", "gpus": 1, "checkpoint_interval_s": 0, "dependencies": "+afterok:5", "project": "nope"},
        {"checkpoint_interval_s": "a checkpoint interval is at least 1 s",
         "dependencies": "a submit gives the whole list",
         "project": "team 'ml' has no project 'nope'"},
        id="malformed-field-an-edit-for-dependencies-and-project"),
]


@pytest.fixture
def page(fleet: Fleet) -> Client:
    """alice's browser session: the form posts to the API and to the live check with it."""
    client = Client()
    client.force_login(fleet.users["owner"])
    return client


@pytest.fixture
def b200(fleet: Fleet) -> Any:
    return f.make_gpu_type("B200", 192)  # known to the fleet, on no node


def _url(body: dict[str, Any]) -> str:
    return ARRAYS if "array" in body else JOBS


def _written() -> tuple[int, int]:
    return Job.objects.count(), Event.objects.count()


def _api(alice: APIClient, body: dict[str, Any]) -> Any:
    return alice.post(_url(body), body, format="json")


def _form_post(page: Client, body: dict[str, Any]) -> Any:
    return page.post(_url(body), data=json.dumps(body), content_type="application/json")


def _live_check(page: Client, body: dict[str, Any]) -> dict[str, Any]:
    response = page.post(CHECK, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def _assert_named(errors: dict[str, list[str]], said: dict[str, str]) -> None:
    assert set(errors) == set(said), errors
    for field, words in said.items():
        assert len(errors[field]) == 1 and words in errors[field][0], (field, errors[field])


@pytest.mark.parametrize("body, said", FAULTS)
def test_the_api_submit_names_every_field_at_fault(fleet: Fleet, b200: Any, alice: APIClient,
                                                   body: dict[str, Any], said: dict[str, str]) -> None:
    before = _written()
    r = _api(alice, body)
    assert r.status_code == 400, r.json()
    _assert_named(r.json()["errors"], said)
    assert _written() == before


@pytest.mark.parametrize("body, said", FAULTS)
def test_the_forms_post_names_every_field_at_fault(fleet: Fleet, b200: Any, page: Client,
                                                   body: dict[str, Any], said: dict[str, str]) -> None:
    before = _written()
    r = _form_post(page, body)
    assert r.status_code == 400, r.json()
    _assert_named(r.json()["errors"], said)
    assert _written() == before


@pytest.mark.parametrize("body, said", FAULTS)
def test_the_live_check_names_every_field_at_fault(fleet: Fleet, b200: Any, page: Client,
                                                   body: dict[str, Any], said: dict[str, str]) -> None:
    before = _written()
    verdict = _live_check(page, body)
    assert verdict["runs"] is False
    _assert_named(verdict["errors"], said)
    for field in said:  # the sentence says each of them, with its words
        assert field in verdict["detail"] or said[field] in verdict["detail"], (field, verdict["detail"])
    assert _written() == before


def _upstream_array_with_a_failed_task(alice: APIClient) -> str:
    made = alice.post(ARRAYS, {"name": "pre", "gpus": 1, "array": "0-3"}, format="json").json()
    Job.objects.filter(array_id=made["array_id"], array_index=1).update(state=JobState.FAILED, exit_code=3)
    return str(made["array_id"])


def _more_bodies(alice: APIClient) -> list[dict[str, Any]]:
    upstream = _upstream_array_with_a_failed_task(alice)
    return [
        # faults of one stage, and none
        {"name": "ok", "gpus": 8},
        {"name": "ok", "gpus": 16, "gpus_per_node": 16},
        {"name": "x", "gpus": 4, "min_gpus": 8, "max_gpus": 2, "project": "nope"},
        {"name": "x", "gpus": 0, "min_gpus": 2, "max_gpus": 4, "project": "nope"},
        {"name": "sweep", "gpus": 1, "array": "0-3%0", "dependencies": "afterok:999999"},
        {"name": "sweep", "gpus": 1, "array": "0-9", "array_task_limit": 3, "project": "nope",
         "dependencies": f"aftercorr:{upstream}"},
        {"name": "sweep", "gpus": 1, "array": "0-3%2", "array_task_limit": 3, "team": "vision"},
        {"name": "x", "gpus": 64, "min_gpus": "eight", "max_gpus": 64, "project": "nope"},
        {"name": "x", "gpus": 1, "dependencies": "afterok:1?afterok:2", "dependency_mode": "all",
         "priority_class": "urgent"},
        {"gpus": 1, "project": "nope"},
        {"name": "x", "gpus": 1, "gpu_per_node": 1, "runtime_limit_s": 30 * 86400},
        *(body.values[0] for body in FAULTS),
    ]


def test_the_live_check_and_the_submit_name_the_same_fields_with_the_same_words(
        fleet: Fleet, b200: Any, alice: APIClient, page: Client) -> None:
    for body in _more_bodies(alice):
        checked = _live_check(page, body)
        with_token = _api(alice, body)
        by_form = _form_post(page, body)
        assert by_form.status_code == with_token.status_code, (body, by_form.json(), with_token.json())
        if with_token.status_code == 201:
            assert checked["runs"] is True and checked["errors"] == {}, (body, checked)
            continue
        assert with_token.status_code == 400, (body, with_token.json())
        assert checked["runs"] is False, body
        assert checked["errors"] == with_token.json()["errors"] == by_form.json()["errors"], body


def test_an_arrays_tasks_reach_its_dependencies_though_the_project_is_unknown(
        fleet: Fleet, alice: APIClient, page: Client) -> None:
    """aftercorr pairs each task with its counterpart: the array's text reads, so its task 1
    waiting on a task 1 that failed is named beside the unknown project (it was named only once
    the project was fixed, the tasks then unknown)."""
    upstream = _upstream_array_with_a_failed_task(alice)
    body = {"name": "sweep", "gpus": 1, "array": "0-3", "project": "nope", "dependencies": f"aftercorr:{upstream}"}
    said = {"project": "team 'ml' has no project 'nope'",
            "dependencies.0.condition": "aftercorr can never be met for task 1"}

    _assert_named(_api(alice, body).json()["errors"], said)
    _assert_named(_live_check(page, body)["errors"], said)


def test_a_shape_field_that_cannot_be_read_leaves_the_fleets_capability_unjudged(
        fleet: Fleet, alice: APIClient, page: Client) -> None:
    """min_gpus "eight" cannot be read: judged without it, 64 GPUs would be "more than the fleet
    can ever give" (48), which an elastic job of 8 at least is not. The capability waits for the
    shape; the project is named now."""
    body = {"name": "x", "gpus": 64, "min_gpus": "eight", "max_gpus": 64, "project": "nope"}

    for errors in (_api(alice, body).json()["errors"], _live_check(page, body)["errors"]):
        assert set(errors) == {"min_gpus", "project"}, errors


def test_a_whole_request_that_runs_says_so_and_what_it_runs(fleet: Fleet, page: Client) -> None:
    verdict = _live_check(page, {"name": "sweep", "gpus": 2, "array": "0-5%2", "project": "llm",
                                 "priority_class": "production", "runtime_limit_s": 20 * 86400})
    assert verdict["runs"] is True and verdict["errors"] == {}
    assert verdict["tasks"] == 6
    assert verdict["detail"].startswith("This fleet can run 6 tasks of 2 GPUs, at most 2 at a time.")


def test_the_status_rules_stay(fleet: Fleet, page: Client) -> None:
    """Finance may not submit: 403 from both, whatever the body's faults; a body that is no
    JSON object: 400 from the live check (its verdict needs an object)."""
    finance = Client()
    finance.force_login(fleet.users["finance"])
    body = {"name": "x", "gpus": 16, "gpus_per_node": 16, "project": "nope"}
    assert finance.post(CHECK, data=json.dumps(body), content_type="application/json").status_code == 403
    assert _form_post(finance, body).status_code == 403
    assert page.post(CHECK, data="[1]", content_type="application/json").status_code == 400


_ABSENT = object()


def _field_values(upstream: str) -> dict[str, list[Any]]:
    """Per field: left out, a good value, and wrong ones of each kind (malformed, unknown, beyond
    a rule), for bodies wrong in any combination."""
    return {
        "gpus": [1, 16, 0, "many", 64],
        "gpus_per_node": [_ABSENT, 8, 16, "x", 3],
        "min_gpus": [_ABSENT, 1, 8, "eight"],
        "max_gpus": [_ABSENT, 64, 2],
        "gpu_type": [_ABSENT, "H100-80GB"],
        "gpu_types": [_ABSENT, ["B200"], ["TPU-v9"], "H100-80GB", ["A100-40GB"]],
        "min_gpu_memory_gb": [_ABSENT, 80, -1],
        "topology": [_ABSENT, "same_node", "same_rack"],
        "team": [_ABSENT, "ml", "nosuchteam", "vision"],
        "priority_class": [_ABSENT, "production", "urgent"],
        "project": [_ABSENT, "llm", "nope"],
        "runtime_limit_s": [_ABSENT, 3600, 30 * 86400, -5],
        "array": [_ABSENT, "0-3", "0-99%0", "9-3", "0-3%2"],
        "array_task_limit": [_ABSENT, 3, 0],
        "dependencies": [_ABSENT, "afterok:999999", "+afterok:5", "afterok:1?afterok:2", f"aftercorr:{upstream}",
                         "singleton", [{"job": "x"}], "afterok:12x"],
        "dependency_mode": [_ABSENT, "all", "any", "sometimes"],
        "hold": [_ABSENT, True],
        "hold_reason": [_ABSENT, "data not ready"],
        "roles": [_ABSENT, [{"name": "a", "count": 1, "gpus_per_member": 16}],
                  [{"name": "a", "count": 2, "gpus_per_member": 1}]],
    }


def test_no_combination_of_faults_answers_a_500_or_writes_a_refused_job(
        fleet: Fleet, b200: Any, alice: APIClient, page: Client) -> None:
    """Bodies wrong in any combination of fields (seeded, so a failure comes back the same):
    the live check answers a verdict, the submit 201 or 400, never a 500; they agree on the
    fields at fault and the words, and a refusal writes nothing."""
    choices = _field_values(_upstream_array_with_a_failed_task(alice))
    rng = random.Random(93)
    refused = 0
    for _ in range(120):
        body: dict[str, Any] = {"name": "combo"}
        for name, values in choices.items():
            value = rng.choice(values)
            if value is not _ABSENT:
                body[name] = value
        before = _written()
        checked = page.post(CHECK, data=json.dumps(body), content_type="application/json")
        assert checked.status_code == 200, (body, checked.content)
        assert _written() == before, body
        submitted = _api(alice, body)
        assert submitted.status_code in (201, 400), (body, submitted.content)
        if submitted.status_code == 400:
            refused += 1
            assert _written() == before, body
            assert checked.json()["runs"] is False, body
            assert checked.json()["errors"] == submitted.json()["errors"], body
        else:
            assert checked.json() | {"detail": ""} == {"runs": True, "detail": "", "errors": {},
                                                         "tasks": checked.json()["tasks"]}, body
    assert refused > 60  # most combinations are wrong somewhere: the comparison is not vacuous


def test_every_dependency_at_fault_is_named_not_only_the_first_kind(
        fleet: Fleet, alice: APIClient, page: Client) -> None:
    """A job named twice and a job that does not exist, in one list: both items are named (the
    one that does not exist was named only once the twice-named one was fixed), beside the
    unknown project, by the submit and the live check alike."""
    pre = alice.post(JOBS, {"name": "pre", "gpus": 1}, format="json").json()["id"]
    body = {"name": "x", "gpus": 1, "project": "nope",
            "dependencies": f"afterok:{pre},afterany:{pre},afterok:999999"}
    said = {"project": "team 'ml' has no project 'nope'",
            "dependencies.1.job": f"job {pre} is already dependency 0",
            "dependencies.2.job": "no job 999999 you can see"}

    _assert_named(_api(alice, body).json()["errors"], said)
    _assert_named(_live_check(page, body)["errors"], said)
