"""A synthetic job stream for the demo: researchers submitting a realistic mix through the same
submit service as the API. Deterministic for a given seed.

The mix follows the shape of real fleets (seed 000, "the shape of the work"): many small jobs,
a few single-node 8-GPU fine-tunes, occasional multi-node gangs and serving replicas. Simulated
agents read QM_SIM_* from each job's environment to model its run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import structlog
from django.contrib.auth import get_user_model

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.jobs import SubmitRejected, SubmitRequest, submit

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Shape:
    weight: int
    name: str
    gpus: int
    gpus_per_node: int | None
    workload: str
    priority_class: str | None
    duration_s: tuple[int, int]
    user: str
    project: str


MIX = [
    Shape(30, "notebook", 1, None, "interactive", None, (20, 90), "alice", "detector"),
    Shape(20, "sweep-trial", 2, None, "batch", "batch", (30, 120), "bob", "eval"),
    Shape(12, "finetune", 4, None, "training", None, (60, 180), "alice", "segmentation"),
    Shape(10, "finetune-8x", 8, 8, "training", None, (60, 200), "bob", "llm-pretrain"),
    Shape(5, "pretrain-gang", 16, 8, "training", None, (90, 240), "bob", "llm-pretrain"),
    Shape(3, "pretrain-gang", 32, 8, "training", None, (120, 300), "alice", "detector"),
    Shape(6, "eval-sweep", 1, None, "batch", "best-effort", (20, 60), "bob", "eval"),
]


class DemoJobStream:
    """Submits one job per call while the queue is short, so the demo stays lively but sane."""

    def __init__(self, seed: int = 7, max_pending: int = 25) -> None:
        self.random = random.Random(seed)
        self.max_pending = max_pending
        self.count = 0

    def step(self) -> Job | None:
        if Job.objects.filter(state=JobState.PENDING).count() >= self.max_pending:
            return None
        shape = self.random.choices(MIX, weights=[s.weight for s in MIX])[0]
        duration = self.random.randint(*shape.duration_s)
        self.count += 1
        user = get_user_model().objects.get(username=shape.user)
        request = SubmitRequest(
            name=f"{shape.name}-{self.count}",
            gpus=shape.gpus,
            gpus_per_node=shape.gpus_per_node,
            workload=shape.workload,
            priority_class=shape.priority_class,
            project=shape.project,
            runtime_limit_s=max(600, duration * 3),
            checkpoint_interval_s=30,
            command="python train.py",
            env={
                "QM_SIM_DURATION_S": str(duration),
                "QM_SIM_STEPS_PER_S": str(self.random.choice([2, 5, 10])),
                "QM_SIM_TOKENS_PER_STEP": str(self.random.choice([4096, 8192, 16384])),
                "QM_SIM_ACTIVITY": f"{self.random.uniform(0.55, 0.95):.2f}",
            },
        )
        try:
            return submit(user, request).job
        except SubmitRejected as rejected:
            log.warning("demo submit rejected", errors=rejected.errors)
            return None
