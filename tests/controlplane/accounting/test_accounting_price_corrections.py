"""A price rate added, corrected or removed after the hours it prices were rolled up: finance's
figures follow the rate table, as docs/accounting.md promises ("at the PriceRate … in force at
each instant"), not the rates that happened to be known when each minute was rolled.

Fleet: one H100 node of 8 GPUs (reserved, $2.50/GPU-h from 2026-01-01); team ml holds a
guarantee of 8 H100 and its job holds 4 GPUs 10:00–12:00 on 2 November; rolled to 13:00.
  usage  4 GPUs × 2 h = 8 GPU-h;     capacity 8 GPUs × 3 h = 24 GPU-h;
  idle   24 − 8 = 16 GPU-h;          idle guarantee 8 × 3 h − 8 GPU-h used = 16 GPU-h.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum

from controlplane.celery import app
from controlplane.choices import CapacityTier
from controlplane.models import FleetRollup, GroupRollup, PriceRate, QuotaRollup, UsageRollup
from controlplane.services import accounting, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

pytestmark = pytest.mark.django_db
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
CENT = Decimal("0.01")
NOW = T0 + minutes(180)


@pytest.fixture
def committed(monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any) -> Any:
    """`with committed(): rate.save()`: the save commits and its queued `qm.accounting.reprice`
    runs, at once, as in the demo (no broker; a worker does it otherwise)."""
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def rolled() -> dict[str, object]:
    gpu = h100("2.5000")
    n = node(gpu)
    team = f.make_team("ml")
    f.make_quota(team, gpu, nominal_gpus=8)
    job = running_job(team, gpus=4, started_at=T0)
    report(hold(job, [(n, 4)], T0, T0 + minutes(120)), n, T0, T0 + minutes(120))
    accounting.catch_up(NOW)
    return {"gpu": gpu}


def figures(window: showback.Window | None = None) -> dict[str, Decimal]:
    window = window or showback.Window(T0 - minutes(60), NOW, "w")
    report = showback.showback(window, "team", FINANCE, NOW)
    ml = next(e for e in report.entries if e.name == "ml")
    return {"ml": ml.cost_usd.quantize(CENT), "idle": report.idle.cost_usd.quantize(CENT),
            "reserved": (ml.idle_reserved_usd or Decimal(0)).quantize(CENT),
            "fleet": (report.capacity_cost_usd or Decimal(0)).quantize(CENT)}


def assert_levels_agree() -> None:
    for model, fields in ((UsageRollup, ["cost_usd", "lost_cost_usd"]), (FleetRollup, ["cost_usd", "capacity_cost_usd"]),
                          (QuotaRollup, ["idle_cost_usd"])):
        levels = [model.objects.filter(bucket=b).aggregate(**{x: Sum(x) for x in fields})
                  for b in (accounting.MINUTE, accounting.HOUR, accounting.DAY)]
        assert levels[0] == levels[1] == levels[2], model.__name__
    days = GroupRollup.objects.filter(bucket=accounting.DAY).aggregate(c=Sum("cost_usd"))["c"]
    months = GroupRollup.objects.filter(bucket=accounting.MONTH).aggregate(c=Sum("cost_usd"))["c"]
    assert days == months == UsageRollup.objects.filter(bucket=accounting.DAY).aggregate(c=Sum("cost_usd"))["c"]


def test_the_figures_before_any_correction(rolled: dict[str, object]) -> None:
    assert figures() == {"ml": Decimal("20.00"), "idle": Decimal("40.00"), "reserved": Decimal("40.00"),
                         "fleet": Decimal("60.00")}


def test_a_corrected_rate_reprices_the_hours_already_rolled(rolled: dict[str, object], committed: Any) -> None:
    """The reserved H100 rate was entered wrong: $2.50 becomes $2.00, in force since January.
    Before, showback kept $2.50 for every minute rolled before the edit (ml $20.00)."""
    rate = PriceRate.objects.get(gpu_type=rolled["gpu"], capacity_tier=CapacityTier.RESERVED)
    rate.usd_per_gpu_hour = Decimal("2.0000")
    with committed():
        rate.save()
    assert figures() == {"ml": Decimal("16.00"), "idle": Decimal("32.00"), "reserved": Decimal("32.00"),
                         "fleet": Decimal("48.00")}
    assert_levels_agree()


def test_a_new_rate_from_a_past_instant_mid_minute_applies_from_that_instant(rolled: dict[str, object], committed: Any) -> None:
    """A rate of $3.10 from 11:00:30 (added at 13:00, after everything was rolled):
    ml: 4 × 1.008333 h × $2.50 + 4 × 0.991667 h × $3.10 = $10.0833 + $12.2967 = $22.38;
    capacity: 8 × 1.008333 × 2.50 + 8 × 1.991667 × 3.10 = $20.1667 + $49.3933 = $69.56."""
    with committed():
        f.make_price_rate(rolled["gpu"], "3.1000", tier=CapacityTier.RESERVED,
                          effective_from=T0 + minutes(60) + timedelta(seconds=30))
    got = figures()
    assert got["ml"] == Decimal("22.38")
    assert got["fleet"] == Decimal("69.56")
    assert got["idle"] == got["fleet"] - got["ml"]
    # the idle guarantee: 4 GPUs idle 10–12 and 8 from 12–13, at the reserved rate in force
    # 4 × 1.008333 × 2.50 + 4 × 0.991667 × 3.10 + 8 × 1 × 3.10 = 10.0833 + 12.2967 + 24.80
    assert got["reserved"] == Decimal("47.18")
    assert_levels_agree()


def test_a_removed_rate_leaves_its_hours_to_the_rate_before_it(rolled: dict[str, object], committed: Any) -> None:
    with committed():
        extra = f.make_price_rate(rolled["gpu"], "3.1000", tier=CapacityTier.RESERVED, effective_from=T0 + minutes(60))
    assert figures()["ml"] == Decimal("22.40")  # 4 × 1 h × 2.50 + 4 × 1 h × 3.10
    with committed():
        extra.delete()
    assert figures() == {"ml": Decimal("20.00"), "idle": Decimal("40.00"), "reserved": Decimal("40.00"),
                         "fleet": Decimal("60.00")}
    assert_levels_agree()


def test_a_rate_moved_later_reprices_from_where_it_was(rolled: dict[str, object], committed: Any) -> None:
    with committed():
        extra = f.make_price_rate(rolled["gpu"], "3.1000", tier=CapacityTier.RESERVED, effective_from=T0 + minutes(60))
    extra.effective_from = datetime(2026, 11, 2, 11, 30, tzinfo=UTC)
    with committed():
        extra.save()
    assert figures()["ml"] == Decimal("21.20")  # 4 × 1.5 h × 2.50 + 4 × 0.5 h × 3.10
    assert_levels_agree()


def test_a_rate_from_the_future_changes_nothing_rolled(rolled: dict[str, object], committed: Any) -> None:
    with committed():
        f.make_price_rate(rolled["gpu"], "9.0000", tier=CapacityTier.RESERVED, effective_from=NOW + timedelta(days=1))
    assert figures() == {"ml": Decimal("20.00"), "idle": Decimal("40.00"), "reserved": Decimal("40.00"),
                         "fleet": Decimal("60.00")}


def test_another_gpu_types_rate_leaves_these_rows_alone(rolled: dict[str, object], committed: Any) -> None:
    """A rate for A100s (none in this fleet) reprices nothing here: only the GPU types and
    tiers a change touches are rewritten."""
    a100 = f.make_gpu_type("A100-40GB", 40)
    before = sorted(UsageRollup.objects.values_list("bucket", "start", "job_id", "cost_usd"))
    with committed():
        f.make_price_rate(a100, "0.1000", tier=CapacityTier.RESERVED, effective_from=T0 - timedelta(days=1))
    assert sorted(UsageRollup.objects.values_list("bucket", "start", "job_id", "cost_usd")) == before
    assert figures()["ml"] == Decimal("20.00")


def test_the_save_itself_only_queues_the_repricing(rolled: dict[str, object], committed: Any,
                                                   django_capture_on_commit_callbacks: Any) -> None:
    """The rate's transaction does not wait for the rewrite (a week of a large fleet takes
    minutes): it queues one task on commit, and until it runs the figures are the old ones."""
    rate = PriceRate.objects.get(gpu_type=rolled["gpu"], capacity_tier=CapacityTier.RESERVED)
    rate.usd_per_gpu_hour = Decimal("2.0000")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        rate.save()
    assert len(callbacks) == 1
    assert figures()["ml"] == Decimal("20.00")
    callbacks[0]()
    assert figures()["ml"] == Decimal("16.00")
