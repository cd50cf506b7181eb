"""Finance QA, round 2 (30 Nov): what /showback/ shows is what its CSV and JSON links give.

- The CSV link carried the page's relative window (`window=7d`): downloaded after the next
  accounting run, it covered a later period than the page showed, and other figures.
- The page's period ended mid-minute at `rolledUntil`, so even its own start,end read later took
  in more of that last minute: it now ends on the last whole minute rolled.
- The "Price of a GPU-hour" chart called the fully loaded TOTAL (idle capacity included) "all".

Real rollups on PostgreSQL; the accounting is held ten minutes behind when the page is read,
then caught up before the CSV is fetched, as the accounting task does every 15 s.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from controlplane.models import Allocation
from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from tests.controlplane.accounting.builders import report as agent_samples

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_behind(submit_as: Any) -> None:
    """vision holds 8 GPUs from two hours ago on; the accounting has rolled up to ten minutes ago."""
    now = timezone.now()
    job = submit_as("alice", name="v", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test", now=now - timedelta(hours=2))
    allocation = Allocation.objects.get(job=job)
    agent_samples(allocation, allocation.gpus.first().node, now - timedelta(hours=2), now, tokens_per_s=1000)
    accounting.catch_up(now - timedelta(minutes=10, seconds=17))


def link(html: str, element_id: str) -> str:
    return re.search(rf'href="([^"]+)" id="{element_id}"', html).group(1).replace("&amp;", "&")


def csv_rows(client: Any, href: str) -> dict[str, dict[str, str]]:
    response = client.get(href)
    assert response.status_code == 200, response.content[:300]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    return {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}


@pytest.mark.parametrize("period", ["window=7d", "window=today", "window=24h&group_by=project"])
def test_the_csv_downloaded_later_is_the_period_the_page_showed(client_for: Any, running_behind: None,
                                                                period: str) -> None:
    client = client_for("finn")
    response = client.get(f"/showback/?{period}")
    report = response.context["report"]
    page_total = next(r for r in response.context["rows"] if r["is_total"])
    if report.end == report.start:
        # Just past midnight UTC, today has nothing rolled up yet: covered by the test below.
        pytest.skip("today is still empty: the accounting is ten minutes behind")
    href = link(response.content.decode(), "csv-download")
    # The link names the page's own period, not a window relative to whenever it is fetched.
    window = parse_qs(urlsplit(href).query)["window"][0]
    assert window == f"{accounting.iso(report.start)},{accounting.iso(report.end)}", window
    # The page covers whole minutes only: the last one is rolled completely.
    assert report.end.second == 0 and report.end.microsecond == 0
    assert report.end <= report.rolled_until
    accounting.catch_up(timezone.now())        # the next accounting runs before the download
    rows = csv_rows(client, href)
    assert rows["TOTAL"]["cost_usd"] == f"{page_total['cost_usd']:.2f}"
    assert rows["TOTAL"]["gpu_hours_allocated"] == f"{page_total['gpu_hours_allocated']:.4f}"
    body = client.get(response.context["json_url"]).json()
    assert body["window"] == {"start": accounting.iso(report.start), "end": accounting.iso(report.end)}
    assert body["totals"]["totalCost"] == float(page_total["cost_usd"])


def test_an_empty_period_offers_no_download_that_would_cover_a_later_one(client_for: Any,
                                                                         running_behind: None) -> None:
    """Minutes past midnight UTC, the accounting has not rolled up any of today: the page showed
    an empty today and linked `window=today`, which, fetched later, covered more than it showed."""
    midnight = accounting.floor_to(timezone.now(), accounting.DAY)
    cursor = accounting.AccountingCursor.objects.get(name=accounting.CURSOR_NAME)
    cursor.rolled_until = midnight - timedelta(minutes=7)     # as if it were 00:02 now
    cursor.save(update_fields=["rolled_until"])
    response = client_for("finn").get("/showback/?window=today")
    report = response.context["report"]
    assert report.start == report.end == midnight
    html = response.content.decode()
    assert 'id="csv-download"' not in html and response.context["json_url"] == ""
    assert "Nothing in this period is rolled up yet" in html
    # Yesterday, fully rolled but for its last seven minutes, still offers its own instants: when
    # it holds this test's record (run within two hours of midnight). Later, the vision job's
    # record begins today and yesterday has none: no figures, so nothing to download
    # (test_finance6_unrecorded_period.py).
    response = client_for("finn").get("/showback/?window=yesterday")
    if response.context["report"].unrecorded:
        assert 'id="csv-download"' not in response.content.decode()
        return
    window = parse_qs(urlsplit(link(response.content.decode(), "csv-download")).query)["window"][0]
    assert window.endswith(accounting.iso(midnight - timedelta(minutes=7))), window


def test_the_page_period_read_again_later_gives_the_same_figures(client_for: Any, running_behind: None) -> None:
    client = client_for("finn")
    first = client.get("/showback/?window=24h").context["report"]
    accounting.catch_up(timezone.now() - timedelta(minutes=3, seconds=29))   # ends mid-minute again
    text = f"{accounting.iso(first.start)},{accounting.iso(first.end)}"
    again = client.get("/showback/", {"window": text}).context["report"]
    assert (again.start, again.end) == (first.start, first.end)
    assert again.total.allocated_gpu_seconds == first.total.allocated_gpu_seconds > 0
    assert again.total.cost_usd == first.total.cost_usd


def test_the_price_chart_names_the_total_with_idle_capacity(client_for: Any, running_behind: None) -> None:
    finance = client_for("finn").get("/showback/?window=24h").context["charts"]
    chart = next(c for c in finance if c.key == "unit_costs")
    names = chart.figure["data"][0]["x"]
    assert "all" not in names
    assert any("idle capacity" in n for n in names), names
    member = client_for("alice").get("/showback/?window=24h").context["charts"]
    names = next(c for c in member if c.key == "unit_costs").figure["data"][0]["x"]
    assert not any("idle" in n for n in names), names     # a member's TOTAL has no idle capacity
