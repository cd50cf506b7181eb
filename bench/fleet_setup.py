"""What the end-to-end loop benchmarks share: one team with room for the whole fleet, an API
token, the control plane's processes, the submit of one job array, a timeline of the job
states while it runs, their common options and their report (bench/admission.py,
bench/true_jobs.py)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plane import Plane, wait_for

GPU_TYPE = "H100-80GB"


def options(description: str, *, jobs: int, web_workers: int) -> argparse.ArgumentParser:
    """The options every loop benchmark takes; each adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--jobs", type=int, default=jobs)
    parser.add_argument("--interval", type=float, default=0.0,
                        help="agents' heartbeat interval, seconds (default: what the server says, 2.7 s)")
    parser.add_argument("--web-workers", type=int, default=web_workers)
    parser.add_argument("--timeline", action="store_true", help="print the job states as they went")
    return parser


def report(result: dict[str, Any], timeline: Timeline, args: argparse.Namespace) -> None:
    """The job states as they went (with --timeline), then the figures: JSON with --json."""
    if args.timeline:
        print("\n".join(timeline.lines()))
    print(json.dumps(result) if args.json else "\n".join(f"{k:>22}: {v}" for k, v in result.items()))


def seed(total_gpus: int) -> str:
    """The H100 type, the `batch` priority class (10 s grace), team `bench` whose quota holds
    every GPU, and user `bench` in it. Returns the user's API token."""
    from django.contrib.auth import get_user_model

    from controlplane.models import GpuType, Membership, PriorityClass, Quota, Team
    from controlplane.services import api_tokens

    h100 = GpuType.objects.create(name=GPU_TYPE, memory_gb=80)
    batch = PriorityClass.objects.create(name="batch", value=100, grace_period_s=10)
    team = Team.objects.create(name="bench", default_priority_class=batch)
    Quota.objects.create(team=team, gpu_type=h100, nominal_gpus=total_gpus)
    user = get_user_model().objects.create_user("bench", password="bench")
    Membership.objects.create(user=user, team=team)
    return api_tokens.issue(user)


def start_plane(workdir: Path, env: dict[str, str], *, web_workers: int, web_threads: int = 8) -> Plane:
    """gunicorn, one loop worker (plus the accounting worker) and beat, up and answering."""
    plane = Plane(workdir, env)
    plane.web(workers=web_workers, threads=web_threads)
    plane.loop(workers=1)
    plane.wait_web()
    return plane


def wait_registered(count: int, timeout: float = 120.0) -> float:
    """Seconds until `count` nodes are ready (their agents registered)."""
    from controlplane.choices import NodeState
    from controlplane.models import Node

    return wait_for(lambda: Node.objects.filter(state=NodeState.READY).count() == count, timeout,
                    f"{count} nodes registered")


def submit_array(server: str, token: str, body: dict[str, Any]) -> tuple[float, float]:
    """POST one job array; returns (perf_counter when the POST began, seconds it took)."""
    import requests

    started = time.perf_counter()
    response = requests.post(server + "/api/v1/job-arrays/", json=body,
                             headers={"Authorization": f"Token {token}"}, timeout=120)
    took = time.perf_counter() - started
    if response.status_code != 201:
        raise SystemExit(f"submit failed: HTTP {response.status_code} {response.text[:500]}")
    return started, took


class Timeline:
    """Polls the database and records (seconds since `started`, pending, bound, started on
    their nodes, finished) until `done(sample)`; the figures come from it."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.samples: list[tuple[float, int, int, int, int]] = []

    def sample(self) -> tuple[float, int, int, int, int]:
        from django.db.models import Count

        from controlplane.models import Allocation, Job

        states = dict(Job.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
        confirmed = Allocation.objects.filter(started_at__isnull=False).count()
        row = (time.perf_counter() - self.started, states.get("pending", 0), states.get("running", 0),
               confirmed, states.get("succeeded", 0) + states.get("failed", 0))
        self.samples.append(row)
        return row

    def wait(self, done: Callable[[tuple[float, int, int, int, int]], bool], timeout: float, what: str,
             poll: float = 0.05) -> float:
        """Seconds since `started` at the first sample for which `done` holds."""
        wait_for(lambda: done(self.sample()), timeout, what, poll=poll)
        return self.samples[-1][0]

    def first(self, condition: Callable[[tuple[float, int, int, int, int]], bool]) -> float | None:
        return next((s[0] for s in self.samples if condition(s)), None)

    def lines(self, every: float = 0.5) -> list[str]:
        out, next_at = [], 0.0
        for t, pending, running, confirmed, finished in self.samples:
            if t >= next_at:
                out.append(f"{t:7.2f} s  pending {pending:5d}  running {running:5d}  confirmed started "
                           f"{confirmed:5d}  finished {finished:5d}")
                next_at = t + every
        return out
