"""Configuration to plugin instances. A policy names plugins; this is the only place where
names become objects, and the only place an unknown name is rejected."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scheduler_core.errors import ConfigError
from scheduler_core.plugins.filters import GpuCapability, NodeReady, ResourceFit
from scheduler_core.plugins.locality import LocalityCost
from scheduler_core.plugins.protocols import (
    FilterPlugin,
    QueueOrderPlugin,
    ScorePlugin,
    TopologyScorer,
    VictimChooser,
)
from scheduler_core.plugins.queue_order import Fifo, PriorityFairShare, PriorityFifo
from scheduler_core.plugins.scores import Pack, Spread
from scheduler_core.plugins.victims import LeastLostWork, NewestFirst
from scheduler_core.types import SchedulerConfig, WorkloadClass

FILTERS: Mapping[str, Callable[[], FilterPlugin]] = {
    NodeReady.NAME: NodeReady,
    GpuCapability.NAME: GpuCapability,
    ResourceFit.NAME: ResourceFit,
}
SCORES: Mapping[str, Callable[[], ScorePlugin]] = {Pack.NAME: Pack, Spread.NAME: Spread}
VICTIM_CHOOSERS: Mapping[str, Callable[[], VictimChooser]] = {
    LeastLostWork.NAME: LeastLostWork,
    NewestFirst.NAME: NewestFirst,
}
REQUIRED_FILTERS = (NodeReady.NAME, GpuCapability.NAME, ResourceFit.NAME)


@dataclass(frozen=True, slots=True)
class Plugins:
    filters: tuple[FilterPlugin, ...]
    score_by_workload: Mapping[WorkloadClass, ScorePlugin]
    topology: TopologyScorer
    queue_order: QueueOrderPlugin
    victims: VictimChooser


def _queue_order(config: SchedulerConfig) -> QueueOrderPlugin:
    if config.queue_order == PriorityFairShare.NAME:
        return PriorityFairShare(config.aging_per_hour, config.default_runtime_estimate_s)
    if config.queue_order == PriorityFifo.NAME:
        return PriorityFifo(config.aging_per_hour)
    if config.queue_order == Fifo.NAME:
        return Fifo()
    known = ", ".join(sorted((PriorityFairShare.NAME, PriorityFifo.NAME, Fifo.NAME)))
    raise ConfigError(f"queue_order: unknown plugin {config.queue_order!r}; known: {known}")


def _pick(kind: str, name: str, table: Mapping[str, Callable[[], object]]) -> None:
    if name not in table:
        raise ConfigError(f"{kind}: unknown plugin {name!r}; known: {', '.join(sorted(table))}")


def build_plugins(config: SchedulerConfig) -> Plugins:
    """Instantiate the plugins ``config`` names. Raises :class:`ConfigError` naming the field,
    the bad value and the accepted values."""
    for name in config.filters:
        _pick("filters", name, FILTERS)
    missing = [f for f in REQUIRED_FILTERS if f not in config.filters]
    if missing:
        raise ConfigError(
            f"filters: {missing} are required (feasibility comes first); got {list(config.filters)}"
        )
    if config.pack_candidates < 1:
        raise ConfigError(f"pack_candidates must be >= 1, got {config.pack_candidates}")
    scores: dict[WorkloadClass, ScorePlugin] = {}
    for workload in WorkloadClass:
        name = config.placement_by_workload.get(workload, Pack.NAME)
        _pick(f"placement_by_workload[{workload.value}]", name, SCORES)
        scores[workload] = Pack(config.pack_candidates) if name == Pack.NAME else SCORES[name]()
    _pick("victim_chooser", config.victim_chooser, VICTIM_CHOOSERS)
    for field_name in ("max_preemptions_per_cycle", "max_reservation_moves"):
        value = getattr(config, field_name)
        if value < 0:
            raise ConfigError(f"{field_name} must be >= 0, got {value}")
    if config.max_placement_attempts < 1:
        # 0 searched no job's placement: nothing ever started, and every job read as untried
        raise ConfigError(f"max_placement_attempts must be >= 1 (0 would never place a job), "
                          f"got {config.max_placement_attempts}")
    if config.fair_share_half_life_s <= 0:
        raise ConfigError(
            f"fair_share_half_life_s must be > 0 seconds, got {config.fair_share_half_life_s}"
        )
    if config.default_runtime_estimate_s <= 0:
        raise ConfigError(
            f"default_runtime_estimate_s must be > 0 seconds, got {config.default_runtime_estimate_s}"
        )
    return Plugins(
        filters=tuple(FILTERS[name]() for name in config.filters),
        score_by_workload=scores,
        topology=LocalityCost(config.locality_weights),
        queue_order=_queue_order(config),
        victims=VICTIM_CHOOSERS[config.victim_chooser](),
    )
