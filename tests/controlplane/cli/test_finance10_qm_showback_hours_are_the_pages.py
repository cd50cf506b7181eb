"""`qm showback` says the GPU-hours the showback page says for the same window (finance review,
7 Dec): qm rounded the API's figures, each already rounded to four places, to two, and a
figure rounded twice can land a hundredth away from the exact one rounded once: ml holding one
GPU for 1.01495 GPU-hours read 1.01 on the page and 1.02 in qm (1.01495 → 1.0150 → 1.02), in
its row and in TOTAL. Now the API gives the page's figures (`gpuHoursShown`, from
services/showback.shown_gpu_hours) and qm prints them without rounding anything again."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.utils import timezone

from controlplane.services import accounting, showback
from controlplane.services.access import access_of
from frontend.showback_data import report_rows
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.cli.showback_table import table_row

#: 1.01495 GPU-hours: 1.01 rounded once, 1.02 rounded to four places (1.0150) and then to two.
HELD = timedelta(seconds=3653, microseconds=820_000)


def _ml_held_one_gpu(fleet) -> str:
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=1, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 1)], start, start + HELD)
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"


def _page_rows(window: str) -> dict[str, dict[str, object]]:
    now = timezone.now()
    report = showback.showback(showback.parse_window(window, now), "team", access_of(User.objects.get(username="finn")),
                               now)
    return {row["name"]: row for row in report_rows(report)}


def test_qm_showback_says_the_pages_gpu_hours(qm, fleet) -> None:
    window = _ml_held_one_gpu(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", window)

    assert r.code == 0, r.err
    page = _page_rows(window)
    assert page["ml"]["hours_shown"]["allocated"] == Decimal("1.01")
    assert table_row(r.out, "ml")["GPU-H ALLOC"] == "1.01", r.out
    assert table_row(r.out, "TOTAL")["GPU-H ALLOC"] == "1.01", r.out
    idle = page[showback.IDLE]["hours_shown"]["idle"]
    assert f"__idle__: {idle:,.2f} GPU-hours of capacity no job held" in r.out


def test_showback_json_gives_the_pages_figures(qm, fleet) -> None:
    window = _ml_held_one_gpu(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    report = qm("showback", "--by", "team", "--window", window, "--json").json()

    ml, idle, totals = report["data"][0]["ml"], report["data"][0][showback.IDLE], report["totals"]
    assert ml["gpuHours"] == 1.015  # the allocation's own figure, to four places (OpenCost's)
    assert ml["shown"]["gpuHours"] == 1.01
    assert totals["shown"]["gpuHours"] == 1.01
    page = _page_rows(window)
    names = {"gpuHours": "allocated", "gpuHoursActive": "active", "gpuHoursProductive": "productive",
             "preemptionLostGpuHours": "lost"}
    for name, allocation in (("ml", ml), ("TOTAL", totals)):
        for key, column in names.items():
            assert allocation["shown"][key] == float(page[name]["hours_shown"][column]), (name, key)
        for key, price in (("usdPerGpuHour", "usd_per_gpu_hour"),
                           ("usdPerProductiveGpuHour", "usd_per_productive_gpu_hour")):
            assert allocation["shown"][key] == (None if page[name]["prices_shown"][price] is None
                                                else float(page[name]["prices_shown"][price])), (name, key)
    assert idle["shown"]["gpuHours"] == float(page[showback.IDLE]["hours_shown"]["idle"])
    assert totals["shown"]["idleGpuHours"] == float(page["TOTAL"]["hours_shown"]["idle"])


def test_a_price_is_rounded_once_from_its_exact_figure() -> None:
    """$2.51499 per GPU-hour is $2.51: rounded to four places first (2.5150) and then to two,
    as qm did with the API's figure, it read $2.52."""
    assert showback.shown_price(Decimal("2.51499")) == Decimal("2.51")
    assert showback.shown_price(Decimal("2.515")) == Decimal("2.52")  # half to even
    assert showback.shown_price(Decimal("0.0042")) == Decimal("0.004200")  # below a cent: said as such
    assert showback.shown_price(Decimal(0)) == Decimal("0.00")
    assert showback.shown_price(None) is None
