"""One rule judges the ETAs on replays and on the fleet (scheduler_core.judging): a start
within a second after the ETA told is on time; lateness counts zero for those on time; the
percentile is the seed's index rule; a job is small with fewer GPUs than a node, large with a
whole node or more."""

from __future__ import annotations

import pytest

from scheduler_core.judging import ETA_SLACK_S, LARGE, SMALL, judge_etas, p95, size_class


def test_eta_judging_a_start_within_the_slack_is_on_time_and_one_past_it_late():
    judged = judge_etas([-600.0, ETA_SLACK_S, ETA_SLACK_S + 0.5])
    assert judged.judged == 3
    assert judged.on_time == pytest.approx(2 / 3)
    assert judged.late_max_s == ETA_SLACK_S + 0.5
    # the on-time ones: 600 s early and 1 s late (counted as 0 early): median index 1 of [-1, 600]
    assert judged.median_early_s == 600.0


def test_eta_judging_lateness_counts_the_on_time_as_zero_in_the_seed_p95():
    errors = [-60.0] * 19 + [7200.0]
    judged = judge_etas(errors)
    assert judged.late_p95_s == 7200.0  # index int(0.95 * 20) = 19 of [0]*19 + [7200]
    assert judge_etas(errors[:-1] + [-1.0, 7200.0]).late_p95_s == 0.0  # 21: index 19 is 0


def test_eta_judging_the_median_share_of_wait_and_nothing_judged():
    assert judge_etas([0.0, 0.0, 0.0], [0.9, 0.2, 0.5]).median_share_of_wait == 0.5
    empty = judge_etas([])
    assert (empty.judged, empty.on_time, empty.median_early_s, empty.late_p95_s,
            empty.late_max_s, empty.median_share_of_wait) == (0, None, None, None, None, None)


def test_eta_judging_p95_is_the_seeds_index_and_refuses_an_empty_list():
    assert p95([float(x) for x in range(10)]) == 9.0
    assert p95([float(x) for x in range(100)]) == 95.0
    with pytest.raises(ValueError, match="empty"):
        p95([])


def test_size_class_small_is_fewer_gpus_than_a_node_and_large_a_whole_node_or_more():
    assert [size_class(gpus, 8) for gpus in (1, 7, 8, 9, 32)] == [SMALL, SMALL, LARGE, LARGE, LARGE]
