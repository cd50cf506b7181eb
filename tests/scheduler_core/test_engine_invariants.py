"""Invariants as a Hypothesis state machine: random fleets, quotas and job streams, cycles
applied the way the control loop applies them (binds start, preemptions and kills stop after
a fence, resizes take effect with a new generation). After every cycle:

* no GPU is held twice (binds and growth never touch a GPU anyone holds);
* no gang is partly placed (a bind is the job's whole size, on capable ready nodes, within its
  topology constraint; roles get every member); a gang on distinct nodes has no two members
  on one node, bound or grown;
* quota plus borrowing is never exceeded by what the plan adds;
* preemption victims are whole running jobs, never cascade, and are eligible;
* generations are echoed, so they increase strictly with every resize;
* every job left waiting is explained exactly once, and the plan is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from scheduler_core import (
    GangRole,
    GpuTypeInfo,
    JobSpec,
    NodeInfo,
    NodeState,
    Plan,
    PreemptionReason,
    PriorityClassInfo,
    QuotaInfo,
    RunningJob,
    Snapshot,
    TopologyConstraint,
    WorkloadClass,
    schedule,
)
from scheduler_core.gang import elastic_sizes, is_elastic

TYPES = (GpuTypeInfo("a100", 80), GpuTypeInfo("h100", 80), GpuTypeInfo("a10", 24))
MEMORY = {t.name: t.memory_gb for t in TYPES}
CLASSES = (
    PriorityClassInfo("low", 10, min_runtime_s=300, preemption_budget=2),
    PriorityClassInfo("normal", 100),
    PriorityClassInfo("high", 1000, preemptible=False),
)
VALUE = {c.name: c.value for c in CLASSES}
TEAMS = ("A", "B", "C")

node_specs = st.tuples(
    st.sampled_from((4, 8)),
    st.sampled_from(("a100", "a100", "h100", "a10")),
    st.sampled_from(("l0", "l1", "l2")),
    st.sampled_from([NodeState.READY] * 6 + [NodeState.DOWN, NodeState.CORDONED]),
    st.sampled_from(("", "r1", "r2")),
)

quota_specs = st.lists(
    st.tuples(
        st.sampled_from(TEAMS), st.sampled_from(("a100", "h100")), st.integers(0, 16),
        st.one_of(st.none(), st.integers(0, 8)), st.one_of(st.none(), st.integers(0, 8)),
        st.sampled_from((None, "c", "c")),
    ),
    max_size=6,
    unique_by=lambda q: (q[0], q[1]),
)


@st.composite
def job_specs(draw: st.DrawFn) -> JobSpec:
    gpus = draw(st.sampled_from((1, 1, 2, 3, 4, 8, 8, 12, 16)))
    per_node = draw(st.sampled_from((None, None, 1, 2, 4, 8)))
    topology = draw(st.sampled_from((TopologyConstraint.ANY, TopologyConstraint.ANY,
                                     TopologyConstraint.SAME_LEAF,
                                     TopologyConstraint.SAME_NODE)))
    if topology is TopologyConstraint.SAME_NODE:
        gpus, per_node = min(gpus, 8), None
    roles: tuple[GangRole, ...] = ()
    min_gpus = max_gpus = None
    shape = draw(st.integers(0, 9))
    if shape == 0:
        roles = (GangRole("ps", 1, draw(st.sampled_from((1, 2)))),
                 GangRole("w", draw(st.integers(1, 3)), draw(st.sampled_from((2, 4)))))
        gpus = sum(r.count * r.gpus_per_member for r in roles)
        per_node = None
    elif shape in (1, 2, 3) and topology is not TopologyConstraint.SAME_NODE:
        per_node = per_node or 2
        min_gpus, max_gpus = per_node, per_node * draw(st.integers(2, 4))
        gpus = max_gpus
    distinct = topology is not TopologyConstraint.SAME_NODE and draw(st.integers(0, 3)) == 0
    return JobSpec(
        id="",
        team=draw(st.sampled_from(TEAMS)),
        priority_class=draw(st.sampled_from(("low", "normal", "normal", "high"))),
        gpus=gpus,
        submitted_at=0.0,
        workload=draw(st.sampled_from(tuple(WorkloadClass))),
        gpus_per_node=per_node,
        gpu_types=draw(st.sampled_from(((), (), ("a100",), ("h100", "a100"), ("a10",)))),
        min_gpu_memory_gb=draw(st.sampled_from((0, 0, 30, 60))),
        cpus_per_gpu=draw(st.sampled_from((0, 2, 8))),
        memory_gb_per_gpu=draw(st.sampled_from((0, 16, 64))),
        topology=topology,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        resize_cost_s=draw(st.sampled_from((0.0, 60.0, 1e6))),
        runtime_limit_s=draw(st.sampled_from((None, 600.0, 3600.0, 7200.0))),
        roles=roles,
        restart_cost_s=draw(st.sampled_from((0.0, 120.0))),
        members_on_distinct_nodes=distinct,
    )


def gpus_of(placements) -> set[tuple[str, int]]:
    return {(p.node, i) for p in placements for i in p.gpu_indices}


class FleetMachine(RuleBasedStateMachine):
    @initialize(nodes=st.lists(node_specs, min_size=2, max_size=6), quotas=quota_specs)
    def build(self, nodes, quotas) -> None:
        self.now = 1000.0
        self.nodes = tuple(
            NodeInfo(f"n{k}", "main", gpu_type, width, 64, 512, leaf,
                     "s1" if leaf == "l2" else "s0", state, domain)
            for k, (width, gpu_type, leaf, state, domain) in enumerate(nodes)
        )
        self.by_name = {n.name: n for n in self.nodes}
        self.quotas = tuple(QuotaInfo(*q) for q in quotas)
        self.pending: dict[str, JobSpec] = {}
        self.running: dict[str, RunningJob] = {}
        self.requeue: dict[str, JobSpec] = {}
        self.counter = 0
        self.plans = 0

    @rule(spec=job_specs())
    def submit(self, spec: JobSpec) -> None:
        self.counter += 1
        job_id = f"j{self.counter:03d}"
        self.pending[job_id] = dataclasses.replace(spec, id=job_id, submitted_at=self.now)

    @rule(seconds=st.sampled_from((1.0, 60.0, 900.0, 3600.0)))
    def advance(self, seconds: float) -> None:
        """Time passes; jobs told to stop have been fenced and are gone (preempted ones
        requeue, one preemption more in their budget window)."""
        self.now += seconds
        for job_id in sorted(self.running):
            if self.running[job_id].terminating:
                del self.running[job_id]
                if job_id in self.requeue:
                    self.pending[job_id] = self.requeue.pop(job_id)

    def snapshot(self) -> Snapshot:
        return Snapshot(
            now=self.now, nodes=self.nodes, gpu_types=TYPES, priority_classes=CLASSES,
            quotas=self.quotas, pending=tuple(self.pending[k] for k in sorted(self.pending)),
            running=tuple(self.running[k] for k in sorted(self.running)),
        )

    @rule()
    def cycle(self) -> None:
        snapshot = self.snapshot()
        plan = schedule(snapshot)
        for kind in ("binds", "preemptions", "resizes", "kills", "reservations"):
            if getattr(plan, kind):
                event(f"plan has {kind}")
        assert schedule(snapshot) == plan, "the same snapshot must give the same plan"
        self.check(snapshot, plan)
        self.apply(plan)
        self.plans += 1

    # ------------------------------------------------------------------ checks

    def check(self, snapshot: Snapshot, plan: Plan) -> None:
        pending = {j.id: j for j in snapshot.pending}
        running = {j.spec.id: j for j in snapshot.running}
        held: set[tuple[str, int]] = set()
        for job in snapshot.running:
            held |= gpus_of(job.placements)

        # no GPU held twice: binds and growth only take GPUs nobody holds
        taken: Counter[tuple[str, int]] = Counter()
        for bind in plan.binds:
            assert bind.job_id in pending
            for gpu in gpus_of(bind.placements):
                taken[gpu] += 1
        for resize in plan.resizes:
            old = gpus_of(running[resize.job_id].placements)
            new = gpus_of(resize.placements)
            if resize.for_job is None:
                # growth takes the shape a fresh bind at the new size would have, so it may move
                # off GPUs it held (docs/engine.md, Elastic jobs); what it adds must be free
                assert len(new) > len(old), "growth only adds GPUs"
                assert (resize.from_gpus, resize.to_gpus) == (len(old), len(new))
                for gpu in new - old:
                    taken[gpu] += 1
                self.check_distinct_nodes(running[resize.job_id].spec, resize.placements)
            else:
                assert new < old, "a shrink only gives GPUs up"
        assert all(n == 1 for n in taken.values()), taken
        assert not set(taken) & held, "a held GPU was handed out again"

        # no partial gang, capability, readiness and topology
        for bind in plan.binds:
            spec = pending[bind.job_id]
            self.check_gang(spec, bind.placements)

        # quota plus borrowing never exceeded by what the plan adds
        self.check_quota(snapshot, plan)
        self.check_promised_quota(snapshot, plan)
        self.check_cohort_promises(snapshot, plan)

        # preemption: whole running jobs, eligible, no cascades, generations echoed
        bound = {b.job_id for b in plan.binds}
        killed = {k.job_id for k in plan.kills}
        for p in plan.preemptions:
            victim = running[p.job_id]
            assert not victim.terminating and p.job_id not in killed
            assert p.generation == victim.generation
            assert p.for_job in pending and p.for_job not in bound
            assert p.lost_gpu_hours >= 0 and p.grace_period_s >= 0
            preemptor = pending[p.for_job]
            if p.reason is PreemptionReason.HIGHER_PRIORITY:
                assert VALUE[victim.spec.priority_class] < VALUE[preemptor.priority_class]
                assert victim.spec.priority_class != "high", "high is not preemptible"
            else:
                # borrowed capacity is always reclaimable, whatever the class
                assert p.reason is PreemptionReason.RECLAIM_BORROWED and victim.borrowed
        for r in plan.resizes:
            assert r.generation == running[r.job_id].generation
        assert not {p.job_id for p in plan.preemptions} & {r.job_id for r in plan.resizes}

        # every waiting job explained exactly once
        explained = Counter(p.job_id for p in plan.pending)
        assert set(explained) == set(pending) - bound
        assert all(n == 1 for n in explained.values())

    def check_gang(self, spec: JobSpec, placements) -> None:
        total = sum(len(p.gpu_indices) for p in placements)
        if spec.roles:
            per_role = Counter()
            for p in placements:
                per_role[p.role] += len(p.gpu_indices)
            assert dict(per_role) == {r.name: r.count * r.gpus_per_member for r in spec.roles}
        elif is_elastic(spec):
            assert total in elastic_sizes(spec)
        else:
            assert total == spec.gpus
        for p in placements:
            node = self.by_name[p.node]
            assert node.state is NodeState.READY
            assert all(0 <= i < node.gpus for i in p.gpu_indices)
            assert len(set(p.gpu_indices)) == len(p.gpu_indices)
            if spec.gpu_types and not spec.roles:
                assert node.gpu_type in spec.gpu_types
            if not spec.roles:
                assert MEMORY[node.gpu_type] >= spec.min_gpu_memory_gb
        self.check_distinct_nodes(spec, placements)
        nodes = {p.node for p in placements}
        if spec.topology is TopologyConstraint.SAME_NODE:
            assert len(nodes) == 1
        if spec.topology is TopologyConstraint.SAME_LEAF and not spec.roles:
            assert len({self.by_name[n].leaf for n in nodes}) == 1
        if not spec.roles:
            types = {self.by_name[n].gpu_type for n in nodes}
            assert len(types) == 1, "a gang does not mix GPU types"

    @staticmethod
    def check_distinct_nodes(spec: JobSpec, placements) -> None:
        """A gang on distinct nodes: one member per node (placements are merged per node and
        role, so a node named twice, or holding more than one member's GPUs, has two)."""
        if not spec.members_on_distinct_nodes:
            return
        per_node = Counter(p.node for p in placements)
        assert all(n == 1 for n in per_node.values()), placements
        if spec.roles:
            sizes = {r.name: r.gpus_per_member for r in spec.roles}
            assert all(len(p.gpu_indices) == sizes[p.role] for p in placements), placements
        elif spec.gpus_per_node is not None:
            assert all(len(p.gpu_indices) <= spec.gpus_per_node for p in placements), placements

    def check_quota(self, snapshot: Snapshot, plan: Plan) -> None:
        quota = {(q.team, q.gpu_type): q for q in self.quotas}
        governed = {t for _, t in quota}
        if not governed:
            return
        before: Counter[tuple[str, str]] = Counter()
        for job in snapshot.running:
            for p in job.placements:
                before[(job.spec.team, self.by_name[p.node].gpu_type)] += len(p.gpu_indices)
        after = Counter(before)
        teams = {j.id: j.team for j in snapshot.pending}
        for bind in plan.binds:
            for p in bind.placements:
                after[(teams[bind.job_id], self.by_name[p.node].gpu_type)] += len(p.gpu_indices)
        running = {j.spec.id: j for j in snapshot.running}
        for r in plan.resizes:
            if r.for_job is None:
                # a grown job may move off GPUs it held (the shape of a fresh bind): its team
                # then holds its new GPUs instead of its old ones, not as well
                team = running[r.job_id].spec.team
                for node, _ in gpus_of(r.placements):
                    after[(team, self.by_name[node].gpu_type)] += 1
                for node, _ in gpus_of(running[r.job_id].placements):
                    after[(team, self.by_name[node].gpu_type)] -= 1

        def ceiling(team: str, gpu_type: str) -> int:
            q = quota.get((team, gpu_type))
            if q is None:
                return 0
            if q.cohort is None:
                return q.nominal_gpus
            lendable = sum(
                o.nominal_gpus if o.lending_limit is None else min(o.nominal_gpus, o.lending_limit)
                for (t, g), o in quota.items()
                if g == gpu_type and o.cohort == q.cohort and t != team
            )
            room = lendable if q.borrowing_limit is None else min(lendable, q.borrowing_limit)
            return q.nominal_gpus + room

        for (team, gpu_type), used in after.items():
            if gpu_type not in governed or used == before[(team, gpu_type)]:
                continue
            assert used <= ceiling(team, gpu_type), (team, gpu_type, used)
        # jobs admitted without borrowing kept their team within nominal: they are admitted
        # before any borrowing job of the same team and GPU type in a cycle
        unborrowed: Counter[tuple[str, str]] = Counter()
        for bind in plan.binds:
            if not bind.borrowed:
                for p in bind.placements:
                    unborrowed[(teams[bind.job_id], self.by_name[p.node].gpu_type)] += \
                        len(p.gpu_indices)
        for key, gpus in unborrowed.items():
            q = quota.get(key)
            if q is not None and key[1] in governed and before[key] <= q.nominal_gpus:
                assert before[key] + gpus <= q.nominal_gpus, (key, before[key], gpus)

    def check_promised_quota(self, snapshot: Snapshot, plan: Plan) -> None:
        """A job promised GPUs at a later start (a reservation) of a team in no cohort is
        promised its quota then too: what its team still holds at that start (running jobs
        and this plan's starts and growths that outlast it, other promises of the team from
        then), with its own GPUs, stays within nominal (docs/engine.md, quota_promises)."""
        quota = {(q.team, q.gpu_type): q for q in self.quotas}
        if not quota:
            return
        stopping = {p.job_id for p in plan.preemptions} | {k.job_id for k in plan.kills}
        grown = {r.job_id: r.placements for r in plan.resizes}
        holders: list[tuple[str, float, float, tuple]] = []  # team, from, until, placements
        for job in snapshot.running:
            if job.terminating or job.spec.id in stopping:
                continue
            limit = job.spec.runtime_limit_s
            until = math.inf if limit is None else job.started_at + limit
            holders.append((job.spec.team, self.now, until, grown.get(job.spec.id, job.placements)))
        teams = {j.id: j for j in snapshot.pending}
        for bind in plan.binds:
            limit = teams[bind.job_id].runtime_limit_s
            holders.append((teams[bind.job_id].team, self.now,
                            math.inf if limit is None else self.now + limit, bind.placements))
        for r in plan.reservations:
            spec = teams[r.job_id]
            limit = spec.runtime_limit_s
            holders.append((spec.team, r.start_at, math.inf if limit is None else r.start_at + limit,
                            r.placements))
        for r in plan.reservations:
            spec = teams[r.job_id]
            mine = Counter(self.by_name[p.node].gpu_type for p in r.placements for _ in p.gpu_indices)
            for gpu_type in mine:
                q = quota.get((spec.team, gpu_type))
                if q is None or q.cohort is not None:
                    continue
                held = sum(len(p.gpu_indices) for team, since, until, placements in holders
                           if team == spec.team and since <= r.start_at < until
                           for p in placements if self.by_name[p.node].gpu_type == gpu_type)
                assert held <= q.nominal_gpus, (r.job_id, r.start_at, spec.team, gpu_type, held,
                                                q.nominal_gpus)

    def check_cohort_promises(self, snapshot: Snapshot, plan: Plan) -> None:
        """A reservation of a team in a cohort is promised what the cohort lends it at its
        start: if the cohort, with everything its teams then hold, lends the team too little
        for it, the jobs of its other teams that this plan starts borrowing are not the
        cause (docs/engine.md, quota_promises). (A team using its own nominal quota may take
        back what it lends.)"""
        quota = {(q.team, q.gpu_type): q for q in self.quotas}
        if not any(q.cohort is not None for q in quota.values()):
            return
        stopping = {p.job_id for p in plan.preemptions} | {k.job_id for k in plan.kills}
        grown = {r.job_id: r.placements for r in plan.resizes}
        specs = {j.id: j for j in snapshot.pending}
        # team, from, until, placements, started borrowing by this plan
        holders: list[tuple[str, float, float, tuple, bool]] = []
        for job in snapshot.running:
            if not (job.terminating or job.spec.id in stopping):
                limit = job.spec.runtime_limit_s
                holders.append((job.spec.team, self.now,
                                math.inf if limit is None else job.started_at + limit,
                                grown.get(job.spec.id, job.placements), False))
        for bind in plan.binds:
            limit = specs[bind.job_id].runtime_limit_s
            holders.append((specs[bind.job_id].team, self.now,
                            math.inf if limit is None else self.now + limit, bind.placements,
                            bind.borrowed))
        for r in plan.reservations:
            limit = specs[r.job_id].runtime_limit_s
            holders.append((specs[r.job_id].team, r.start_at,
                            math.inf if limit is None else r.start_at + limit, r.placements, False))

        def lent_enough(team: str, gpu_type: str, at: float, blamed: bool) -> bool:
            used: Counter[str] = Counter()
            for holder, since, until, placements, borrowing in holders:
                if since <= at < until and not (blamed and borrowing and holder != team):
                    used[holder] += sum(len(p.gpu_indices) for p in placements
                                        if self.by_name[p.node].gpu_type == gpu_type)
            q = quota[(team, gpu_type)]
            if used[team] <= q.nominal_gpus:
                return True  # its own quota: what it lent is reclaimable
            room = 0
            for (other, t), o in quota.items():
                if t == gpu_type and o.cohort == q.cohort and other != team:
                    unused = max(0, o.nominal_gpus - used[other])
                    room += unused if o.lending_limit is None else min(unused, o.lending_limit)
                    room -= max(0, used[other] - o.nominal_gpus)
            if q.borrowing_limit is not None:
                room = min(room, q.borrowing_limit)
            return max(0, used[team] - q.nominal_gpus) <= room

        for r in plan.reservations:
            team = specs[r.job_id].team
            for gpu_type in {self.by_name[p.node].gpu_type for p in r.placements}:
                q = quota.get((team, gpu_type))
                if q is None or q.cohort is None:
                    continue
                assert lent_enough(team, gpu_type, r.start_at, False) \
                    or not lent_enough(team, gpu_type, r.start_at, True), (
                        r.job_id, r.start_at, team, gpu_type)

    # ------------------------------------------------------------------ applying

    def apply(self, plan: Plan) -> None:
        for bind in plan.binds:
            spec = self.pending.pop(bind.job_id)
            self.running[bind.job_id] = RunningJob(spec, bind.placements, self.now,
                                                   borrowed=bind.borrowed, generation=1)
        for resize in plan.resizes:
            job = self.running[resize.job_id]
            self.running[resize.job_id] = dataclasses.replace(
                job, placements=resize.placements, generation=job.generation + 1)
        for p in plan.preemptions:
            job = self.running[p.job_id]
            self.running[p.job_id] = dataclasses.replace(job, terminating=True)
            self.requeue[p.job_id] = dataclasses.replace(
                job.spec, preemptions_in_window=job.spec.preemptions_in_window + 1)
        for k in plan.kills:
            job = self.running[k.job_id]
            self.running[k.job_id] = dataclasses.replace(job, terminating=True)

    @invariant()
    def running_jobs_never_share_a_gpu(self) -> None:
        seen: set[tuple[str, int]] = set()
        for job in getattr(self, "running", {}).values():
            mine = gpus_of(job.placements)
            assert not seen & mine
            seen |= mine


FleetMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_fleet_invariants_hold_over_random_cycles = FleetMachine.TestCase
