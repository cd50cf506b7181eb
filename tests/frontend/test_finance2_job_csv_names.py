"""Finance QA, round 2 (30 Nov): the job-grouped CSV (and `qm showback --by job`) named only the
job id; finance had to look each one up. It now names the job, its team and its project (the
JSON's properties carry the project too).

Real rollups on PostgreSQL: in language/llm-pretrain, `pretrain` ran 8 H100 GPUs for two hours
at 1,000 tokens/s; `evaluation` ran 8 GPUs beside it reporting steps only.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import Allocation, Job
from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from tests.controlplane.accounting.builders import report as agent_samples

pytestmark = pytest.mark.django_db


def run_mixed_project(submit_as: Any) -> dict[str, Job]:
    """pretrain (tokens) and evaluation (steps only) side by side for two hours, rolled up."""
    now = timezone.now()
    jobs = {
        "pretrain": submit_as("bob", name="pretrain", gpus=8, gpu_types=("H100-80GB",), project="llm-pretrain"),
        "evaluation": submit_as("bob", name="evaluation", gpus=8, gpu_types=("H100-80GB",), project="llm-pretrain"),
    }
    run_cycle("test", now=now - timedelta(hours=2))
    for name, job in jobs.items():
        allocation = Allocation.objects.get(job=job)
        tokens = 1000 if name == "pretrain" else 0
        agent_samples(allocation, allocation.gpus.first().node, now - timedelta(hours=2), now, tokens_per_s=tokens)
        Job.objects.filter(pk=job.pk).update(useful_tokens=tokens * 7200)
    accounting.catch_up(now)
    return jobs


@pytest.fixture
def mixed_project(submit_as: Any) -> dict[str, Job]:
    return run_mixed_project(submit_as)


def csv_of(client: Any, href: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    response = client.get(href)
    assert response.status_code == 200, response.content[:300]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    return rows[0], {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}


def test_the_job_csv_names_the_job_its_team_and_project(client_for: Any, mixed_project: dict[str, Job]) -> None:
    header, rows = csv_of(client_for("finn"), "/api/v1/showback/?window=24h&group_by=job&format=csv")
    # the period's two columns end every row (test_showback_csv_columns.py)
    assert header[0] == "job" and header[-6:] == ["job_name", "team", "project", "period_start", "period_end", "row_kind"]
    row = rows[str(mixed_project["evaluation"].pk)]
    assert (row["job_name"], row["team"], row["project"]) == ("evaluation", "language", "llm-pretrain")
    body = client_for("finn").get("/api/v1/showback/?window=24h&group_by=job").json()
    properties = body["data"][0][str(mixed_project["pretrain"].pk)]["properties"]
    assert properties["job"] == "pretrain" and properties["team"] == "language"
    assert properties["project"] == "llm-pretrain"
    # Other groupings keep their columns as they were.
    header, _ = csv_of(client_for("finn"), "/api/v1/showback/?window=24h&group_by=team&format=csv")
    assert "job_name" not in header
