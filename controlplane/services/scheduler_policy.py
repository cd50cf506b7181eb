"""The scheduling policy in force and the loop that runs it, as `scontrol show config` says a
Slurm controller's: the engine's SchedulerConfig as the loop builds it each cycle
(services/snapshot.scheduler_config), the loop's timings, and the leader (lease) now.

Read-only: the policy is set by the deployment's environment (docs/operations.md), quotas and
priority classes by admins."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from django.conf import settings

from controlplane.models import SchedulerLease
from controlplane.services.cycle import LEASE_NAME
from controlplane.services.snapshot import scheduler_config

#: The loop's settings worth knowing beside the policy (settings.QM; environment QM_<NAME>).
LOOP_SETTINGS = ("CYCLE_INTERVAL_S", "CYCLE_DEBOUNCE_S", "LEADER_LEASE_S", "AGENT_LEASE_S", "SUSPECT_AFTER_S",
                 "IN_PROCESS_LOOP")


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
