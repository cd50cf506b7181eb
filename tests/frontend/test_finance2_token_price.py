"""Finance QA, round 2 (30 Nov): $ per useful token a finance analyst can defend.

- $ per useful token of a team or project divided its whole cost by its tokens, so a job that
  reports no tokens (an evaluation counted in steps, a serving job that reported nothing) made
  the tokens of its neighbours look dearer. It is now the cost of the jobs that reported tokens
  over those tokens, with the cost that reported none (and its share) beside it: on the page,
  in the CSV and in the API alike.

Real rollups on PostgreSQL: in language/llm-pretrain, `pretrain` ran 8 H100 GPUs for two hours
at 1,000 tokens/s; `evaluation` ran 8 GPUs beside it reporting steps only.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum

from controlplane.models import Job, UsageRollup
from controlplane.services import accounting, showback
from frontend.templatetags.qm import percent
from tests.frontend.test_finance2_job_csv_names import csv_of, run_mixed_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def mixed_project(submit_as: Any) -> dict[str, Job]:
    return run_mixed_project(submit_as)


def job_sums(job: Job, report: showback.Showback) -> dict[str, Any]:
    """The job's cost and tokens over the period the page covers, from its minute rows."""
    return UsageRollup.objects.filter(bucket=accounting.MINUTE, job=job, start__gte=report.start,
                                      start__lt=report.end).aggregate(cost=Sum("cost_usd"),
                                                                      tokens=Sum("retained_tokens"))


@pytest.mark.parametrize("group_by, name", [("team", "language"), ("project", "language/llm-pretrain")])
def test_the_price_of_a_token_is_what_the_token_jobs_cost(client_for: Any, mixed_project: dict[str, Job],
                                                          group_by: str, name: str) -> None:
    client = client_for("finn")
    response = client.get(f"/showback/?window=24h&group_by={group_by}")
    report = response.context["report"]
    pretrain = job_sums(mixed_project["pretrain"], report)
    evaluation = job_sums(mixed_project["evaluation"], report)
    assert evaluation["cost"] > 0 and evaluation["tokens"] == 0 and pretrain["tokens"] > 1_000_000
    per_token = pretrain["cost"] / Decimal(repr(pretrain["tokens"]))
    share = evaluation["cost"] / (pretrain["cost"] + evaluation["cost"])      # about one half
    row = next(r for r in response.context["rows"] if r["name"] == name)
    assert row["usd_per_million_tokens"].quantize(Decimal("0.000001")) == (per_token * 1_000_000).quantize(
        Decimal("0.000001"))
    assert abs(row["share_without_tokens"] - float(share)) < 1e-9
    html = response.content.decode()
    assert "Cost without tokens" in html and f"({percent(row['share_without_tokens'])})" in html
    # The CSV and the API say the same.
    href = re.search(r'href="([^"]+)" id="csv-download"', html).group(1).replace("&amp;", "&")
    _, rows = csv_of(client, href)
    assert Decimal(rows[name]["usd_per_useful_token"]) == per_token.quantize(Decimal("0.000000000001"))
    # cents apportioned so the column adds up to TOTAL: within a cent of the exact figure
    assert abs(Decimal(rows[name]["cost_without_tokens_usd"]) - evaluation["cost"]) <= Decimal("0.01")
    assert Decimal(rows[name]["share_of_cost_without_tokens"]) == share.quantize(Decimal("0.0001"))
    body = client.get(response.context["json_url"]).json()
    allocation = body["data"][0][name]
    assert allocation["usdPerUsefulToken"] == float(per_token.quantize(Decimal("0.000000000001")))
    assert allocation["costWithoutTokens"] == float(rows[name]["cost_without_tokens_usd"])
    assert allocation["shareOfCostWithoutTokens"] == round(float(share), 6)
    # TOTAL: the token jobs' cost over all tokens; what reported none (idle capacity included) beside it.
    total = rows["TOTAL"]
    assert Decimal(total["usd_per_useful_token"]) == per_token.quantize(Decimal("0.000000000001"))
    idle = Decimal(rows[showback.IDLE]["cost_usd"])
    assert abs(Decimal(total["cost_without_tokens_usd"]) - evaluation["cost"] - idle) <= Decimal("0.01")
    assert sum(Decimal(r["cost_without_tokens_usd"]) for k, r in rows.items() if k != "TOTAL") == Decimal(
        total["cost_without_tokens_usd"])


