"""The engine's sentences count in words that agree with their numbers (found by QA: "Needs 1
GPUs", "all 1 nodes", "preempted 1 times", a kill "at its runtime limit of 0.0 h")."""

from __future__ import annotations

import pytest

from scheduler_core.sentences import counted, distance, duration, gpu_hours, verb
from scheduler_core.types import ReasonCode, SchedulerConfig
from tests.scheduler_core.engine_builders import make_cluster, make_job, make_running, why


@pytest.mark.parametrize("count,noun,said", [
    (1, "GPU", "1 GPU"), (0, "GPU", "0 GPUs"), (8, "h100 GPU", "8 h100 GPUs"), (1, "node", "1 node"),
    (3, "more a100 GPU", "3 more a100 GPUs"), (1, "time", "1 time"),
])
def test_counted_agrees_with_its_number(count: int, noun: str, said: str) -> None:
    assert counted(count, noun) == said


def test_verb_agrees_with_its_number() -> None:
    assert [verb(n, "is", "are") for n in (0, 1, 2)] == ["are", "is", "are"]


@pytest.mark.parametrize("seconds,said", [(8, "8 s"), (119, "119 s"), (600, "10 min"), (3600, "60 min"),
                                          (7200, "2.0 h"), (9000, "2.5 h")])
def test_duration_is_said_as_a_person_says_it(seconds: float, said: str) -> None:
    assert duration(seconds) == said


@pytest.mark.parametrize("seconds,said", [(119.4, "119 s"), (119.6, "2 min"), (7169, "119 min"), (7170, "2.0 h"),
                                          (7199, "2.0 h"), (7200, "2.0 h")])
def test_a_duration_rounding_up_into_the_next_unit_is_said_in_that_unit(seconds: float, said: str) -> None:
    """1 h 59 min 30 s rounds to 120 min: it is "2.0 h", as the pages and qm say it (the engine
    said "120 min", and "120 s" of 119.6 s)."""
    assert duration(seconds) == said


@pytest.mark.parametrize("seconds,said", [(-5, "0 s"), (7170, "2.0 h"), (71.9 * 3600, "71.9 h"),
                                          (71.97 * 3600, "3.0 days"), (84 * 3600, "3.5 days")])
def test_a_distance_is_the_duration_with_days_from_three_days_on(seconds: float, said: str) -> None:
    assert distance(seconds) == said


def test_a_one_gpu_job_short_of_gpus_is_told_in_the_singular() -> None:
    plan = (
        make_cluster().nodes(1).at(10)
        .running(make_running(make_job("busy").gpus(8).limit(3600)).whole("n0").started(0))
        .pending(make_job("one").gpus(1))
        .plan(SchedulerConfig(backfill=False))
    )
    explanation = why(plan, "one")
    assert explanation.code is ReasonCode.INSUFFICIENT_GPUS
    assert explanation.message.startswith("Needs 1 ") and " GPU; 0 are free" in explanation.message
    assert explanation.would_start_if is not None and explanation.would_start_if.endswith("GPU frees up")


def test_a_reservation_waiting_for_one_gpu_of_its_quota_says_gpu() -> None:
    # Seen on the demo: "released the 1 H100-80GB GPUs its quota lacks now".
    plan = (
        make_cluster().nodes(2).at(10).quota("ml", "a100", 8)
        .running(make_running(make_job("small").team("ml").gpus(1).limit(3600)).on("n0", 0).started(0))
        .pending(make_job("big").team("ml").gpus(8))
        .plan()
    )
    explanation = why(plan, "big")
    assert explanation.code is ReasonCode.WAITING_FOR_RESERVATION, explanation.message
    assert "released the 1 a100 GPU its quota lacks now" in explanation.message


@pytest.mark.parametrize("hours,said,about,cell", [
    (0, "0", "0", "0"), (0.0028, "less than 0.01", "less than 0.01", "< 0.01"),
    (0.0099, "less than 0.01", "less than 0.01", "< 0.01"), (0.01, "0.01", "about 0.01", "0.01"),
    (3.0222, "3.02", "about 3.02", "3.02"), (1234.5, "1,234.50", "about 1,234.50", "1,234.50"),
])
def test_gpu_hours_never_say_a_small_loss_as_none(hours: float, said: str, about: str, cell: str) -> None:
    assert (gpu_hours(hours), gpu_hours(hours, about=True), gpu_hours(hours, cell=True)) == (said, about, cell)


def test_a_preemption_notice_says_a_loss_below_a_hundredth_of_a_gpu_hour_as_such() -> None:
    # Before: "it loses about 0.00 GPU-hours" of 8 GPUs x 1 s, where the pages say "< 0.01".
    plan = (
        make_cluster().nodes(1).at(5000)
        .priority("low", 10, grace_period_s=45)
        .running(make_running(make_job("v").priority("low").gpus(8).limit(20000))
                 .whole("n0").started(1000).checkpointed(4999))
        .pending(make_job("h").priority("high").gpus(8).limit(3600))
        .plan()
    )
    [notice] = plan.preemptions
    assert abs(notice.lost_gpu_hours - 8 / 3600) < 1e-6
    assert notice.message.endswith(
        "without a checkpoint in that time it loses less than 0.01 GPU-hours (its work since its last checkpoint).")
