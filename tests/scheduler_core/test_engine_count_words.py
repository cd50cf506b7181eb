"""Counts of one in the engine's sentences are said in the singular, in every phrase of a
family, not only the first: a submit refused with "asks 500 CPUs on one node (1 GPUs × 500);
the largest node with 1 GPUs has 96", a preemption notice whose preemptor "needs 1 GPU" and
the victim "stops whole to free them", "1 nodes have 1 free GPUs", "Holds a reservation for
1 GPUs", "(1 more are idle ...)", "the 1 a100 GPUs of its jobs ahead", "the cycle's 1
placement attempts", an array's "1 task of it holds GPUs … tried once one of them ends"
(found on the demo walk and by reading the sentences, 5 Dec). Each row builds the smallest
snapshot whose sentence has a count of one, and the words it must say."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from scheduler_core import SchedulerConfig
from scheduler_core.capability import never_runs
from tests.scheduler_core.engine_builders import (
    ClusterBuilder,
    make_cluster,
    make_job,
    make_running,
    role,
    why,
)

NO_BACKFILL = SchedulerConfig(backfill=False)


def refused_at_submit(cluster: ClusterBuilder) -> str:
    """What a submit is told (``never_runs``, the control plane's capability check)."""
    snapshot = cluster.snapshot()
    refusal = never_runs(snapshot.pending[0], snapshot.nodes, {t.name: t for t in snapshot.gpu_types})
    assert refusal is not None
    return refusal.message


def said(job_id: str, config: SchedulerConfig | None = None) -> Callable[[ClusterBuilder], str]:
    """The job's sentence and what would start it, as one text."""
    def read(cluster: ClusterBuilder) -> str:
        w = why(cluster.plan(config), job_id)
        return f"{w.message} | {w.would_start_if}"
    return read


def notice(cluster: ClusterBuilder) -> str:
    [preemption] = cluster.plan().preemptions
    return preemption.message


def one_node_with_a_gpu_free_but(**held: int) -> ClusterBuilder:
    """One node whose seven GPUs are busy and whose eighth is free beside too few CPUs or too
    little memory for job j (``hog`` holds them)."""
    hog = make_job("hog").gpus(1).limit(3600)
    hog = hog.cpus_per_gpu(held["cpus"]) if "cpus" in held else hog.memory_per_gpu(held["memory_gb"])
    job = make_job("j").gpus(1)
    job = job.cpus_per_gpu(8) if "cpus" in held else job.memory_per_gpu(100)
    return (make_cluster().nodes(1)
            .running(make_running(hog).on("n0", 0).started(0),
                     make_running(make_job("busy").gpus(6).limit(3600)).on("n0", 1, 2, 3, 4, 5, 6).started(0))
            .pending(job))


CASES: list[tuple[str, Callable[[], ClusterBuilder], Callable[[ClusterBuilder], str], str]] = [
    ("submit: CPUs beside one GPU",
     lambda: make_cluster().nodes(1, cpus=96).pending(make_job("j").gpus(1).cpus_per_gpu(500)),
     refused_at_submit, "asks 500 CPUs on one node (1 GPU × 500); the largest node with 1 GPU has 96"),
    ("submit: memory beside one GPU",
     lambda: make_cluster().nodes(1).pending(make_job("j").gpus(1).memory_per_gpu(600)),
     refused_at_submit,
     "asks 600 GB of memory on one node (1 GPU × 600 GB); the largest node with 1 GPU has 512 GB"),
    ("submit: a fleet of one GPU",
     lambda: make_cluster().nodes(1, gpus=1).pending(make_job("j").gpus(2)),
     refused_at_submit, "asks 2 GPUs; the fleet can never give more than 1 capable GPU"),
    ("submit: nodes with one free GPU",
     lambda: make_cluster().nodes(1, gpus=2).pending(make_job("j").gpus(2).per_node(1).cpus_per_gpu(40)),
     refused_at_submit, "asks 2 members of 1 GPU, 40 CPUs each at once; the fleet has room for 1"),
    ("submit: a leaf switch of one GPU",
     lambda: make_cluster().nodes(2, gpus=1, per_leaf=1).pending(
         make_job("j").gpus(2).per_node(1).topology("same_leaf")),
     refused_at_submit, "asks 2 GPUs under one leaf switch; the largest leaf switch has 1 capable GPU"),
    ("engine: a leaf switch of one GPU",
     lambda: make_cluster().nodes(2, gpus=1, per_leaf=1).pending(
         make_job("j").gpus(2).per_node(1).topology("same_leaf")),
     said("j"), "the largest leaf switch has 1 capable GPU."),
    ("engine: a role of one member",
     lambda: make_cluster().nodes(1).pending(make_job("j").roles(role("w", 1, 0))),
     said("j"), "role 'w' asks for 1 member of 0 GPUs; both must be at least 1."),
    ("engine: one node short of CPUs",
     lambda: one_node_with_a_gpu_free_but(cpus=60),
     said("j", NO_BACKFILL), "1 node has 1 free GPU but fewer than 8 free CPUs. | 8 CPUs free up next to 1 free GPU"),
    ("engine: one node short of memory",
     lambda: one_node_with_a_gpu_free_but(memory_gb=500),
     said("j", NO_BACKFILL), "1 node has 1 free GPU but less than 100 GB of free memory."),
    ("engine: one node with room for a gang's member",
     lambda: make_cluster().nodes(3)
     .running(make_running(make_job("a").gpus(4).limit(3600)).on("n1", 0, 1, 2, 3).started(0),
              make_running(make_job("b").gpus(4).limit(3600)).on("n2", 0, 1, 2, 3).started(0))
     .pending(make_job("j").gpus(16).per_node(8)),
     said("j", NO_BACKFILL),
     "16 a100 GPUs free, but only 1 node with 8 free; its gang needs 2. Estimated start t=3600 from runtime "
     "limits. | 1 more node with 8 free a100 GPUs"),
    ("engine: a reservation of one GPU",
     lambda: one_node_with_a_gpu_free_but(cpus=60),
     said("j"), "Holds a reservation for 1 GPU on 1 node from t=3600, when running jobs reach their runtime "
                "limits; smaller jobs may use that GPU only if they end before then."),
    ("engine: a reservation of one GPU over quota",
     lambda: make_cluster().nodes(2).quota("ml", "a100", 1)
     .running(make_running(make_job("r").gpus(1).limit(3600)).on("n0", 0).started(0))
     .pending(make_job("a").gpus(1).limit(3600)),
     said("a"), "this job needs 1) and the GPU is free, by runtime limits; smaller jobs may use that GPU only"),
    ("engine: a reservation of one GPU before maintenance",
     lambda: make_cluster().nodes(1).maintenance("w1", "n0", start=100, end=200).pending(
         make_job("j").gpus(1).limit(3600)),
     said("j"), "It holds a reservation for 1 GPU from t=200; smaller jobs may use it only if they end before then."),
    ("engine: one idle GPU held for the head",
     lambda: make_cluster().nodes(1)
     .running(make_running(make_job("a").gpus(7).limit(3600)).on("n0", 0, 1, 2, 3, 4, 5, 6).started(0))
     .pending(make_job("j").gpus(8), make_job("k").gpus(2).limit(7200).submitted(1).priority("low")),
     said("k"), "Needs 2 a100 GPUs; 0 are free (1 more is idle, held for job j's reservation)."),
    ("engine: one GPU of its team's jobs ahead",
     lambda: make_cluster().nodes(2).quota("ml", "a100", 1).quota("cv", "a100", 16)
     .running(make_running(make_job("r").gpus(1).limit(3600)).on("n0", 0).started(0),
              make_running(make_job("x").team("cv").gpus(8).limit(3600)).whole("n1").started(0))
     .pending(make_job("big").team("cv").priority("high").gpus(16).per_node(8).limit(3600),
              make_job("a").gpus(1).limit(3600), make_job("b").gpus(1).limit(3600).submitted(1)),
     said("b"), "its team's quota goes first to the 1 a100 GPU of its jobs ahead of it in the queue"),
    ("engine: one placement attempt a cycle",
     lambda: make_cluster().nodes(1).pending(make_job("a").gpus(1), make_job("b").gpus(1).submitted(1)),
     said("b", SchedulerConfig(max_placement_attempts=1)),
     "Not tried this cycle: the cycle's 1 placement attempt went to jobs ahead of it in the queue."),
    ("engine: an array holding one task",
     lambda: make_cluster().nodes(1)
     .running(make_running(make_job("sweep-0").gpus(1).limit(3600).array("sweep", 1)).on("n0", 0).started(0))
     .pending(make_job("sweep-1").gpus(1).limit(3600).submitted(1).array("sweep", 1)),
     said("sweep-1"), "Its array runs at most 1 task at a time and 1 task of it holds GPUs now; it keeps its "
                      "place in the queue and is tried once it ends."),
    ("preemption notice: a preemptor of one GPU",
     lambda: make_cluster().nodes(1).priority("low", 10, grace_period_s=30)
     .running(make_running(make_job("v").priority("low").gpus(8).limit(20000)).whole("n0").started(0))
     .pending(make_job("h").priority("high").gpus(1).limit(3600)),
     notice, "needs 1 GPU, and this job (low, 10) stops whole to free it, with its 8 a100 GPUs."),
]


@pytest.mark.parametrize("cluster,read,words", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_count_of_one_is_said_in_the_singular(cluster: Callable[[], ClusterBuilder],
                                                read: Callable[[ClusterBuilder], str], words: str) -> None:
    text = read(cluster())
    # the words, and no letter after them ("1 capable GPU" is in "1 capable GPUs")
    assert re.search(re.escape(words) + "(?![A-Za-z])", text), text


def test_counts_above_one_keep_the_plural() -> None:
    # the same phrases with two: the plural stays where it was right
    plan = (make_cluster().nodes(1).priority("low", 10, grace_period_s=30)
            .running(make_running(make_job("v").priority("low").gpus(8).limit(20000)).whole("n0").started(0))
            .pending(make_job("h").priority("high").gpus(2).limit(3600))
            .plan())
    assert "needs 2 GPUs, and this job (low, 10) stops whole to free them" in plan.preemptions[0].message
    refusal = refused_at_submit(make_cluster().nodes(1, cpus=96).pending(make_job("j").gpus(2).cpus_per_gpu(500)))
    assert refusal == "asks 1000 CPUs on one node (2 GPUs × 500); the largest node with 2 GPUs has 96"