def test_a_job_that_reported_tokens_is_priced_whole(client_for: Any, mixed_project: dict[str, Job]) -> None:
    client = client_for("finn")
    _, rows = csv_of(client, "/api/v1/showback/?window=24h&group_by=job&format=csv")
    pretrain, evaluation = mixed_project["pretrain"], mixed_project["evaluation"]
    assert rows[str(pretrain.pk)]["share_of_cost_without_tokens"] == "0.0000"
    assert rows[str(evaluation.pk)]["share_of_cost_without_tokens"] == "1.0000"
    assert rows[str(evaluation.pk)]["usd_per_useful_token"] == ""


def test_a_job_whose_first_tokens_come_late_counts_whole(submit_as: Any) -> None:
    """A job loads its model for half an hour (no tokens; rolled up meanwhile), then serves
    tokens: its first half hour is what its tokens cost too, at every granularity."""
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.models import Allocation, GroupRollup
    from controlplane.services.cycle import run_cycle
    from tests.controlplane.accounting.builders import report as agent_samples

    now = timezone.now()
    job = submit_as("alice", name="server", gpus=8, gpu_types=("H100-80GB",), project="detector")
    run_cycle("test", now=now - timedelta(hours=2))
    allocation = Allocation.objects.get(job=job)
    node = allocation.gpus.first().node
    agent_samples(allocation, node, now - timedelta(hours=2), now - timedelta(hours=1, minutes=30))
    accounting.catch_up(now - timedelta(hours=1, minutes=20))
    assert UsageRollup.objects.filter(job=job, token_cost_usd__gt=0).count() == 0   # no tokens yet
    agent_samples(allocation, node, now - timedelta(hours=1, minutes=30), now, tokens_per_s=500)
    accounting.catch_up(now)
    for bucket in (accounting.MINUTE, accounting.HOUR, accounting.DAY):
        sums = UsageRollup.objects.filter(job=job, bucket=bucket).aggregate(c=Sum("cost_usd"), t=Sum("token_cost_usd"))
        assert sums["c"] > 0 and sums["t"] == sums["c"], bucket
    groups = GroupRollup.objects.filter(team=job.team).aggregate(c=Sum("cost_usd"), t=Sum("token_cost_usd"))
    assert groups["c"] > 0 and groups["t"] == groups["c"]


def test_migration_0014_fills_rows_rolled_before_it_as_the_rollup_does(mixed_project: dict[str, Job]) -> None:
    """Rows rolled before 0014 have no token cost: its backfill gives every row what the rollup
    now writes (jobs' rows in every bucket, the groups' days and months)."""
    import importlib

    from django.apps import apps

    from controlplane.models import GroupRollup

    fields = ("id", "token_gpu_seconds", "token_cost_usd")
    expected = {m: sorted(m.objects.values_list(*fields)) for m in (UsageRollup, GroupRollup)}
    assert any(t > 0 for _, t, _ in expected[GroupRollup])
    assert GroupRollup.objects.filter(bucket=accounting.MONTH).exists()
    for model in expected:
        model.objects.update(token_gpu_seconds=0, token_cost_usd=0)
    migration = importlib.import_module("controlplane.migrations.0014_token_cost_columns")
    migration.fill_token_columns(apps, None)
    for model, rows in expected.items():
        assert sorted(model.objects.values_list(*fields)) == rows, model.__name__
