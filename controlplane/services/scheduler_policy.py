"""The scheduling policy in force and the loop that runs it, as `scontrol show config` says a
Slurm controller's: the engine's SchedulerConfig as the loop builds it each cycle
(services/snapshot.scheduler_config), the loop's timings, and the leader (lease) now.

Read-only: the policy is set by the deployment's environment (docs/operations.md), quotas and
priority classes by admins. The API (`scheduler/policy/`, `qm config`) and the admin's
"Scheduler policy" page read it here, with what each setting means (`settings_described`)."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, NamedTuple

from django.conf import settings

from controlplane.models import SchedulerLease
from controlplane.services.cycle import LEASE_NAME
from controlplane.services.snapshot import scheduler_config

#: The loop's settings worth knowing beside the policy (settings.QM; environment QM_<NAME>).
LOOP_SETTINGS = ("CYCLE_INTERVAL_S", "CYCLE_DEBOUNCE_S", "LEADER_LEASE_S", "AGENT_LEASE_S", "SUSPECT_AFTER_S",
                 "IN_PROCESS_LOOP")


class About(NamedTuple):
    """What a setting is: its unit ("" for a name or a switch), what it does, and the environment
    variable that sets it (None: fixed in code, ``fixed`` saying where)."""

    unit: str
    does: str
    variable: str | None = None
    fixed: str = "the engine's default (scheduler_core/types.py, SchedulerConfig)"


#: Every SchedulerConfig field, as an admin tuning quotas and priorities needs it said.
ENGINE_ABOUT: dict[str, About] = {
    "queue_order": About("", "How waiting jobs are ordered: by priority class value plus waiting time, then by the "
                             "team's fair share (lowest dominant share first)."),
    "filters": About("", "The checks a node must pass to host a job: it is ready, its GPUs are what the job asks, "
                         "and its free GPUs, CPUs and memory fit the job."),
    "placement_by_workload": About(
        "", "Where each workload class is placed: pack (best fit, fullest node first, keeping whole nodes free) or "
            "spread (emptiest node, fewest replicas per failure domain). Serving always spreads.",
        "QM_PLACEMENT_POLICY"),
    "victim_chooser": About("", "Which running jobs a preemption stops first: those that lose the least work since "
                                "their last checkpoint."),
    "locality_weights": About("penalty at distance 0, 1, 2, 3",
                              "What spreading one job's GPUs costs in placement: same node, same leaf switch, same "
                              "spine on another leaf, another spine."),
    "fair_share_half_life_s": About("s", "How fast a team's past GPU usage is forgotten in fair share: it counts half "
                                         "as much after this long.", "QM_FAIR_SHARE_HALF_LIFE_S"),
    "aging_per_hour": About("priority points per hour waited",
                            "How much a waiting job's priority grows each hour, so that nothing starves."),
    "backfill": About("on/off", "Smaller jobs start in the gaps a waiting large job leaves, when they end before "
                                "its reserved start."),
    "preemption": About("on/off", "Higher-priority jobs and teams reclaiming their quota may stop running jobs "
                                  "(within each class's grace period, minimum runtime and preemption budget)."),
    "elastic_growth": About("on/off", "Elastic jobs grow into idle GPUs when it repays the cost of resizing."),
    "max_preemptions_per_cycle": About("jobs per cycle", "The most running jobs one cycle may preempt."),
    "max_preemption_searches": About("jobs per cycle", "The most waiting jobs one cycle lets look for victims."),
    "max_placement_attempts": About("jobs per cycle", "Full placement searches per cycle (every job is still "
                                                      "explained).", "QM_MAX_PLACEMENTS_PER_CYCLE"),
    "default_runtime_estimate_s": About("s", "The remaining run time assumed for an elastic job with no runtime "
                                             "limit, when weighing its growth against its resize cost."),
    "resize_restarts": About("on/off", "A resize stops the job and binds it again, so growth must also repay the "
                                       "work since its last checkpoint.",
                             fixed="the control plane (services/snapshot.py, scheduler_config): agents cannot "
                                   "change a running process's GPUs"),
    "pack_candidates": About("nodes", "How many nodes of the fullest bucket that fits pack compares by its "
                                      "tie-breaks."),
    "max_reservation_moves": About("checks per cycle", "How many times a cycle may check whether a later job can "
                                                       "take GPUs held for the waiting head by moving the head's "
                                                       "reservation to other GPUs at the same start (0: classic "
                                                       "backfill)."),
    "widest_gang_first": About("on/off", "Among tied jobs, whole-node gangs the free nodes could hold now are tried "
                                         "widest first."),
}

#: Every LOOP_SETTINGS entry (settings.QM, environment QM_<NAME>).
LOOP_ABOUT: dict[str, About] = {
    "CYCLE_INTERVAL_S": About("s", "How often the scheduling cycle runs (beat's tick; also the reconcile pass).",
                              "QM_CYCLE_INTERVAL_S"),
    "CYCLE_DEBOUNCE_S": About("s", "How long a trigger (a job ended, a node came back) waits to share one cycle with "
                                   "others.", "QM_CYCLE_DEBOUNCE_S"),
    "LEADER_LEASE_S": About("s", "How long a silent leader keeps the lead; a dead leader is replaced after at most "
                                 "this.", "QM_LEADER_LEASE_S"),
    "AGENT_LEASE_S": About("s", "A node's lease: when it runs out the node is quarantined and its allocations "
                                "fenced.", "QM_AGENT_LEASE_S"),
    "SUSPECT_AFTER_S": About("s", "Silence after which a node is suspect (no new work).", "QM_SUSPECT_AFTER_S"),
    "IN_PROCESS_LOOP": About("on/off", "The scheduling loop runs in the web process instead of Celery workers.",
                             "QM_IN_PROCESS_LOOP"),
}


class Described(NamedTuple):
    """One setting as the admin's page lists it."""

    part: str  # "engine" or "loop"
    name: str
    value: str
    unit: str
    does: str
    where: str
    variable: str | None


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_shown(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return f"{value:.0f}"
    return str(value)


def settings_described(current: dict[str, Any] | None = None) -> list[Described]:
    """Every setting of :func:`policy` (``current``: it, when read already), engine first, each
    with its value as the API gives it, its unit, what it does and where it is set."""
    current = policy() if current is None else current
    rows = []
    for part, about_of in (("engine", ENGINE_ABOUT), ("loop", {k.lower(): v for k, v in LOOP_ABOUT.items()})):
        for name, value in current[part].items():
            about = about_of[name]
            where = (f"environment variable {about.variable}" if about.variable else f"fixed in {about.fixed}")
            rows.append(Described(part, name, _shown(value), about.unit, about.does, where, about.variable))
    return rows


def _plain(value: Any) -> Any:
    """A config value as JSON says it: enums by value, mappings by key, tuples as lists."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def policy() -> dict[str, Any]:
    """The engine's policy (every SchedulerConfig field), the loop's settings and the leader."""
    config = scheduler_config()
    lease = SchedulerLease.objects.filter(name=LEASE_NAME).values(
        "holder", "epoch", "expires_at", "last_cycle_at", "last_cycle_ms", "cycles").first()
    return {
        "engine": {f.name: _plain(getattr(config, f.name)) for f in dataclasses.fields(config)},
        "loop": {name.lower(): settings.QM[name] for name in LOOP_SETTINGS},
        "leader": lease,
    }
