"""The submit form's "Runs after" field: the live check (/ui/jobs/check.json) reads its text
with the parser `qm -d` uses and judges the jobs it names as the submit does, each problem on
`dependencies` (the field the form shows it by) or an item of it."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.choices import JobState
from controlplane.models import Job

pytestmark = pytest.mark.django_db


def check(client, **body):
    return client.post("/ui/jobs/check.json", data=json.dumps({"name": "x", "gpus": 1, **body}),
                       content_type="application/json").json()


def test_each_job_the_text_names_is_judged_on_its_item_and_good_ones_pass(client_for, submit_as):
    pre, other = submit_as("alice", name="pre", gpus=1), submit_as("alice", name="other", gpus=1)
    body = check(client_for("alice"), dependencies=f"afterok:{pre.pk}:{other.pk},afterany:{pre.pk + other.pk}")
    # the last id names no job: the check says so on its item
    assert body["runs"] is False
    assert body["errors"] == {"dependencies.2.job": [f"no job {pre.pk + other.pk} you can see"]}

    body = check(client_for("alice"), dependencies=f"afterok:{pre.pk}:{other.pk}")
    assert body["runs"] is True and body["errors"] == {}


def test_bad_syntax_is_refused_on_the_field(client_for):
    body = check(client_for("alice"), dependencies="afterok:12x")
    assert body["runs"] is False
    assert body["errors"] == {"dependencies": ["afterok:12x: '12x' is not a job id (a number) or a job array's id"]}


def test_a_condition_that_can_never_be_met_is_refused_on_its_item(client_for, submit_as):
    failed = submit_as("alice", name="failed", gpus=1)
    Job.objects.filter(pk=failed.pk).update(state=JobState.FAILED, exit_code=2)
    body = check(client_for("alice"), dependencies=f"afterok:{failed.pk}")
    assert body["runs"] is False
    assert body["errors"]["dependencies.0.condition"][0].startswith(f"job {failed.pk} failed (exit 2)")


def test_another_teams_job_is_no_job_you_can_see(client_for, submit_as):
    theirs = submit_as("bob", name="theirs", gpus=1)
    body = check(client_for("alice"), dependencies=f"after:{theirs.pk}")
    assert body["errors"] == {"dependencies.0.job": [f"no job {theirs.pk} you can see"]}


def test_an_empty_field_is_no_dependency(client_for):
    assert check(client_for("alice"), dependencies="none")["runs"] is True


def test_the_live_check_locks_no_row(client_for, submit_as):
    """A check runs at every pause in typing: it reads the jobs named without locking them (a
    submit locks them FOR SHARE, then writes)."""
    pre = submit_as("alice", name="pre", gpus=1)
    client = client_for("alice")
    with CaptureQueriesContext(connection) as queries:
        assert check(client, dependencies=f"afterok:{pre.pk}")["runs"] is True
    assert not [q["sql"] for q in queries.captured_queries if "FOR SHARE" in q["sql"].upper()]
