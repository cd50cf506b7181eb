"""A node's tiers over hours and days read whole hours from its hourly activity rows
(`NodeActivityRollup`, folded in by the accounting run) and only the partial first and last
hours from the raw samples: the same figures as reading every sample, worked out by hand.

Node N: 8 H100, from T0 to NOW = T0 + 5 h 20 min:
- job A holds GPUs 0–3 all along; its agent reports activity 0.5 and 15 steps/s, a first
  sample of 45 s and then every 90 s, so its samples cross every hour's bound (steady:
  productive = active);
- job B holds GPUs 4–5 from T0 + 20 min and ends mid-hour, at T0 + 2 h 37 min; activity 0.8
  and 10 steps/s every 60 s;
- job C holds GPU 6 from T0 + 50 min, reporting every 25 minutes (each sample crossing an hour's
  bound or two buckets' of a minute) activity 0.3 and no progress at all;
- GPU 7 stays idle the whole time.
Over [T0 + 17 min, NOW) (18,180 s): allocated 4 × 18,180 + 2 × 8,220 + 16,200 = 105,360 GPU-s;
active 0.5 × 72,720 + 0.8 × 16,440 + 0.3 × 16,200 = 36,360 + 13,152 + 4,860 = 54,372;
productive (A and B) 49,512.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import F, Max, Sum
from django.test.utils import CaptureQueriesContext

from controlplane.models import AccountingCursor, NodeActivityRollup, UsageSample
from controlplane.services import accounting
from controlplane.services.node_tiers import NodeTiers, node_tiers
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

pytestmark = pytest.mark.django_db
NOW = T0 + minutes(5 * 60 + 20)
FROM = T0 + minutes(17)
B_ENDS = T0 + minutes(157)
# GPU-seconds: both paths add the samples' float offsets (epoch seconds, ~0.2 µs apart) in
# another order, then round each allocation's bucket down to the µs.
EPS = Decimal("0.0001")


@pytest.fixture
def busy() -> dict[str, object]:
    gpu_type = h100()
    n = node(gpu_type, name="n")
    team = f.make_team()
    a = hold(running_job(team, gpus=4, started_at=T0), [(n, 4)], T0)
    b = hold(running_job(team, gpus=2, started_at=T0 + minutes(20)), [(n, 2)], T0 + minutes(20), B_ENDS,
             first_index=4)
    c = hold(running_job(team, gpus=1, started_at=T0 + minutes(50)), [(n, 1)], T0 + minutes(50), first_index=6)
    report(a, n, T0, T0 + timedelta(seconds=45), every=timedelta(seconds=45), activity=0.5, steps_per_s=15)
    report(a, n, T0 + timedelta(seconds=45), NOW, every=timedelta(seconds=90), activity=0.5, steps_per_s=15)
    report(b, n, T0 + minutes(20), B_ENDS, every=minutes(1), activity=0.8, steps_per_s=10)
    report(c, n, T0 + minutes(50), NOW, every=minutes(25), activity=0.3, steps_per_s=0)
    accounting.catch_up(NOW)
    return {"n": n, "a": a, "b": b, "c": c}


def close(x: Decimal, y: Decimal | int) -> bool:
    return abs(x - Decimal(y)) <= EPS


def assert_same(hourly: NodeTiers, samples: NodeTiers) -> None:
    """Every figure of the page: the totals, each bucket, each GPU."""
    assert (hourly.start, hourly.end, hourly.bucket) == (samples.start, samples.end, samples.bucket)
    for tier in ("capacity", "allocated", "active", "productive"):
        assert close(getattr(hourly, tier), getattr(samples, tier)), tier
    assert [(b.start, b.end) for b in hourly.buckets] == [(b.start, b.end) for b in samples.buckets]
    for x, y in zip(hourly.buckets, samples.buckets, strict=True):
        for tier in ("capacity", "allocated", "active", "productive"):
            assert close(getattr(x, tier), getattr(y, tier)), (x.start, tier)
    assert [g.index for g in hourly.gpus] == [g.index for g in samples.gpus]
    for x, y in zip(hourly.gpus, samples.gpus, strict=True):
        for tier in ("capacity", "allocated", "active", "productive"):
            assert close(getattr(x, tier), getattr(y, tier)), (x.index, tier)


def test_hour_buckets_from_the_hourly_rows_equal_the_samples_by_hand(busy) -> None:
    hourly = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR)
    samples = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR, hourly=False)
    assert_same(hourly, samples)
    assert hourly.allocated == Decimal(105_360)
    assert close(hourly.active, 54_372) and close(hourly.productive, 49_512)
    by_start = {b.start: b for b in hourly.buckets}
    # the first bucket is cut at the window's start (43 minutes), the last one at NOW (20 minutes)
    assert hourly.buckets[0].start == FROM and hourly.buckets[-1].end == NOW
    assert close(by_start[FROM].active, 4 * 0.5 * 43 * 60 + 2 * 0.8 * 40 * 60 + 0.3 * 10 * 60)
    # B ends 37 minutes into the hour T0 + 2 h: its allocated and active stop there
    third = by_start[T0 + minutes(120)]
    assert third.allocated == Decimal(4 * 3600 + 2 * 37 * 60 + 3600)
    assert close(third.active, 4 * 0.5 * 3600 + 2 * 0.8 * 37 * 60 + 0.3 * 3600)
    assert close(third.productive, 4 * 0.5 * 3600 + 2 * 0.8 * 37 * 60)
    gpus = {g.index: g for g in hourly.gpus}
    assert gpus[7].allocated == gpus[7].active == gpus[7].productive == Decimal(0)  # idle all along
    assert close(gpus[4].active, 0.8 * 8220) and close(gpus[6].active, 0.3 * 16_200)
    assert gpus[6].productive == Decimal(0)  # C reported no progress


def test_day_buckets_and_the_pages_windows_equal_the_samples(busy) -> None:
    for start, bucket in ((T0 - timedelta(days=2), accounting.DAY), (NOW - timedelta(days=7), None),
                          (NOW - timedelta(hours=24), None), (NOW - timedelta(hours=6), None), (FROM, None)):
        hourly = node_tiers(busy["n"], start, NOW, NOW, bucket=bucket)
        assert_same(hourly, node_tiers(busy["n"], start, NOW, NOW, bucket=bucket, hourly=False))
        # from before T0: A's first 17 minutes too
        assert hourly.allocated == Decimal(105_360 + (17 * 60 * 4 if start < T0 else 0))


def test_the_whole_hours_are_read_from_the_hourly_rows_not_the_samples(busy) -> None:
    """Samples of the whole hours gone (as retention would drop them): the hourly figures stand,
    the sample-by-sample ones lose those hours."""
    before = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR)
    UsageSample.objects.filter(started_at__gte=T0 + minutes(60), ended_at__lte=T0 + minutes(300)).delete()
    after = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR)
    assert close(after.active, before.active) and close(after.productive, before.productive)
    assert node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR, hourly=False).active < before.active - 10_000


def test_a_sample_not_folded_yet_counts_once_and_is_folded_once(busy) -> None:
    """A late sample in a whole hour (an agent's batch resent after a partition) is above the
    folded id: the page reads it from the samples until the next run folds it, then from the
    hour's row — never twice."""
    late = UsageSample.objects.filter(allocation=busy["c"], started_at=T0 + minutes(50 + 25 * 5)).get()
    seconds = (late.ended_at - late.started_at).total_seconds()
    assert late.started_at.hour != late.ended_at.hour  # it crosses an hour's bound
    expected = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR)
    late.delete()
    without = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR)
    # deleting a folded sample does not unfold it: the hourly rows still hold it
    assert close(without.active, expected.active)
    NodeActivityRollup.objects.all().delete()
    AccountingCursor.objects.update(last_node_sample_id=0)
    accounting.roll_up(NOW)  # a new cursor: the rows are rebuilt from the samples kept
    rebuilt = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR)
    assert close(rebuilt.active, expected.active - Decimal(0.3 * seconds))
    # the late sample arrives now, above the folded id
    late.pk = None
    late.save()
    assert late.pk > AccountingCursor.objects.get().last_node_sample_id
    arrived = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR)
    assert_same(arrived, node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR, hourly=False))
    assert close(arrived.active, expected.active)
    rows = NodeActivityRollup.objects.count()
    accounting.roll_up(NOW)
    accounting.roll_up(NOW)
    assert AccountingCursor.objects.get().last_node_sample_id >= late.pk
    assert NodeActivityRollup.objects.count() == rows  # its two hours had rows already
    assert_same(node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR), arrived)
    # and the rows hold every sample exactly once: C's rows sum to its samples
    c_rows = NodeActivityRollup.objects.filter(allocation=busy["c"]).aggregate(s=Sum("active_gpu_seconds"))["s"]
    assert abs(c_rows - 0.3 * 16_200) < 1e-6


