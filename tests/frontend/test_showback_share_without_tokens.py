"""/showback/'s "Cost without tokens" column gives the share of the row's cost that reported no
tokens as the pages give a share (`percent`: two decimals at most), not in whole percent: on the
demo, vision's $0.10 of $43.38 (0.24 %) read "$0.10 (0%)", a cost beside a share of nothing, as
the CSV's 0.0024 and the API's 0.00242 did not say; and a row almost all without tokens read 100%.

Real rollups: in language, `pretrain` ran 8 H100 GPUs for two hours at 1,000 tokens/s; `eval`, one
A100 GPU for one minute reporting nothing.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState
from controlplane.models import Allocation, AllocationGpu, Job
from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from frontend.templatetags.qm import percent
from tests.controlplane.accounting.builders import report as agent_samples
from tests.frontend.test_history_page import _ended, _node

pytestmark = pytest.mark.django_db


def test_a_small_share_without_tokens_is_not_read_as_none(client_for: Any, submit_as: Any) -> None:
    now = timezone.now().replace(microsecond=0)
    pretrain = submit_as("bob", name="pretrain", gpus=8, gpu_types=("H100-80GB",), project="llm-pretrain")
    run_cycle("test", now=now - timedelta(hours=2))
    allocation = Allocation.objects.get(job=pretrain)
    agent_samples(allocation, allocation.gpus.first().node, now - timedelta(hours=2), now, tokens_per_s=1000)
    Job.objects.filter(pk=pretrain.pk).update(useful_tokens=1000 * 7200)
    evaluation = _ended("language", "eval", now - timedelta(minutes=90), 1, user="bob", gpus=1)
    held = Allocation.objects.create(
        job=evaluation, generation=allocation.generation + 1000, epoch=1, created_at=now - timedelta(minutes=90),
        started_at=now - timedelta(minutes=90), released_at=now - timedelta(minutes=89), state=AllocationState.RELEASED)
    AllocationGpu.objects.create(allocation=held, node=_node("a100-01"), gpu_index=0, live=False)
    accounting.catch_up(now)

    response = client_for("finn").get("/showback/?window=24h")
    row = next(r for r in response.context["rows"] if r["name"] == "language")
    assert 0 < row["share_without_tokens"] < 0.005 and row["cost_without_tokens_usd"] > 0
    html = response.content.decode()
    cells = re.search(r'<th scope="row">language</th>(.*?)</tr>', html, re.S)
    assert cells, html[:500]
    assert f'<small class="muted">({percent(row["share_without_tokens"])})</small>' in cells.group(1)
    assert "(0%)" not in cells.group(1)
