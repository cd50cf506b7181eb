"""The arithmetic of the three tiers and of cost, without the database (services/usage_tiers.py).

Hand-built spans, samples and loss windows; every expected figure is worked out in the test.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.services.usage_tiers import (
    EVICTED,
    FAILED,
    MINUTE_US,
    US,
    Guarantee,
    Holding,
    JobMinute,
    LossWindow,
    PriceBook,
    Sample,
    Span,
    apportion,
    best_steady_window,
    derive_minutes,
    floor_to,
    from_us,
    idle_guarantees,
    productive_of,
    to_us,
)

T0 = to_us(datetime(2026, 11, 2, 10, 0, tzinfo=UTC))
H100 = 1
RESERVED = "reserved"


def prices(*changes: tuple[int, str]) -> PriceBook:
    """H100 reserved at $2.50 from January, then each (µs, "$") change."""
    rows = [(H100, RESERVED, datetime(2026, 1, 1, tzinfo=UTC), Decimal("2.50"))]
    rows += [(H100, RESERVED, from_us(at), Decimal(usd)) for at, usd in changes]
    return PriceBook.from_rows(rows)


def span(job: int = 1, gpus: int = 8, start: int = T0, end: int | None = None, allocation: int = 1,
         node: int = 1, borrowed: bool = False) -> Span:
    return Span(allocation, job, node, gpus, start, end, borrowed, H100, RESERVED)


def samples(start: int, end: int, *, allocation: int = 1, node: int = 1, gpus: int = 8, activity: float = 0.75,
            steps_per_s: float = 10.0, every_s: int = 60) -> list[Sample]:
    out, t = [], start
    while t < end:
        e = min(end, t + every_s * US)
        out.append(Sample(allocation, node, t, e, gpus, activity, round(steps_per_s * (e - t) / US), 0))
        t = e
    return out


def totals(derivation, field: str):  # type: ignore[no-untyped-def]
    return sum((getattr(c, field) for c in derivation.cells.values()), Decimal(0) if field in (
        "allocated", "active", "lost", "cost_usd", "lost_cost_usd", "reported") else 0.0)


def test_allocated_is_gpus_times_seconds_held_and_costs_the_rate() -> None:
    d = derive_minutes(T0, T0 + 120 * MINUTE_US, [span(end=T0 + 90 * MINUTE_US)], [], [], prices())
    assert totals(d, "allocated") == Decimal(8 * 90 * 60)
    assert totals(d, "cost_usd").quantize(Decimal("0.01")) == Decimal("30.00")  # 12 GPU-h × $2.50


def test_active_is_allocated_times_reported_activity() -> None:
    end = T0 + 10 * MINUTE_US
    d = derive_minutes(T0, end, [span(end=end)], samples(T0, end, activity=0.75), [], prices())
    assert totals(d, "active") == Decimal(8 * 600) * Decimal("0.75")


def test_active_never_exceeds_allocated_even_when_reports_overlap() -> None:
    end = T0 + 2 * MINUTE_US
    twice = samples(T0, end, activity=1.0) + samples(T0, end, activity=1.0)
    d = derive_minutes(T0, end, [span(end=end)], twice, [], prices())
    for cell in d.cells.values():
        assert cell.active == cell.allocated


def test_a_sample_outside_the_holding_counts_nothing() -> None:
    end = T0 + 5 * MINUTE_US
    late = samples(end, end + 2 * MINUTE_US)
    d = derive_minutes(T0, end + 2 * MINUTE_US, [span(end=end)], late, [], prices())
    assert totals(d, "active") == 0


def test_price_change_mid_minute_splits_the_minute() -> None:
    change = T0 + 60 * MINUTE_US + 30 * US
    d = derive_minutes(T0 + 30 * MINUTE_US, T0 + 90 * MINUTE_US, [span(start=T0 + 30 * MINUTE_US, end=T0 + 90 * MINUTE_US)],
                       [], [], prices((change, "3.10")))
    # 8 GPUs × 30.5 min at $2.50 + 8 × 29.5 min at $3.10 = $10.1666… + $12.1933… = $22.36
    assert totals(d, "cost_usd").quantize(Decimal("0.000001")) == Decimal("22.360000")


def test_time_before_the_first_price_is_unpriced_and_counted() -> None:
    book = PriceBook.from_rows([(H100, RESERVED, from_us(T0 + 30 * MINUTE_US), Decimal("2.00"))])
    d = derive_minutes(T0, T0 + 60 * MINUTE_US, [span(end=T0 + 60 * MINUTE_US)], [], [], book)
    assert totals(d, "cost_usd").quantize(Decimal("0.01")) == Decimal("8.00")  # only the second half hour
    assert book.unpriced_gpu_us == 8 * 30 * MINUTE_US


def test_eviction_window_is_lost_and_not_retained() -> None:
    end = T0 + 50 * MINUTE_US
    loss = LossWindow(1, T0 + 32 * MINUTE_US, end, EVICTED)
    d = derive_minutes(T0, end, [span(end=end)], samples(T0, end), [loss], prices())
    assert totals(d, "lost") == Decimal(8 * 18 * 60)
    assert totals(d, "lost_cost_usd").quantize(Decimal("0.01")) == Decimal("6.00")
    assert totals(d, "steps") == pytest.approx(10 * 50 * 60)
    assert totals(d, "retained_steps") == pytest.approx(10 * 32 * 60)


def test_failure_window_is_not_retained_but_is_not_preemption_waste() -> None:
    end = T0 + 40 * MINUTE_US
    loss = LossWindow(1, T0 + 30 * MINUTE_US, end, FAILED)
    d = derive_minutes(T0, end, [span(end=end)], samples(T0, end), [loss], prices())
    assert totals(d, "lost") == 0
    assert totals(d, "retained_steps") == pytest.approx(10 * 30 * 60)


def test_a_loss_window_cutting_a_sample_keeps_the_part_before_it() -> None:
    end = T0 + 2 * MINUTE_US
    loss = LossWindow(1, T0 + 90 * US, end, EVICTED)  # half-way through the second minute's sample
    d = derive_minutes(T0, end, [span(end=end)], samples(T0, end), [loss], prices())
    assert totals(d, "retained_steps") == pytest.approx(600 + 300)


def test_minute_is_steady_only_when_held_whole_and_fully_reported() -> None:
    start, end = T0 + 30 * US, T0 + 4 * MINUTE_US
    gap = [s for s in samples(start, end) if s.start_us != start + 2 * MINUTE_US]
    d = derive_minutes(T0, end, [span(start=start, end=end)], gap, [], prices())
    steady = {from_us(m).minute: jm.steady for m, jm in d.job_minutes[1].items()}
    # minute 0 starts late, minute 2 is only partly reported (a sample is missing)
    assert steady == {0: False, 1: True, 2: False, 3: False}


def test_the_minute_a_gang_member_leaves_is_not_steady() -> None:
    end = T0 + 3 * MINUTE_US
    spans = [span(node=1, end=end), span(node=2, end=T0 + 90 * US)]
    reports = samples(T0, end, node=1) + samples(T0, T0 + 90 * US, node=2)
    d = derive_minutes(T0, end, spans, reports, [], prices())
    assert [jm.steady for _, jm in sorted(d.job_minutes[1].items())] == [True, False, True]


def test_a_hold_cut_where_its_borrowed_flag_changed_stays_steady_through_the_cut() -> None:
    """A running job the scheduler came to count as borrowed mid-minute holds its GPUs on
    (accounting.held_spans cuts its span at the change): the minute is still held whole."""
    end, cut = T0 + 3 * MINUTE_US, T0 + 90 * US
    spans = [span(end=cut), span(start=cut, end=end, borrowed=True)]
    d = derive_minutes(T0, end, spans, samples(T0, end), [], prices())
    assert [jm.steady for _, jm in sorted(d.job_minutes[1].items())] == [True, True, True]
    assert sum(c.allocated_gpu_us for (_, _, _, _, borrowed), c in d.cells.items() if borrowed) == 8 * 90 * US


def test_trailing_partial_minute_is_never_steady() -> None:
    end = T0 + 90 * US
    d = derive_minutes(T0, end, [span()], samples(T0, end), [], prices())
    assert [jm.steady for _, jm in sorted(d.job_minutes[1].items())] == [True, False]


def minute(steady: bool = True, active: float = 360.0, steps: float = 600.0) -> JobMinute:
    return JobMinute(steady=steady, active_gpu_seconds=active, steps=steps, useful_tokens=0.0)


def test_fault_free_rate_is_the_best_steady_window_of_five_minutes() -> None:
    minutes = {T0 + i * MINUTE_US: minute(steps=600) for i in range(10)}
    minutes[T0 + 12 * MINUTE_US] = minute(steps=6000)  # a lone fast minute: no window of five
    for i in range(20, 25):
        minutes[T0 + i * MINUTE_US] = minute(steps=720)
    best = best_steady_window(minutes, "steps")
    assert best is not None
    assert best.per_active_gpu_second == pytest.approx(720 / 360)
    assert (best.start_us, best.end_us) == (T0 + 20 * MINUTE_US, T0 + 25 * MINUTE_US)


def test_no_steady_window_without_five_consecutive_steady_minutes() -> None:
    minutes = {T0 + i * MINUTE_US: minute(steady=i != 3) for i in range(8)}
    assert best_steady_window(minutes, "steps") is None


def test_productive_is_retained_progress_at_the_rate_capped_by_active() -> None:
    assert productive_of(Decimal(360), 300.0, 600 / 360) == Decimal("180.000000")
    assert productive_of(Decimal(360), 900.0, 600 / 360) == Decimal(360)  # a burst cannot beat active
    assert productive_of(Decimal(360), 300.0, None) == 0


# ------------------------------------------------------------------------------- guarantees

def cell_parts(cells, team: int):  # type: ignore[no-untyped-def]
    return cells[(team, H100)].parts()


def test_an_unused_guarantee_with_no_borrowers_is_idle_at_the_reserved_rate() -> None:
    cells = idle_guarantees(T0, T0 + 60 * MINUTE_US, [Guarantee(1, H100, 8, None, 1)], [], prices())
    nominal, used, borrowed, lent, idle = cell_parts(cells, 1)
    assert (nominal, used, lent, idle) == (Decimal(8 * 3600), 0, 0, Decimal(8 * 3600))
    assert cells[(1, H100)].idle_cost_usd.quantize(Decimal("0.01")) == Decimal("20.00")


def test_borrowing_is_attributed_to_the_cohort_members_that_left_guarantee_unused() -> None:
    guarantees = [Guarantee(1, H100, 8, None, 1), Guarantee(2, H100, 8, None, 1)]
    held = [Holding(1, H100, 16, T0, T0 + 60 * MINUTE_US)]
    cells = idle_guarantees(T0, T0 + 60 * MINUTE_US, guarantees, held, prices())
    _, used, borrowed, lent, idle = cell_parts(cells, 1)
    assert (used, borrowed, lent, idle) == (Decimal(8 * 3600), Decimal(8 * 3600), 0, 0)
    _, used, borrowed, lent, idle = cell_parts(cells, 2)
    assert (used, lent, idle) == (0, Decimal(8 * 3600), 0)


@pytest.mark.parametrize("limit", [0, 2])
def test_borrowers_beyond_a_lowered_lending_limit_are_still_lent_to(limit: int) -> None:
    """Found by QA: vision's lending limit lowered while ml ran 8 of its GPUs; ml keeps them
    until vision reclaims them, but vision's lent read 0 (or the new limit) and the rest of its
    guarantee idle, while ml ran on it."""
    guarantees = [Guarantee(1, H100, 8, None, 1), Guarantee(2, H100, 8, limit, 1)]
    held = [Holding(1, H100, 16, T0, T0 + 60 * MINUTE_US)]
    cells = idle_guarantees(T0, T0 + 60 * MINUTE_US, guarantees, held, prices())
    _, _, _, lent, idle = cell_parts(cells, 2)
    assert (lent, idle) == (Decimal(8 * 3600), 0)


def test_lending_limit_caps_what_counts_as_lent() -> None:
    guarantees = [Guarantee(1, H100, 8, None, 1), Guarantee(2, H100, 8, 4, 1), Guarantee(3, H100, 8, 4, 1)]
    held = [Holding(1, H100, 16, T0, T0 + 60 * MINUTE_US)]
    cells = idle_guarantees(T0, T0 + 60 * MINUTE_US, guarantees, held, prices())
    _, _, _, lent, idle = cell_parts(cells, 2)
    assert (lent, idle) == (Decimal(4 * 3600), Decimal(4 * 3600))


def test_guarantee_figures_change_exactly_where_holdings_start_and_end() -> None:
    guarantees = [Guarantee(1, H100, 8, None, None)]
    held = [Holding(1, H100, 8, T0 + 15 * US, T0 + 45 * US)]
    cells = idle_guarantees(T0, T0 + MINUTE_US, guarantees, held, prices())
    _, used, _, _, idle = cell_parts(cells, 1)
    assert (used, idle) == (Decimal(8 * 30), Decimal(8 * 30))


# ------------------------------------------------------------------------------ presentation

def test_apportioned_cents_add_up_to_the_rounded_total() -> None:
    thirds = [Decimal(1) / 3] * 3
    assert apportion(thirds) == [Decimal("0.34"), Decimal("0.33"), Decimal("0.33")]
    assert sum(apportion(thirds)) == Decimal("1.00")


@given(st.lists(st.decimals(min_value=0, max_value=10**6, places=9, allow_nan=False, allow_infinity=False),
                min_size=1, max_size=30))
def test_apportioned_values_always_sum_to_the_rounded_total_and_stay_within_a_cent(values: list[Decimal]) -> None:
    rounded = apportion(values)
    assert sum(rounded) == sum(values).quantize(Decimal("0.01"))
    for exact, shown in zip(values, rounded, strict=True):
        assert abs(exact - shown) < Decimal("0.01")


# ------------------------------------------------------------------------------ properties

@st.composite
def holdings_and_reports(draw: st.DrawFn) -> tuple[list[Span], list[Sample], list[LossWindow], int, int]:
    start = T0 + draw(st.integers(0, 59)) * US
    end = start + draw(st.integers(1, 30)) * MINUTE_US + draw(st.integers(0, 59_999_999))
    spans, reports, losses = [], [], []
    for allocation in range(1, draw(st.integers(1, 3)) + 1):
        s0 = draw(st.integers(start, end - 1))
        s1 = draw(st.one_of(st.none(), st.integers(s0 + 1, end)))
        gpus = draw(st.integers(1, 8))
        spans.append(Span(allocation, allocation, allocation, gpus, s0, s1, False, H100, RESERVED))
        t = s0
        while t < (s1 or end):
            e = min((s1 or end), t + draw(st.integers(1, 120)) * US)
            reports.append(Sample(allocation, allocation, t, e, gpus, draw(st.floats(0, 1)),
                                  draw(st.integers(0, 5000)), draw(st.integers(0, 10**6))))
            t = e + draw(st.sampled_from([0, 0, 0, 7 * US]))
        if draw(st.booleans()):
            l0 = draw(st.integers(s0, (s1 or end)))
            losses.append(LossWindow(allocation, l0, (s1 or end), draw(st.sampled_from([EVICTED, FAILED]))))
    return spans, reports, losses, start, end


@settings(max_examples=150, deadline=None)
@given(holdings_and_reports(), st.floats(0.01, 50))
def test_tiers_are_ordered_in_every_cell(case, rate: float) -> None:  # type: ignore[no-untyped-def]
    spans, reports, losses, start, end = case
    change = (start + end) // 2
    d = derive_minutes(start, end, spans, reports, losses, prices((change, "3.10")))
    for (minute_us, *_), cell in d.cells.items():
        productive = productive_of(cell.active, cell.retained_steps, rate)
        assert cell.allocated >= cell.active >= productive >= 0
        assert 0 <= cell.lost <= cell.allocated
        assert cell.retained_steps <= cell.steps + 1e-6
        assert cell.allocated <= Decimal(8 * 60)  # no allocation holds more than its GPUs × a minute
    held = sum(
        s.gpus * (min(s.end_us or end, end) - max(s.start_us, start)) for s in spans
    )
    assert sum((c.allocated for c in d.cells.values()), Decimal(0)) == Decimal(held).scaleb(-6)


def test_floor_to_aligns_to_utc_minutes_hours_and_days() -> None:
    moment = datetime(2026, 11, 2, 10, 37, 41, 123456, tzinfo=UTC)
    assert floor_to(moment, 60) == datetime(2026, 11, 2, 10, 37, tzinfo=UTC)
    assert floor_to(moment, 3600) == datetime(2026, 11, 2, 10, tzinfo=UTC)
    assert floor_to(moment, 86400) == datetime(2026, 11, 2, tzinfo=UTC)
