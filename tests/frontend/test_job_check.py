"""The submit form's live validation: /ui/jobs/check.json says at once whether a shape can ever
run on this fleet, naming the field and the numbers. A verdict is a 200 (the check worked,
whatever its answer); only a body that is not a JSON object is a 400."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db


def check(client, body, raw: bytes | None = None):
    return client.post("/ui/jobs/check.json", data=raw if raw is not None else json.dumps(body),
                       content_type="application/json")


def test_a_shape_the_fleet_can_run_is_accepted_with_a_sentence(client_for):
    response = check(client_for("alice"), {"name": "x", "gpus": 16, "gpus_per_node": 8})
    assert response.status_code == 200
    assert response.json()["runs"] is True
    assert "This fleet can run 16 GPUs, 8 per node" in response.json()["detail"]


def test_more_gpus_on_one_node_than_any_node_has_is_refused_naming_gpus_per_node(client_for):
    body = check(client_for("alice"), {"name": "x", "gpus": 16, "gpus_per_node": 16}).json()
    assert body["runs"] is False
    assert "the largest node has 8" in body["errors"]["gpus_per_node"][0]
    assert body["detail"].startswith("This job can never run on this fleet")


def test_more_gpus_than_the_fleet_has_is_refused_naming_gpus(client_for):
    body = check(client_for("alice"), {"name": "x", "gpus": 4096}).json()
    assert body["runs"] is False and "gpus" in body["errors"]


def test_an_unknown_gpu_type_is_refused_naming_gpu_types(client_for):
    body = check(client_for("alice"), {"name": "x", "gpus": 1, "gpu_types": ["TPU-v9"]}).json()
    assert body["runs"] is False and "gpu_types" in body["errors"]


def test_a_non_number_is_refused_by_the_apis_own_serializer(client_for):
    body = check(client_for("alice"), {"name": "x", "gpus": "many"}).json()
    assert body["runs"] is False and "gpus" in body["errors"]


def test_a_broken_array_spec_is_refused_naming_array(client_for):
    body = check(client_for("alice"), {"name": "x", "gpus": 1, "array": "9-3"}).json()
    assert body["runs"] is False and "ends before it starts" in body["errors"]["array"][0]


def test_an_array_is_counted_in_tasks(client_for):
    response = check(client_for("alice"), {"name": "x", "gpus": 1, "array": "0-99"})
    assert response.status_code == 200
    assert response.json()["tasks"] == 100


def test_a_body_that_is_not_json_is_refused(client_for):
    assert check(client_for("alice"), None, raw=b"{not json").status_code == 400
    assert check(client_for("alice"), [1, 2]).status_code == 400


def test_finance_may_not_check_a_submission(client_for):
    assert check(client_for("finn"), {"name": "x", "gpus": 1}).status_code == 403


def test_check_writes_nothing(client_for):
    from controlplane.models import Event, Job

    check(client_for("alice"), {"name": "x", "gpus": 8})
    assert not Job.objects.exists() and not Event.objects.filter(kind="job.submitted").exists()


def test_check_needs_post(client_for):
    assert client_for("alice").get("/ui/jobs/check.json").status_code == 405


def test_a_shape_its_teams_quota_never_admits_is_taken_but_said_never_to_start(client_for):
    """The fleet runs 96 H100s, but team vision may hold at most 72 (40 nominal, 32 borrowed):
    the submit takes it, and the job then waits for ever as CanNeverRun. The check said only
    "This fleet can run 96 GPUs … The submit would take it"; it now says, in the cycle's words,
    that as asked it would never start."""
    body = check(client_for("alice"), {"name": "x", "gpus": 96, "gpu_types": ["H100-80GB"]}).json()
    assert body["runs"] is True and body["errors"] == {}
    never = ("Can never run under its quota: team vision may hold at most 72 H100-80GB GPUs (40 nominal and 32 "
             "borrowed at most); this job needs 96.")
    assert body["never_under_quota"] == never
    assert body["detail"].startswith("This fleet can run 96 GPUs of H100-80GB, but as asked it would never start. "
                                     + never)


def test_a_shape_its_teams_quota_admits_says_nothing_of_quota(client_for):
    body = check(client_for("alice"), {"name": "x", "gpus": 72, "gpu_types": ["H100-80GB"]}).json()
    assert body["runs"] is True and body["never_under_quota"] is None
    assert "never" not in body["detail"]


def test_the_environment_as_text_is_read_as_the_submit_reads_it(client_for):
    """The form's Environment box goes as typed, one NAME=value a line; a line that says no
    variable is marked on it before any Submit, in the submit's words."""
    body = check(client_for("alice"), {"name": "x", "gpus": 1, "env": "A=1\nB"}).json()
    assert body["runs"] is False
    assert body["errors"] == {"env": ["line 2 ('B') is not NAME=value: one variable a line, as WANDB_PROJECT=sweeps"]}
    assert check(client_for("alice"), {"name": "x", "gpus": 1, "env": "A=1\nB=2"}).json()["runs"] is True


def test_a_gpu_type_in_the_wrong_case_is_refused_naming_the_type_meant(client_for):
    body = check(client_for("alice"), {"name": "x", "gpus": 1, "gpu_types": ["h100-80gb"]}).json()
    assert body["runs"] is False
    assert body["errors"]["gpu_types"][0].endswith("; did you mean H100-80GB?"), body["errors"]
