"""The quota half of "can it ever run?", before the job is stored:
``never_under_quota(spec, nodes, gpu_types, quotas)`` says a job the fleet could run can never be
admitted by its team's quotas (nominal plus its borrowing limit, or all its cohort could lend) in
the words the cycle's ``CanNeverRun`` uses, and says nothing of a job some quota could admit.
Each verdict is checked against ``schedule()`` on the same empty fleet and quotas."""

from __future__ import annotations

import pytest
from engine_builders import DEFAULT_TYPES, make_cluster, make_job, role, why

from scheduler_core import NodeInfo, QuotaInfo, ReasonCode
from scheduler_core.capability import Infeasible, never_under_quota

TYPES = {t.name: t for t in DEFAULT_TYPES}
NODES = ([NodeInfo(f"h{i}", "main", "h100", 8, 64, 512, "l0", "s0") for i in range(12)]
         + [NodeInfo(f"a{i}", "main", "a100-40", 8, 64, 512, "l1", "s0") for i in range(12)])
# ml: 40 nominal H100s and at most 32 borrowed; 8 A100-40s and at most 8 borrowed (the demo's vision)
QUOTAS = (
    QuotaInfo("ml", "h100", 40, borrowing_limit=32, cohort="shared"),
    QuotaInfo("cv", "h100", 56, cohort="shared"),
    QuotaInfo("ml", "a100-40", 8, borrowing_limit=8, cohort="shared"),
    QuotaInfo("cv", "a100-40", 24, cohort="shared"),
)


def _plan(spec):
    cluster = make_cluster()
    for n in NODES:
        cluster.node(n.name, gpu_type=n.gpu_type, gpus=n.gpus, cpus=n.cpus, memory_gb=n.memory_gb,
                     leaf=n.leaf, spine=n.spine)
    for q in QUOTAS:
        cluster.quota(q.team, q.gpu_type, q.nominal_gpus, borrowing_limit=q.borrowing_limit,
                      lending_limit=q.lending_limit, cohort=q.cohort)
    return cluster.pending(spec).plan()


@pytest.mark.parametrize(
    ("job", "field", "message"),
    [
        (make_job("j").gpus(96).types("h100"), "gpus",
         "Can never run under its quota: team ml may hold at most 72 h100 GPUs (40 nominal and 32 borrowed at "
         "most); this job needs 96."),
        (make_job("j").gpus(80), "gpus",
         "Can never run under its quota: team ml may hold at most 16 a100-40 GPUs (8 nominal and 8 borrowed at "
         "most) or at most 72 h100 GPUs (40 nominal and 32 borrowed at most); this job needs 80."),
        (make_job("j").gpus(96).elastic(80, 96), "min_gpus",
         "Can never run under its quota: team ml may hold at most 16 a100-40 GPUs (8 nominal and 8 borrowed at "
         "most) or at most 72 h100 GPUs (40 nominal and 32 borrowed at most); this job needs 80."),
        (make_job("j").gpus(32).types("a100-40"), "gpus",
         "Can never run under its quota: team ml may hold at most 16 a100-40 GPUs (8 nominal and 8 borrowed at "
         "most); this job needs 32."),
    ],
    ids=["beyond-its-ceiling", "beyond-every-types-ceiling", "elastic-minimum-beyond", "one-type-beyond"],
)
def test_a_job_its_quotas_never_admit_is_told_in_the_cycles_words(job, field, message):
    spec = job.obj()
    found = never_under_quota(spec, NODES, TYPES, QUOTAS)
    assert found == Infeasible(field, message)
    explained = why(_plan(spec), "j")
    assert explained.reason == ReasonCode.CAN_NEVER_RUN and explained.message == message


@pytest.mark.parametrize(
    "job",
    [
        make_job("j").gpus(72).types("h100"),  # exactly its ceiling
        make_job("j").gpus(48),  # within the H100 ceiling; the A100-40s' would not hold it
        make_job("j").gpus(96).elastic(64, 96),  # its smallest size fits
        make_job("j").gpus(8).team("nobody-has-quota").types("t4"),  # ... on a type no quota governs
    ],
    ids=["at-its-ceiling", "one-type-holds-it", "elastic-minimum-fits", "ungoverned-type"],
)
def test_a_job_some_quota_admits_is_not_told_so(job):
    assert never_under_quota(job.obj(), NODES, TYPES, QUOTAS) is None


def test_a_job_the_fleet_can_never_run_is_the_capability_checks_to_say():
    # 200 GPUs: more than the fleet has, refused by never_runs with its own field and words
    assert never_under_quota(make_job("j").gpus(200).obj(), NODES, TYPES, QUOTAS) is None


def test_a_heterogeneous_gang_is_left_to_the_cycle():
    gang = make_job("j").roles(role("learner", 10, 8, "h100"), role("rollout", 4, 8, "h100"))
    assert never_under_quota(gang.obj(), NODES, TYPES, QUOTAS) is None
