"""The overview's time series: a window's samples thinned by id, never scanned."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from frontend.fleet_series import fleet_series, lost_work_since, thinned_ids
from tests.frontend.page_data import preempted_event, sample

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("first", "last", "points", "expected"),
    [
        (1, 5, 10, [1, 2, 3, 4, 5]),
        (1, 10, 4, [1, 4, 7, 10]),
        (7, 7, 3, [7]),
        (1, 1000, 3, [1, 501, 1000]),
    ],
    ids=["fewer-ids-than-points", "even-stride", "one-sample", "last-kept-when-stride-misses-it"],
)
def test_thinned_ids_keep_both_ends_within_the_budget(first, last, points, expected):
    ids = thinned_ids(first, last, points)
    assert ids == expected
    assert len(ids) <= points + 1


def test_series_of_a_long_window_is_thinned_to_the_point_budget_in_three_queries(demo, django_assert_num_queries):
    now = timezone.now()
    for i in range(600):
        sample(now - timedelta(seconds=5 * (599 - i)), stranded_gpus=i)
    with django_assert_num_queries(3):
        series = fleet_series(now - timedelta(hours=1), now, max_points=50)
    assert 2 <= len(series) <= 50
    assert series[0]["stranded_gpus"] == 0 and series[-1]["stranded_gpus"] == 599
    assert [s["at"] for s in series] == sorted(s["at"] for s in series)


def test_series_leaves_out_samples_outside_the_window(demo):
    now = timezone.now()
    sample(now - timedelta(days=2), stranded_gpus=99)
    sample(now - timedelta(minutes=5), stranded_gpus=1)
    series = fleet_series(now - timedelta(hours=1), now)
    assert [s["stranded_gpus"] for s in series] == [1]


def test_series_of_an_empty_window_is_empty_in_one_query(demo, django_assert_num_queries):
    now = timezone.now()
    with django_assert_num_queries(1):
        assert fleet_series(now - timedelta(hours=1), now) == []


def test_lost_work_counts_each_kind_and_sums_the_lost_hours(demo, submit_as, django_assert_num_queries):
    job = submit_as("alice")
    now = timezone.now()
    preempted_event(job, now, 1800.0)
    preempted_event(job, now, 1800.0)
    preempted_event(job, now, 3600.0, kind="job.requeued")
    preempted_event(job, now, 360.0, kind="job.resized")
    preempted_event(job, now - timedelta(hours=3), 7200.0)
    with django_assert_num_queries(1):
        lost = lost_work_since(now - timedelta(hours=1))
    assert lost == {"preemptions": 2, "fenced_requeues": 1, "resizes": 1, "lost_gpu_hours": pytest.approx(2.1)}