def test_a_new_cursor_folds_samples_whose_ids_start_past_a_runs_limit(busy) -> None:
    """Sample ids have gaps (raw samples pruned after their retention, inserts rolled back): a
    run's limit (a million ids) counts from the first sample above the cursor, not from the
    cursor. Until 7 Dec a new cursor with every sample's id past a million folded nothing in its
    run, and the node page's week read empty hours until later runs had walked the gap (so did
    tests/frontend/test_operator_node_tiers.py's week on a test worker whose earlier tests had
    made a million samples: found by planting seven-digit ids)."""
    expected = node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR, hourly=False)
    UsageSample.objects.update(id=F("id") + 5_000_000)
    NodeActivityRollup.objects.all().delete()
    AccountingCursor.objects.update(last_node_sample_id=0)

    accounting.roll_up(NOW)

    assert AccountingCursor.objects.get().last_node_sample_id == UsageSample.objects.aggregate(m=Max("id"))["m"]
    assert_same(node_tiers(busy["n"], FROM, NOW, NOW, bucket=accounting.HOUR), expected)


def test_hourly_figures_take_the_same_seven_queries(busy) -> None:
    with CaptureQueriesContext(connection) as queries:
        t = node_tiers(busy["n"], NOW - timedelta(days=7), NOW, NOW)
    assert t.bucket == accounting.HOUR and len(queries) <= 7
    [samples_query] = [q["sql"] for q in queries.captured_queries if "UNION ALL" in q["sql"]]
    assert NodeActivityRollup._meta.db_table in samples_query


