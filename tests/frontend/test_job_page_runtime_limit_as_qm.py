"""The job page says a runtime limit as qm, the change sentence and the events say it
(span_text: `1 h 30 min`): its shape said `1.5 h` (and `2.0 h` for two hours) beside a change
sentence of `1 h 30 min → 2 h`, and its queue row `runtime limit 90 min`."""

from __future__ import annotations

import re

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.django_db


def test_the_job_page_says_the_runtime_limit_exactly_as_qm(client_for, submit_as) -> None:
    job = submit_as("alice", name="limited", gpus=8, runtime_limit_s=5400)
    assert Job.objects.get(pk=job.pk).runtime_limit_s == 5400

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    shape = re.search(r'<dd id="runtime-limit">(.*?)</dd>', html)
    assert shape and shape.group(1) == "1 h 30 min", html
    assert "runtime limit 1 h 30 min;" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
