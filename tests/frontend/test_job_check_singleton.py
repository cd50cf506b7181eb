"""The submit form's "Runs after" field takes Slurm's `singleton` as the submit does (alone or
among job ids), and refuses a `+`/`-` edit there (a submit gives the whole list)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db


def check(client, **body):
    return client.post("/ui/jobs/check.json", data=json.dumps({"name": "x", "gpus": 1, **body}),
                       content_type="application/json").json()


def test_singleton_alone_or_among_jobs_passes_the_check(client_for, submit_as):
    pre = submit_as("alice", name="pre", gpus=1)
    for text in ("singleton", f"afterok:{pre.pk},singleton"):
        body = check(client_for("alice"), dependencies=text)
        assert body["runs"] is True and body["errors"] == {}, (text, body)


def test_singleton_naming_a_job_or_an_edit_is_refused_on_the_field(client_for):
    body = check(client_for("alice"), dependencies="singleton:12")
    assert body["runs"] is False and "singleton names no job" in body["errors"]["dependencies"][0]
    body = check(client_for("alice"), dependencies="+afterok:12")
    assert body["runs"] is False and "a submit gives the whole list" in body["errors"]["dependencies"][0]
