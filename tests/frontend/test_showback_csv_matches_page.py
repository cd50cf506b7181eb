"""/showback/ says "the CSV carries the same figures": every figure of the page's table is in the
CSV its Download link fetches, equal to the page's at the page's own precision or finer, and a
small preemption loss never reads as 0.0 GPU-h.

Real rollups on PostgreSQL: vision's job ran 8 GPUs for an hour (1,000 tokens/s) and was then
preempted 2 s after its last checkpoint (16 GPU-s lost); language's job ran for two hours.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import Allocation, Job
from controlplane.services import accounting, transitions
from controlplane.services.cycle import run_cycle
from tests.controlplane.accounting.builders import report as agent_samples

pytestmark = pytest.mark.django_db

# The page's table headings and the CSV columns that carry what each shows.
PAGE_TO_CSV = {
    "GPU-h allocated": ("gpu_hours_allocated", "gpu_hours_idle"),
    "active": ("gpu_hours_active",),
    "productive": ("gpu_hours_productive",),
    "Cost": ("cost_usd",),
    "$ / GPU-h": ("usd_per_gpu_hour",),
    "$ / productive GPU-h": ("usd_per_productive_gpu_hour",),
    "Useful tokens": ("useful_tokens",),
    "$ / 1M tokens": ("usd_per_million_tokens",),
    "Cost without tokens": ("cost_without_tokens_usd", "share_of_cost_without_tokens"),
    "Preemption waste": ("preemption_waste_usd", "preemption_lost_gpu_hours"),
    "Idle reserved quota": ("idle_reserved_usd",),
}


def preempt_after_an_hour(submit_as, since_checkpoint_s: int):
    """vision's job runs 8 GPUs for an hour and is preempted `since_checkpoint_s` after its last
    checkpoint; language's job runs for two hours. The rollups are caught up."""
    now = timezone.now().replace(microsecond=0)
    vision = submit_as("alice", name="v", gpus=8, gpu_types=("H100-80GB",))
    submit_as("bob", name="l", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test", now=now - timedelta(hours=2))
    allocation = Allocation.objects.get(job=vision)
    node = allocation.gpus.first().node
    agent_samples(allocation, node, now - timedelta(hours=2), now - timedelta(hours=1), tokens_per_s=1000)
    Job.objects.filter(pk=vision.pk).update(last_checkpoint_at=now - timedelta(hours=1, seconds=since_checkpoint_s))
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=30, at=now - timedelta(hours=1, seconds=1), actor="test",
                                   message="preempted")
    assert transitions.complete_release(allocation.pk, exit_code=None, at=now - timedelta(hours=1), actor="test")
    accounting.catch_up(now)
    return now


@pytest.fixture
def preempted_after_an_hour(submit_as):
    """16 GPU-s lost: 8 GPUs, 2 s after the checkpoint."""
    return preempt_after_an_hour(submit_as, 2)


def csv_rows(client: Any, html: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    href = re.search(r'href="([^"]+)" id="csv-download"', html).group(1).replace("&amp;", "&")
    response = client.get(href)
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    return rows[0], {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}


def at(value: Any, places: int) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(Decimal(1).scaleb(-places))


def cell(text: str) -> Decimal | None:
    return None if text == "" else Decimal(text)


@pytest.mark.parametrize("group_by", ["team", "project", "priority_class"])
def test_every_figure_on_the_page_is_in_its_csv(client_for, preempted_after_an_hour, group_by):
    client = client_for("finn")
    response = client.get(f"/showback/?window=24h&group_by={group_by}")
    html = response.content.decode()
    header, rows = csv_rows(client, html)
    table = html[html.index('id="showback-table"'):html.index("</thead>")]
    headings = re.findall(r"<th[^>]*>([^<]*)</th>", table)[1:]
    assert headings and all(h in PAGE_TO_CSV for h in headings), headings
    assert {c for h in headings for c in PAGE_TO_CSV[h]} <= set(header)
    for r in response.context["rows"]:
        row = rows[r["name"]]
        assert cell(row["cost_usd"]) == r["cost_usd"]
        assert cell(row["preemption_waste_usd"]) == r["preemption_waste_usd"]
        assert cell(row["cost_without_tokens_usd"]) == r["cost_without_tokens_usd"]
        if r["idle_reserved_usd"] is not None and not r["is_idle"]:   # the page shows none for idle
            assert cell(row["idle_reserved_usd"]) == r["idle_reserved_usd"]
        assert cell(row["usd_per_gpu_hour"]) == at(r["usd_per_gpu_hour"], 4)
        assert cell(row["usd_per_productive_gpu_hour"]) == at(r["usd_per_productive_gpu_hour"], 4)
        assert cell(row["usd_per_million_tokens"]) == at(r["usd_per_million_tokens"], 6)
        assert int(row["useful_tokens"]) == r["useful_tokens"]
        # GPU-hours are rounded cumulatively so each column adds up to TOTAL (page 2 places, CSV
        # 4): a cell is within 0.0001 of the exact figure, and the page's is the CSV's to 0.01.
        pairs = [("preemption_lost_gpu_hours", "lost_gpu_hours", "lost")]
        pairs += ([("gpu_hours_idle", "gpu_hours_idle", "idle")] if r["is_idle"] else
                  [(f"gpu_hours_{t}", f"gpu_hours_{t}", t) for t in ("allocated", "active", "productive")])
        for column, exact, shown in pairs:
            assert abs(cell(row[column]) - Decimal(str(r[exact]))) <= Decimal("0.0001"), column
            assert abs(Decimal(str(r["hours_shown"][shown])) - cell(row[column])) <= Decimal("0.01"), column


def test_a_small_preemption_loss_never_reads_zero(client_for, preempted_after_an_hour):
    response = client_for("finn").get("/showback/?window=24h")
    vision = next(r for r in response.context["rows"] if r["name"] == "vision")
    assert 0 < vision["lost_gpu_hours"] < 0.01          # 16 GPU-s
    html = response.content.decode()
    assert "(0.0 GPU-h)" not in html and "(0.00 GPU-h)" not in html
    assert "(&lt; 0.01 GPU-h)" in html


def test_a_larger_loss_shows_two_decimals(client_for, submit_as):
    preempt_after_an_hour(submit_as, 120)            # 8 GPUs × 120 s = 0.2667 GPU-h
    html = client_for("finn").get("/showback/?window=24h").content.decode()
    assert "(0.27 GPU-h)" in html and "(0.3 GPU-h)" not in html


def test_the_pages_note_promises_what_the_csv_holds(client_for, preempted_after_an_hour):
    html = client_for("finn").get("/showback/?window=24h").content.decode()
    note = re.search(r'<p class="note">(.*?)</p>', html, re.S).group(1)
    assert "the CSV carries every figure of this table" in note
    assert "the same figures" not in note
    # What the note says adds up does add up on the page: the money and the tokens.
    rows = client_for("finn").get("/showback/?window=24h").context["rows"]
    body, total = [r for r in rows if not r["is_total"]], next(r for r in rows if r["is_total"])
    for column in ("cost_usd", "preemption_waste_usd", "useful_tokens"):
        assert sum(r[column] for r in body) == total[column], column
