"""The job page's Shape says the job's environment, each NAME=value as submitted (the API's
`env`), sorted by name, escaped; a job without one says nothing of it."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_the_job_page_shows_its_environment(client_for: Any, submit_as: Any) -> None:
    job = submit_as("alice", name="env", gpus=1, env={"WANDB_PROJECT": "sweeps", "ARGS": "<b>--x</b>", "items": "1"})

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert ('<dt>Environment</dt><dd id="job-env"><code>ARGS=&lt;b&gt;--x&lt;/b&gt;</code> '
            "<code>WANDB_PROJECT=sweeps</code> <code>items=1</code></dd>") in html


def test_a_job_without_an_environment_says_nothing_of_it(client_for: Any, submit_as: Any) -> None:
    job = submit_as("alice", name="plain", gpus=1)

    assert "Environment" not in client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