def test_the_hourly_rows_go_with_the_hour_rollups(busy) -> None:
    later = NOW + accounting.hour_retention() + timedelta(days=2)
    assert NodeActivityRollup.objects.exists()
    AccountingCursor.objects.update(rolled_until=later)  # the rollups went on meanwhile
    accounting.apply_retention(later)
    assert accounting.hour_horizon(later) > NOW
    assert not NodeActivityRollup.objects.filter(start__lt=accounting.hour_horizon(later)).exists()


def test_a_sample_longer_than_the_edges_is_still_cut_at_them(busy) -> None:
    """A three-hour sample (an agent back from a partition) crossing the window's start and two
    hours' bounds: the edge's samples are found up to the longest folded sample past it."""
    team = f.make_team()
    d = hold(running_job(team, gpus=1, started_at=T0 + minutes(10)), [(busy["n"], 1)], T0 + minutes(10),
             T0 + minutes(190), first_index=7)
    report(d, busy["n"], T0 + minutes(10), T0 + minutes(190), every=minutes(180), activity=0.6, steps_per_s=0)
    accounting.catch_up(NOW)
    assert AccountingCursor.objects.get().longest_node_sample_s == 3 * 3600
    for bucket in (accounting.HOUR, accounting.DAY):
        hourly = node_tiers(busy["n"], FROM, NOW, NOW, bucket=bucket)
        assert_same(hourly, node_tiers(busy["n"], FROM, NOW, NOW, bucket=bucket, hourly=False))
        assert close(hourly.active, 54_372 + 0.6 * (190 - 17) * 60)
        assert close({g.index: g for g in hourly.gpus}[7].active, 0.6 * (190 - 17) * 60)
