"""Reconciliation of node health: heartbeats, leases, fencing, quarantine.

Steps of one pass (`reconcile_nodes`), each a compare-and-set that a concurrent pass, a
heartbeat or an operator's click cannot be overwritten by:
  1. suspect: a ready, cordoned or draining node silent for SUSPECT_AFTER_S is suspect: it
     gets no new work and its running work is left alone; a late heartbeat makes it ready
     again, or, when an operator had cordoned or drained it (``unschedulable``), cordoned or
     draining again (`state_after_suspect`). Before 30 Nov only a ready node went suspect: a
     silent cordoned or draining node showed as cordoned until its lease ran out;
  2. expire: a node whose agent lease ran out is quarantined and every live allocation on it is
     fenced (generation bumped, state fenced, job requeued whole with its lost work recorded).
     The node's GPUs are not used again until its agent registers clean; the agent itself
     stops its processes when it cannot renew its lease (controlplane/agent/node.py), and if
     it comes back without having done so, its first heartbeat is refused and told to stop;
  3. orphans: a live allocation bound onto a node that was quarantined or went down after the
     scheduler read its snapshot is fenced too (the scheduler's commit does not re-read node
     health, so this closes that window);
  4. drained: a draining node with nothing left on it becomes cordoned.

Fencing draws new generations from the scheduler lease row, so the passes lock that row first
(lock order: lease → node → allocation → job → GPUs, the same as the cycle's commit). Whoever
runs reconcile need not lead: every write only moves allocations towards fenced, which can
never give a GPU two owners.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane import triggers
from controlplane.choices import LIVE_ALLOCATION_STATES, AllocationState, EventKind, NodeState
from controlplane.models import Allocation, AllocationGpu, Event, Node, SchedulerLease
from controlplane.services import maintenance, transitions
from controlplane.services.agent_protocol import RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED
from controlplane.services.cycle import LEASE_NAME

log = structlog.get_logger(__name__)

FENCE_LEASE_EXPIRED = "NodeLeaseExpired"
FENCE_NODE_UNAVAILABLE = "NodeUnavailable"


@dataclass(frozen=True)
class ReconcileResult:
    suspect: int = 0
    quarantined: int = 0
    fenced: int = 0
    cordoned: int = 0

    @property
    def found_work(self) -> bool:
        return bool(self.suspect or self.quarantined or self.fenced or self.cordoned)


def actor() -> str:
    return f"reconciler@{socket.gethostname()}:{os.getpid()}"


def lock_scheduler_lease() -> SchedulerLease:
    """Inside a transaction: lock the scheduler lease row (created if missing)."""
    SchedulerLease.objects.get_or_create(name=LEASE_NAME)
    return SchedulerLease.objects.select_for_update().get(name=LEASE_NAME)


def reconcile_nodes(now: datetime | None = None) -> ReconcileResult:
    now = now or timezone.now()
    suspect = _mark_suspect(now)
    quarantined = fenced = 0
    expired = list(
        Node.objects.filter(agent_lease_expires_at__lt=now)
        .exclude(state__in=[NodeState.QUARANTINED, NodeState.DOWN, NodeState.RETIRED])
        .values_list("pk", flat=True)
    )
    for node_id in expired:
        q, f = expire_node(node_id, now=now)
        quarantined += q
        fenced += f
    orphaned = set(
        AllocationGpu.objects.filter(
            live=True,
            allocation__state__in=LIVE_ALLOCATION_STATES,
            node__state__in=[NodeState.QUARANTINED, NodeState.DOWN],
        ).values_list("node_id", flat=True)
    )
    for node_id in orphaned:
        _, f = expire_node(node_id, now=now)
        fenced += f
    cordoned = _cordon_drained(now)
    maintenance.record_boundaries(now)
    result = ReconcileResult(suspect=suspect, quarantined=quarantined, fenced=fenced, cordoned=cordoned)
    if result.found_work:
        log.info("nodes reconciled", suspect=suspect, quarantined=quarantined, fenced=fenced, cordoned=cordoned)
    return result


# The states a silent node leaves for suspect: in service, or kept out of it by an operator's
# cordon or drain (it then comes back as it was, see state_after_suspect).
_HEARD_STATES = (NodeState.READY, NodeState.CORDONED, NodeState.DRAINING)
MISSED_HEARTBEATS = "MissedHeartbeats"


def _mark_suspect(now: datetime) -> int:
    cutoff = now - timedelta(seconds=float(settings.QM["SUSPECT_AFTER_S"]))
    silent = Q(last_heartbeat_at__lt=cutoff) | Q(last_heartbeat_at__isnull=True)
    count = 0
    who = actor()
    for node in Node.objects.filter(silent, state__in=_HEARD_STATES).only(
            "pk", "name", "state", "unschedulable", "last_heartbeat_at"):
        with transaction.atomic():
            # The lease row first, as a cordon takes it: a cycle's commit binding onto the node
            # now is done before (its job is running work, left alone), or finds it suspect and
            # leaves the bind out. Until 5 Dec a bind that had read it ready committed after.
            lock_scheduler_lease()
            count += _mark_one_suspect(node, silent, now, who)
    return count


def _mark_one_suspect(node: Node, silent: Q, now: datetime, who: str) -> int:
    """1 if `node` (as read) became suspect now, with its event; 0 if it moved since."""
    # Compare-and-set: a heartbeat (or an operator's click) that landed since the read wins.
    if not Node.objects.filter(silent, pk=node.pk, state=node.state).update(state=NodeState.SUSPECT):
        return 0
    heard = (
        f"last heard {(now - node.last_heartbeat_at).total_seconds():.1f} s ago"
        if node.last_heartbeat_at else "its agent never registered"
    )
    returns = node.state if node.unschedulable and node.state != NodeState.READY else NodeState.READY
    transitions.record_event(
        EventKind.NODE_STATE, who, node=node, at=now, reason=MISSED_HEARTBEATS,
        message=f"{node.name}: {node.state} → suspect, {heard}; no new work goes there, running work is left "
        f"alone" + (f"; it returns {returns} when heartbeats resume" if returns != NodeState.READY else ""),
        data={"from": str(node.state), "to": NodeState.SUSPECT.value, "returns": str(returns),
              "unschedulable": node.unschedulable,
              "last_heartbeat_at": node.last_heartbeat_at.isoformat() if node.last_heartbeat_at else None},
    )
    return 1


def state_after_suspect(node: Node) -> NodeState:
    """Where a suspect node goes when its heartbeats resume: ready, unless an operator's cordon
    or drain is still wished (``unschedulable``): then draining if it was draining when it fell
    silent (its MissedHeartbeats event says), else cordoned."""
    if not node.unschedulable:
        return NodeState.READY
    was = (Event.objects.filter(node_id=node.pk, kind=EventKind.NODE_STATE, reason=MISSED_HEARTBEATS)
           .order_by("-created_at", "-id").values_list("data", flat=True).first() or {}).get("from")
    return NodeState.DRAINING if was == NodeState.DRAINING.value else NodeState.CORDONED


def expire_node(node_id: int, *, now: datetime) -> tuple[int, int]:
    """Quarantine a node whose lease ran out and fence every live allocation on it.

    Returns (1 if this call quarantined it else 0, allocations fenced). Idempotent: a node
    already quarantined or down only gets its remaining live allocations fenced."""
    quarantined = fenced = 0
    who = actor()
    with transaction.atomic():
        lease = lock_scheduler_lease()
        node = Node.objects.select_for_update(no_key=True).filter(pk=node_id).first()
        if node is None or node.state == NodeState.RETIRED:
            return 0, 0  # a retired node holds nothing, and its agent is refused
        lapsed = node.agent_lease_expires_at is None or node.agent_lease_expires_at < now
        before = node.state
        if node.state not in (NodeState.QUARANTINED, NodeState.DOWN):
            if not lapsed:
                return 0, 0  # a heartbeat renewed it after our read: not ours to fence
            Node.objects.filter(pk=node.pk).update(state=NodeState.QUARANTINED)
            quarantined = 1
            reason = FENCE_LEASE_EXPIRED
        else:
            reason = FENCE_LEASE_EXPIRED if node.state == NodeState.QUARANTINED else FENCE_NODE_UNAVAILABLE
        here = AllocationGpu.objects.filter(node=node, live=True).values("allocation_id")
        live = list(
            Allocation.objects.filter(pk__in=here, state__in=LIVE_ALLOCATION_STATES)
            .order_by("generation")
            .values_list("pk", "generation", "job_id")
        )
        # The other nodes each allocation holds (a gang's fence event names them all but can
        # carry no one node, so this node's own event says what was fenced off it).
        elsewhere: dict[int, set[str]] = {}
        for allocation_id, name in AllocationGpu.objects.filter(
            allocation_id__in=[pk for pk, _, _ in live], live=True
        ).exclude(node=node).values_list("allocation_id", "node__name"):
            elsewhere.setdefault(allocation_id, set()).add(name)
        done: list[dict[str, int]] = []
        words: list[str] = []
        for allocation_id, generation, job_id in live:
            if transitions.fence_allocation(allocation_id, lease=lease, at=now, actor=who, reason=reason):
                fenced += 1
                new = Allocation.objects.filter(pk=allocation_id).values_list("generation", flat=True).first()
                done.append({"job": job_id, "generation": generation, "new_generation": int(new or 0)})
                others = sorted(elsewhere.get(allocation_id, ()))
                words.append(f"job {job_id} (generation {generation} → {new}"
                             + (f", also on {', '.join(others)}" if others else "") + ")")
        if quarantined:
            # A gang fenced since this node was last heard from, through another of its nodes
            # (one agent simulating both, or a switch taking both down), was lost here too.
            mine = {pk for pk, _, _ in live}
            since = node.last_heartbeat_at or now
            for event in Event.objects.filter(
                kind=EventKind.ALLOCATION_FENCED, created_at__gte=since, created_at__lte=now, node__isnull=True,
                allocation__gpus__node=node,
            ).exclude(allocation_id__in=mine).distinct().values("job_id", "data"):
                data = event["data"] or {}
                others = sorted(set(data.get("nodes") or ()) - {node.name})
                done.append({"job": event["job_id"], "generation": int(data.get("old_generation") or 0),
                             "new_generation": int(data.get("new_generation") or 0)})
                words.append(f"job {event['job_id']} (generation {data.get('old_generation')} → "
                             f"{data.get('new_generation')}" + (f", also on {', '.join(others)}" if others else "") + ")")
            transitions.record_event(
                EventKind.NODE_STATE, who, node=node, at=now, reason="LeaseExpired",
                message=f"{node.name}: {before} → quarantined, its agent lease ran out at "
                f"{node.agent_lease_expires_at:%H:%M:%S}; its allocations are fenced and its GPUs stay unused until "
                "its agent registers again, clean; "
                + (f"fenced {', '.join(words[:20])}" + (f" and {len(words) - 20} more" if len(words) > 20 else "")
                   if words else "nothing ran on it"),
                data={"from": str(before), "to": NodeState.QUARANTINED.value,
                      "lease_expired_at": node.agent_lease_expires_at.isoformat() if node.agent_lease_expires_at else None,
                      "fenced": done},
            )
        if quarantined or fenced:
            transaction.on_commit(triggers.request_cycle)
    if quarantined or fenced:
        log.warning("node lease expired", node_id=node_id, quarantined=quarantined, fenced=fenced)
    return quarantined, fenced


#: How a job left a draining node, by its allocation's release reason (none: its processes exited).
_LEFT_WORDS = {
    "": "has finished",
    "Exited": "has finished",
    RELEASE_GANG_MEMBER_EXITED: "has finished",
    RELEASE_GANG_MEMBER_FAILED: "failed",
    transitions.RELEASE_PREEMPTED: "was preempted",
    transitions.RELEASE_CANCELLED: "was cancelled",
    transitions.RELEASE_RUNTIME_LIMIT: "reached its runtime limit",
    transitions.RELEASE_RESIZED: "was stopped to be resized",
    transitions.RELEASE_REQUEUED: "was requeued",
    transitions.RELEASE_REQUEUED_HELD: "was requeued, held",
}


def _last_job_since_drain(node: Node) -> str | None:
    """How the last job to leave ``node`` since it was last set draining left it, for its
    Drained event ("its last job was requeued (job 47 frag-3)"); None when nothing ran there
    (a node drained while idle). A job that was requeued, preempted or cancelled did not finish:
    until 4 Dec every case read "its last job has finished"."""
    drained_at = (Event.objects.filter(node=node, kind=EventKind.NODE_STATE, reason="Draining")
                  .order_by("-created_at").values_list("created_at", flat=True).first())
    released = Allocation.objects.filter(gpus__node=node, released_at__isnull=False)
    if drained_at is not None:
        released = released.filter(released_at__gte=drained_at)
    last = (released.order_by("-released_at", "-pk")
            .values_list("job_id", "job__name", "release_reason", "state").first())
    # A gang member whose processes are gone leaves the node before its allocation is settled
    # (the rest of the gang may still be stopping elsewhere): its MemberExited event says when.
    member = Event.objects.filter(node=node, kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited")
    if drained_at is not None:
        member = member.filter(created_at__gte=drained_at)
    gone = (member.order_by("-created_at", "-id")
            .values_list("created_at", "job_id", "job__name", "allocation__release_reason", "allocation__state")
            .first())
    if gone is not None and (last is None or not released.filter(released_at__gt=gone[0]).exists()):
        last = gone[1:]
    if last is None:
        return None
    job_id, name, reason, state = last
    words = ("was fenced off it and requeued" if state == AllocationState.FENCED
             else _LEFT_WORDS.get(reason or "", "has ended"))
    return f"its last job {words} (job {job_id} {name})"


def _cordon_drained(now: datetime) -> int:
    busy = AllocationGpu.objects.filter(live=True, allocation__state__in=LIVE_ALLOCATION_STATES).values("node_id")
    count = 0
    who = actor()
    # Only an operator's drain ends cordoned: a node draining because its agent shuts down
    # (unschedulable unset, agent_protocol._shutting_down) goes down with the goodbye.
    for node in Node.objects.filter(state=NodeState.DRAINING, unschedulable=True).exclude(pk__in=busy).only("pk", "name"):
        with transaction.atomic():
            if AllocationGpu.objects.filter(node=node, live=True).exists():
                continue
            if Node.objects.filter(pk=node.pk, state=NodeState.DRAINING).update(state=NodeState.CORDONED):
                count += 1
                transitions.record_event(
                    EventKind.NODE_STATE, who, node=node, at=now, reason="Drained",
                    message=f"{node.name}: draining → cordoned, "
                    + (_last_job_since_drain(node) or "nothing was running on it"),
                    data={"from": NodeState.DRAINING.value, "to": NodeState.CORDONED.value},
                )
    return count
