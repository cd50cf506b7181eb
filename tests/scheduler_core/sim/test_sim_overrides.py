"""``--set KEY=VALUE`` parses by the setting's type and refuses what it cannot parse."""

from __future__ import annotations

import pytest

from scheduler_core.sim.overrides import OverrideError, config_with
from scheduler_core.types import SchedulerConfig, WorkloadClass


def test_values_parse_by_the_type_of_the_default() -> None:
    config = config_with(["backfill=false", "aging_per_hour=2.5", "max_preemptions_per_cycle=3",
                          "locality_weights=0,2,20,60", "queue_order=priority_fair_share"])
    assert config.backfill is False
    assert config.aging_per_hour == 2.5
    assert config.max_preemptions_per_cycle == 3
    assert config.locality_weights == (0.0, 2.0, 20.0, 60.0)


def test_placement_mapping_changes_only_the_named_workloads() -> None:
    config = config_with(["placement_by_workload=training=spread"])
    assert config.placement_by_workload[WorkloadClass.TRAINING] == "spread"
    assert config.placement_by_workload[WorkloadClass.SERVING] == SchedulerConfig().placement_by_workload[WorkloadClass.SERVING]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("nonsense=1", "unknown setting 'nonsense'"),
        ("backfill=maybe", "expected true or false"),
        ("aging_per_hour=fast", "expected a number"),
        ("locality_weights=1,2", "expected 4 numbers"),
        ("placement_by_workload=robots=pack", "expected WORKLOAD=PLUGIN"),
        ("backfill", "expected KEY=VALUE"),
    ],
    ids=["unknown-key", "bad-bool", "bad-float", "wrong-tuple-length", "unknown-workload", "no-equals"],
)
def test_bad_override_is_refused_with_the_reason(override: str, message: str) -> None:
    with pytest.raises(OverrideError, match=message):
        config_with([override])
