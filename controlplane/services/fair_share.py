"""Each team's fair share, as Slurm's `sshare` shows an account's.

The engine computes the shares (scheduler_core.fairshare: what a team holds now plus its
decayed past usage as an average holding, over the fleet's capacity, per resource; the
dominant one orders the queue among jobs of equal priority, lower first). This module reads the
fleet as a cycle would and says them in the units people read: GPUs held now, the decayed past
usage in GPU-hours, each resource's share and the dominant one. Every team is listed, with
zeros for one that holds and used nothing (the teams page shows every team's share to every
signed-in user too)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from controlplane.models import Team
from controlplane.services.snapshot import read_share_sums, scheduler_config, to_seconds
from scheduler_core.fairshare import RESOURCES, fair_shares_of


@dataclass(frozen=True)
class FairShares:
    at: datetime
    half_life_s: float
    teams: list[dict[str, Any]]
    """In the order the queue favours them: lowest dominant share first, then by name."""


def fair_shares(now: datetime | None = None) -> FairShares:
    """Every team's share now, read as the next cycle will order the queue by it."""
    now = now or timezone.now()
    config = scheduler_config()
    # the sums the shares are made of, not a whole snapshot: every node, running job and GPU row
    # read into Python only to be added up (docs/benchmarks.md, *sprio's read*)
    sums = read_share_sums(now)
    found = fair_shares_of(to_seconds(now), sums.capacity, sums.held, sums.team_usage,
                           config.fair_share_half_life_s)
    # decayed seconds are an average holding × half_life / ln 2: back to GPU-hours for people
    to_hours = config.fair_share_half_life_s / math.log(2) / 3600.0
    rows = []
    for name in sorted(set(Team.objects.values_list("name", flat=True)) | set(found)):
        share = found.get(name)
        held = share.held if share else (0.0, 0.0, 0.0)
        past = share.past if share else (0.0, 0.0, 0.0)
        shares = share.shares if share else (0.0, 0.0, 0.0)
        rows.append({
            "team": name,
            "dominant_share": share.dominant_share if share else 0.0,
            "dominant_resource": share.dominant_resource if share else "",
            "shares": dict(zip(RESOURCES, shares, strict=True)),
            "held_now": {"gpus": round(held[0]), "cpus": round(held[1]), "memory_gb": round(held[2])},
            "decayed_usage": {"gpu_hours": past[0] * to_hours, "cpu_hours": past[1] * to_hours,
                              "memory_gb_hours": past[2] * to_hours},
        })
    rows.sort(key=lambda row: (row["dominant_share"], row["team"]))
    return FairShares(at=now, half_life_s=config.fair_share_half_life_s, teams=rows)
