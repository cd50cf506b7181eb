"""Operator actions on nodes: cordon, drain, uncordon, retire, return to service.

- cordon: the node takes no new work; what runs there keeps running.
- drain: the node takes no new work and its running jobs are left to finish (the control loop
  turns a drained node with nothing left on it into a cordoned one).
- uncordon: a cordoned or draining node takes work again.
- retire: the node leaves the fleet for good (state ``retired``, ``retired_at``): no agent, no
  work, no capacity, no idle cost from then on; refused while jobs hold its GPUs (drain it
  first). It is kept, not deleted: its history, allocations and usage name it.
- return to service: a retired node comes back as ``down`` until its agent registers again.

Health states (suspect, down, quarantined) belong to the control loop, which sets them from
heartbeats and leases; an operator cannot wish a down node back to ready. The operator's wish
is kept apart from health, in ``Node.unschedulable`` (Kubernetes' name for a cordon): cordon
and drain set it, uncordon clears it, and a node whose agent registers again comes back
cordoned while it is set. So a cordon outlives the node going down, and a node that is down
or quarantined can be cordoned (or uncordoned) for when it returns. Each action runs under
the node's row lock, so an operator's click and the control loop's verdict can't overwrite
each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Case, CharField, Count, OuterRef, Subquery, Sum, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from controlplane.choices import LIVE_ALLOCATION_STATES, AllocationState, EventKind, NodeState
from controlplane.models import AllocationGpu, GpuType, Node
from controlplane.services.transitions import record_event
from scheduler_core.sentences import counted

_DRAIN_FIRST = ("drain it first (POST nodes/{pk}/drain/, or the Drain action of the admin's node list): it takes "
                "no new work, and once its jobs have finished it is cordoned and {what} may change; then uncordon it")


def _holders(node_pk: int, indices: bool, **gpus: object) -> str:
    """The jobs whose live allocations hold the node's GPUs (those matching ``gpus``), in words:
    "job 12 a100-train (8 GPUs)", or with ``indices`` "job 12 a100-train (GPUs 6, 7)"; the first
    five jobs, then how many more."""
    held: dict[tuple[int, str], list[int]] = {}
    for job_id, name, index in (
        AllocationGpu.objects.filter(node_id=node_pk, live=True, **gpus)
        .order_by("allocation__job_id", "gpu_index")
        .values_list("allocation__job_id", "allocation__job__name", "gpu_index")
    ):
        held.setdefault((job_id, name), []).append(index)
    said = [f"job {job_id} {name} (" + (f"GPU{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))}" if indices
                                        else f"{len(ix)} GPU{'s' if len(ix) > 1 else ''}") + ")"
            for (job_id, name), ix in list(held.items())[:5]]
    more = len(held) - len(said)
    return ", ".join(said) + (f" and {more} more job{'s' if more > 1 else ''}" if more else "")


def lock_before_inventory_change() -> None:
    """Inside the transaction of a change of a node's inventory (GPU type and count, CPUs,
    memory: the API's PATCH, the admin's node page), before the node's row is locked: the
    scheduler lease row, as a cordon takes it (lock order lease → node). A cycle's commit binding
    onto the node meanwhile is then done before the change judges the node's live allocations
    (`gpu_count_refusal` and the others see its bind), or waits for the change and finds the node
    as changed (transitions.bind_jobs leaves the bind out). Until 5 Dec neither waited for the
    other, and a job was bound onto GPUs 4-7 of a node just shrunk to 4."""
    from controlplane.services.reconcile import lock_scheduler_lease

    lock_scheduler_lease()


def gpu_count_refusal(node: Node, gpu_count: int) -> str | None:
    """Why `node` may not have `gpu_count` GPUs now, or None: live allocations hold GPUs whose
    index would be beyond it (the engine refuses such a fleet, so every cycle would fail), or
    it is more than the node's agent declared at its last registration. The API and the admin
    UI ask this before changing a node's count; an agent's re-registration makes the first
    check (services/agent_protocol.py)."""
    if node.pk is None:
        return None
    _, count, at = _declared(node)
    if count is not None and at is not None and gpu_count > max(count, node.gpu_count):
        return (f"{node.name}'s agent declared {count} GPUs when it registered ({at:%Y-%m-%d %H:%M} UTC): with "
                f"{gpu_count} the scheduler would bind jobs to GPUs {count}–{gpu_count - 1}, which the node does "
                "not have. An agent declares its node's GPUs at each registration: after adding GPUs, restart "
                "its agent (qm-agent), whose registration takes the new count. Fewer is yours to choose (a GPU "
                "out of service)")
    beyond = AllocationGpu.objects.filter(node_id=node.pk, live=True, gpu_index__gte=gpu_count).count()
    if not beyond:
        return None
    return (f"{beyond} GPU(s) with index ≥ {gpu_count} are held by live allocations: "
            f"{_holders(node.pk, True, gpu_index__gte=gpu_count)}; "
            + _DRAIN_FIRST.format(pk=node.pk, what="its GPU count"))


def _declared(node: Node) -> tuple[str, int | None, datetime | None]:
    """What `node`'s agent declared at its last registration, as stored on the node (read from
    the database: the form's instance may hold the edit): its GPUs' type ("" for none on
    record), how many, and when (None when no agent has registered it: a node an admin
    described ahead of its agent takes any count and type). Until 7 Dec it was read from the
    registration's event, which kept the type only since 6 Dec."""
    row = Node.objects.filter(pk=node.pk).values_list("agent_gpu_type", "agent_gpu_count", "agent_registered_at").first()
    return row if row is not None else ("", None, None)


_HOST_PER_GPU = {"cpus": ("allocation__job__cpus_per_gpu", "CPUs"),
                 "memory_gb": ("allocation__job__memory_gb_per_gpu", "GB of memory")}


def host_refusal(node: Node, field: str, value: int) -> str | None:
    """Why `node` may not have `value` CPUs (``field`` "cpus") or GB of memory ("memory_gb")
    now, or None: its running jobs hold more than that on it (each job asks its per-GPU CPUs
    and memory beside every GPU it holds). Below it the engine's free counts go negative and
    the node reads as fuller than full. The API and the admin UI ask this before changing them."""
    if node.pk is None:
        return None
    column, unit = _HOST_PER_GPU[field]
    held = AllocationGpu.objects.filter(node_id=node.pk, live=True).aggregate(n=Sum(column))["n"] or 0
    if value >= held:
        return None
    return (f"its running jobs hold {held} {unit} on it ({_holders(node.pk, False)}): it cannot have {value}; "
            + _DRAIN_FIRST.format(pk=node.pk, what=f"its {unit.split(' of ')[-1]}"))


def gpu_type_refusal(node: Node, gpu_type: GpuType) -> str | None:
    """Why `node`'s GPUs may not become `gpu_type` now, or None: live allocations hold some of
    them. The jobs holding them asked for the stored type, and their GPUs count against that
    type's quota and are priced as it (by the node's type, read live): a change under them
    would move them to another quota and price while they run. The API and the admin UI ask
    this before changing a node's type."""
    if node.pk is None:
        return None
    stored = Node.objects.filter(pk=node.pk).values_list("gpu_type_id", "gpu_type__name").first()
    if stored is None or stored[0] == gpu_type.pk:
        return None
    held = AllocationGpu.objects.filter(node_id=node.pk, live=True).count()
    if not held:
        # Free, it may change, unless its agent named its GPUs another type: jobs asking for
        # this one would be bound to them, and its next registration undoes the edit (until
        # 6 Dec taken; a node with no type on record, migration 0045, is free until its agent
        # registers naming one).
        declared, _, at = _declared(node)
        if not declared or at is None or declared == gpu_type.name:
            return None
        return (f"{node.name}'s agent declared its GPUs {declared} when it registered ({at:%Y-%m-%d %H:%M} "
                f"UTC): jobs asking for {gpu_type.name} would be bound to them, and its next registration sets "
                f"{declared} again. If they are {gpu_type.name}, start its agent with --gpu-type {gpu_type.name}: "
                "its registration takes the type it names")
    return (f"{held} of its GPUs are held as {stored[1]} by {_holders(node.pk, False)}: its GPU type cannot "
            f"become {gpu_type.name} under them (their quota, price and placement are {stored[1]}'s); "
            + _DRAIN_FIRST.format(pk=node.pk, what="its GPU type"))


class NodeActionRefused(Exception):
    """The node's current state does not allow the action; the message says why and what to do."""


@dataclass(frozen=True)
class _Action:
    verb: str
    target: NodeState
    allowed_from: tuple[NodeState, ...]
    reason: str
    unschedulable: bool


CORDON = _Action("cordon", NodeState.CORDONED, (NodeState.READY, NodeState.SUSPECT, NodeState.DRAINING), "Cordoned", True)
DRAIN = _Action("drain", NodeState.DRAINING, (NodeState.READY, NodeState.SUSPECT, NodeState.CORDONED), "Draining", True)
UNCORDON = _Action("uncordon", NodeState.READY, (NodeState.CORDONED, NodeState.DRAINING), "Uncordoned", False)

# States the control loop owns while the node is away; an action there only records the wish.
_AWAY = (NodeState.QUARANTINED, NodeState.DOWN)


def _apply(node: Node, action: _Action, user: AbstractBaseUser, reason: str = "") -> tuple[Node, list[JobOnNode]]:
    """Move `node` to the action's state, or leave it where it already is.

    Returns the node as stored afterwards, and for a cordon or a drain the jobs on it, read
    once under the node's row lock (`jobs_on`): its event names them and `act` answers with
    them. Raises NodeActionRefused when the current state does not allow it (a suspect node
    cannot be uncordoned: it was never cordoned).

    The scheduler lease row is locked first (lock order lease → node, as `retire`, reconcile
    and the cycle's commit): a cycle committing a bind onto this node either commits before us
    (its job is among the jobs read here, and named) or after us (its bind sees the node is no
    longer ready and is dropped). Before, a bind that had read the node ready committed after a
    cordon: the job started on a node the operator had just been told took no new work, and the
    cordon said nothing ran there."""
    from controlplane.services.reconcile import lock_scheduler_lease

    with transaction.atomic():
        lock_scheduler_lease()
        current = Node.objects.select_for_update(no_key=True).get(pk=node.pk)
        if current.state == NodeState.RETIRED:
            raise NodeActionRefused(
                f"node {current.name} is retired (since {_when(current.retired_at)}); it cannot be {action.verb}ed: "
                f"return it to service first (POST nodes/{current.pk}/return/, `qm nodes return {current.name}`)")
        if current.state in _AWAY or (current.state == NodeState.SUSPECT and current.unschedulable):
            # A silent node the operator had cordoned or drained (reconcile made it suspect):
            # as while it is away, the action only changes how it comes back.
            return _while_away(current, action, user, reason), _jobs_if(action, current)
        if current.state == action.target:
            if reason:  # already there: only its reason changes (Slurm's `scontrol update … reason=`)
                record_event(
                    EventKind.NODE_STATE, f"user:{user.get_username()}", node=current, reason=action.reason,
                    message=f"{current.name}: {current.state} already; reason given by {user.get_username()}: {reason}",
                    data={"from": str(current.state), "to": str(current.state), "action": action.verb,
                          "unschedulable": action.unschedulable, "reason": reason})
            return current, _jobs_if(action, current)  # already there: nothing else changes
        if current.state not in action.allowed_from:
            raise NodeActionRefused(
                f"node {current.name} is {current.state}; it can be {action.verb}ed only from "
                + " or ".join(str(s) for s in (*action.allowed_from, *_AWAY))
            )
        before = current.state
        # Row lock held: the control loop's health update waits for us, then sees our state.
        Node.objects.filter(pk=current.pk).update(state=action.target, unschedulable=action.unschedulable)
        current.state, current.unschedulable = action.target, action.unschedulable
        data = {"from": str(before), "to": str(action.target), "action": action.verb,
                "unschedulable": action.unschedulable}
        if reason:
            data["reason"] = reason
        left = _jobs_if(action, current)
        if left:
            data["running_jobs"] = [j.job_id for j in left]
        record_event(
            EventKind.NODE_STATE, f"user:{user.get_username()}", node=current, reason=action.reason,
            message=f"{current.name}: {before} → {action.target} ({action.verb} by {user.get_username()}"
            + (f": {reason})" if reason else ")")
            + (f"; {_left_said(action, left, timezone.now())}" if left else ""),
            data=data,
        )
    return current, left


def _jobs_if(action: _Action, node: Node) -> list[JobOnNode]:
    """The jobs on the node, for an action that takes it out of service (none read otherwise)."""
    return jobs_on(node.pk) if action.unschedulable else []


def _while_away(current: Node, action: _Action, user: AbstractBaseUser, reason: str = "") -> Node:
    """A quarantined, down or (cordoned, then) suspect node keeps its state (the control
    loop's); the action decides how it comes back when its agent is heard again: cordoned, or
    ready."""
    if current.unschedulable == action.unschedulable:
        return current  # the wish is already recorded
    Node.objects.filter(pk=current.pk).update(unschedulable=action.unschedulable)
    current.unschedulable = action.unschedulable
    comes_back = NodeState.CORDONED if action.unschedulable else NodeState.READY
    record_event(
        EventKind.NODE_STATE, f"user:{user.get_username()}", node=current, reason=action.reason,
        message=f"{current.name}: {action.verb}ed by {user.get_username()}" + (f" ({reason})" if reason else "")
        + f" while {current.state}; it returns "
        f"{comes_back} when its agent " + ("heartbeats again" if current.state == NodeState.SUSPECT
                                           else "registers again"),
        data={"from": str(current.state), "to": str(current.state), "action": action.verb,
              "unschedulable": action.unschedulable, "returns": str(comes_back),
              **({"reason": reason} if reason else {})},
    )
    return current


@dataclass(frozen=True)
class JobOnNode:
    """A job holding GPUs on a node through a live allocation, as an operator's action reports it."""

    job_id: int
    name: str
    team: str
    gpus_here: int
    other_nodes: tuple[str, ...]
    stopping: bool
    holds_until: datetime  # by its runtime limit, or its stop deadline when told to stop

    def said(self, now: datetime) -> str:
        where = f"{self.gpus_here} GPU{'s' if self.gpus_here > 1 else ''} here"
        if self.other_nodes:
            where += ", also on " + ", ".join(self.other_nodes[:3]) + (
                f" and {len(self.other_nodes) - 3} more nodes" if len(self.other_nodes) > 3 else "")
        until = (f"stopping, by {_clock(self.holds_until, now)}" if self.stopping
                 else f"its runtime limit ends {_clock(self.holds_until, now)}")
        return f"job {self.job_id} {self.name} ({where}; {until})"


def _clock(at: datetime, now: datetime) -> str:
    """06:28 UTC today, else 2026-12-03 06:28 UTC."""
    at = at.astimezone(UTC)
    return f"{at:%H:%M} UTC" if at.date() == now.astimezone(UTC).date() else _when(at)


def jobs_on(node_pk: int) -> list[JobOnNode]:
    """The jobs holding GPUs on the node now (live allocations), those that hold them longest
    last: each with its GPUs there, the other nodes of its gang, and until when it holds them by
    its runtime limit (a job told to stop: by its stop deadline). Two queries."""
    rows = list(
        AllocationGpu.objects.filter(node_id=node_pk, live=True, allocation__state__in=LIVE_ALLOCATION_STATES)
        .values_list("allocation_id", "allocation__job_id", "allocation__job__name", "allocation__job__team__name",
                     "allocation__job__runtime_limit_s", "allocation__state", "allocation__release_deadline")
        .annotate(started=Coalesce("allocation__started_at", "allocation__created_at"), gpus=Count("id"))
        .order_by("allocation_id"))
    if not rows:
        return []
    elsewhere: dict[int, set[str]] = {}
    for allocation_id, name in (
        AllocationGpu.objects.filter(allocation_id__in=[r[0] for r in rows], live=True)
        .exclude(node_id=node_pk).values_list("allocation_id", "node__name").distinct()
    ):
        elsewhere.setdefault(allocation_id, set()).add(name)
    jobs: list[JobOnNode] = []
    for allocation_id, job_id, name, team, limit, state, deadline, started, gpus in rows:
        stopping = state == AllocationState.RELEASING and deadline is not None
        until = started + timedelta(seconds=limit)
        if stopping:
            until = min(until, deadline)
        jobs.append(JobOnNode(job_id, name, team, gpus, tuple(sorted(elsewhere.get(allocation_id, ()))),
                              stopping, until))
    return sorted(jobs, key=lambda j: (j.holds_until, j.job_id))


def _jobs_said(jobs: list[JobOnNode], now: datetime, most: int = 5) -> str:
    said = [j.said(now) for j in jobs[:most]]
    more = len(jobs) - len(said)
    return ", ".join(said) + (f" and {counted(more, 'more job')}" if more else "")


def _left_said(action: _Action, jobs: list[JobOnNode], now: datetime) -> str:
    """What a cordon or drain leaves running on the node, in words."""
    if not jobs:
        return "nothing runs there"
    last = max(j.holds_until for j in jobs)
    if action is DRAIN:
        return (f"{counted(len(jobs), 'job')} run{'s' if len(jobs) == 1 else ''} there until "
                f"{'it ends' if len(jobs) == 1 else 'they end'} (by {_clock(last, now)} at the latest, by "
                f"{'its runtime limit' if len(jobs) == 1 else 'their runtime limits'}): {_jobs_said(jobs, now)}")
    return (f"{counted(len(jobs), 'job')} keep{'s' if len(jobs) == 1 else ''} running there: "
            f"{_jobs_said(jobs, now)}")


@dataclass(frozen=True)
class NodeActionOutcome:
    """What an operator's action on a node did, for the API, the pages, the admin and `qm`."""

    node: Node
    changed: bool
    detail: str
    running_jobs: list[JobOnNode]


def act(verb: str, node: Node, user: AbstractBaseUser, *, reason: str = "",
        now: datetime | None = None) -> NodeActionOutcome:
    """Run the action `verb` (cordon, drain, uncordon, retire, return) on `node` and say what it
    did: the state it moved from and to (or that nothing changed), and for a cordon or a drain
    the jobs it leaves running there and until when they may hold the node by their runtime
    limits (a drained node is cordoned once they have ended). Raises NodeActionRefused as the
    action does."""
    before_state, before_wish = node.state, node.unschedulable
    fresh = Node.objects.filter(pk=node.pk).values_list("state", "unschedulable").first()
    if fresh is not None:
        before_state, before_wish = fresh
    if reason and verb not in TAKES_REASON:
        raise ValueError(f"{verb} takes no reason")
    jobs: list[JobOnNode] = []
    if verb in TAKES_REASON:  # the jobs on the node read once, for its event and this answer
        after, jobs = _apply(node, CORDON if verb == "cordon" else DRAIN, user, reason)
    else:
        after = _VERBS[verb](node, user)
    now = now or timezone.now()
    changed = (after.state, after.unschedulable) != (before_state, before_wish)
    name = after.name
    if verb in ("retire", "return"):
        if not changed:
            detail = f"{name} is {after.state} already: nothing changed"
        elif verb == "retire":
            detail = (f"{name}: {before_state} → retired; its {after.gpu_count} GPUs leave the fleet's capacity and "
                      f"idle cost, and its agent is refused until an admin returns it to service "
                      f"(`qm nodes return {name}`)")
        else:
            detail = (f"{name}: retired → down, back in the fleet's capacity; it stays down until its agent "
                      "registers, then comes back " + ("cordoned (uncordon it to take work)" if after.unschedulable
                                                      else "ready"))
        return NodeActionOutcome(after, changed, detail + ".", [])
    action = {"cordon": CORDON, "drain": DRAIN, "uncordon": UNCORDON}[verb]
    away = after.state in _AWAY or (after.state == NodeState.SUSPECT and after.unschedulable)
    if away:
        comes_back = NodeState.CORDONED if after.unschedulable else NodeState.READY
        when_back = "its heartbeats resume" if after.state == NodeState.SUSPECT else "its agent registers again"
        detail = (f"{name} is {after.state}" + (f"; {verb} recorded" if changed else ", nothing changed")
                  + f": it returns {comes_back} when {when_back}")
    elif not changed:
        detail = f"{name} is {after.state} already: " + (f"its reason is now: {reason}" if reason else "nothing changed")
    else:
        detail = f"{name}: {before_state} → {after.state}" + (f" ({reason})" if reason else "") + ": " + (
            "it takes work again" if verb == "uncordon" else "no new work goes there")
    if action.unschedulable and not (away and not jobs):
        detail += f"; {_left_said(action, jobs, now)}"
        if action is DRAIN and after.state == NodeState.DRAINING:
            detail += ("; it becomes cordoned once the last has ended" if jobs
                       else ", so it becomes cordoned at the next reconcile pass")
    return NodeActionOutcome(after, changed, detail + ".", jobs)


def cordon(node: Node, user: AbstractBaseUser, reason: str = "") -> Node:
    """`reason`: why, in the operator's words (Slurm's `Reason=`), kept in the node.state event
    and read back as the node's `cordon_reason` while it stays out of service."""
    return _apply(node, CORDON, user, reason)[0]


def drain(node: Node, user: AbstractBaseUser, reason: str = "") -> Node:
    return _apply(node, DRAIN, user, reason)[0]


#: The actions that take a reason (they take a node out of service).
TAKES_REASON = ("cordon", "drain")


def cordon_reason() -> Any:
    """An expression for a node queryset's annotate(): why an operator took the node out of
    service (the `reason` of its latest cordon or drain event; "" when none was given), or None
    while it takes work. Read by the API's node list and `qm nodes` (as `sinfo -R` lists reasons)."""
    from controlplane.models import Event

    latest = (Event.objects.filter(node=OuterRef("pk"), kind=EventKind.NODE_STATE,
                                   data__action__in=["cordon", "drain"])
              .order_by("-id").annotate(said=KT("data__reason")).values("said")[:1])
    return Case(When(unschedulable=True, then=Coalesce(Subquery(latest), Value(""))), default=None,
                output_field=CharField(null=True))


def uncordon(node: Node, user: AbstractBaseUser) -> Node:
    return _apply(node, UNCORDON, user)[0]


# ---------------------------------------------------------------------------- retirement

RETIRED_REASON = "Retired"
RETURNED_REASON = "ReturnedToService"


def _when(at: datetime | None) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if at is not None else "an unknown time"


def retired_retry_after_s(node: Node, now: datetime | None = None) -> int:
    """How long the agent of retired `node` is told to wait before it asks again (seconds): as
    long as the node has been retired, within QM_RETIRED_RETRY_AFTER_MIN_S..MAX_S (1 to 15 min by
    default). An agent retired a minute ago asks again within a minute or two (an admin who
    returns it at once gets it back soon), one retired for good asks every MAX_S; returned to
    service, it is back within that."""
    low = float(settings.QM["RETIRED_RETRY_AFTER_MIN_S"])
    high = max(low, float(settings.QM["RETIRED_RETRY_AFTER_MAX_S"]))
    if node.retired_at is None:
        return int(high)
    retired_for = ((now or timezone.now()) - node.retired_at).total_seconds()
    return int(min(high, max(low, retired_for)))


def retired_refusal(node: Node) -> str:
    """What an agent of a retired node is told (services/agent_protocol.py answers it as a 409)."""
    return (f"node {node.name} is retired since {_when(node.retired_at)}; an admin returns it to service first "
            f"(POST nodes/{node.pk}/return/, `qm nodes return {node.name}`, or the admin's node list), then its "
            "agent registers again")


def retire_refusal(node: Node) -> str | None:
    """Why `node` may not be retired now, or None: jobs hold its GPUs through live allocations
    (a retired node runs nothing and its agent is shut out, so their work would be lost)."""
    held = (AllocationGpu.objects.filter(node_id=node.pk, live=True)
            .aggregate(jobs=Count("allocation__job_id", distinct=True), gpus=Count("id")))
    if not held["jobs"]:
        return None
    jobs = held["jobs"]
    return (f"node {node.name} still runs {jobs} job{'s' if jobs > 1 else ''} on {held['gpus']} of its "
            f"{node.gpu_count} GPUs ({_holders(node.pk, False)}); drain it first (`qm nodes drain {node.name}`, "
            f"POST nodes/{node.pk}/drain/, or the Drain action of the admin's node list): it takes no new work, and "
            "once its jobs have finished it is cordoned; then retire it")


def deletion_refusal(node: Node, now: datetime | None = None) -> str | None:
    """Why `node` may not be deleted though nothing in its history keeps it, or None: its agent
    holds a live lease. Deleted, the node's token is gone, so the agent would be refused as
    unknown and ask to register again every few seconds, logging each refusal, until someone
    stopped it; retiring keeps it out with a wait it is told, and keeps the node's name."""
    lease = node.agent_lease_expires_at
    if lease is None or lease <= (now or timezone.now()):
        return None
    return (f"Node {node.name}'s agent is live (its lease runs to {_when(lease)}, last heartbeat "
            f"{_when(node.last_heartbeat_at)}): deleted, the node's token would go and its agent would be refused "
            "and try to register again every few seconds. Stop its agent first and delete the node once the lease "
            f"has lapsed, or retire it instead (POST nodes/{node.pk}/retire/, `qm nodes retire {node.name}`), which "
            "tells its agent to stay away")


def retire(node: Node, user: AbstractBaseUser, *, now: datetime | None = None) -> Node:
    """Take `node` out of the fleet for good: state retired, ``retired_at`` now, unschedulable,
    its agent's lease and token cleared (the agent is refused from then on, 409). The scheduler
    never sees it again, and the fleet's capacity and idle cost leave it out from ``retired_at``
    on (services/accounting.py). Refused (NodeActionRefused) while jobs hold its GPUs. A node
    already retired stays as it is (nothing recorded).

    The scheduler lease row is locked first (lock order lease → node, as reconcile and the
    cycle's commit): a cycle committing a bind onto this node either commits before us (and we
    see its allocation and refuse) or after us (and its bind sees the node is no longer ready)."""
    from controlplane.services.reconcile import lock_scheduler_lease

    actor = user.get_username()
    with transaction.atomic():
        lock_scheduler_lease()
        current = Node.objects.select_for_update(no_key=True).get(pk=node.pk)
        if current.state == NodeState.RETIRED:
            return current
        refusal = retire_refusal(current)
        if refusal:
            raise NodeActionRefused(refusal)
        at = now or timezone.now()
        before = current.state
        Node.objects.filter(pk=current.pk).update(
            state=NodeState.RETIRED, retired_at=at, unschedulable=True, agent_lease_expires_at=None,
            agent_token_hash="")
        current.state, current.retired_at, current.unschedulable = NodeState.RETIRED, at, True
        current.agent_lease_expires_at, current.agent_token_hash = None, ""
        record_event(
            EventKind.NODE_STATE, f"user:{actor}", node=current, reason=RETIRED_REASON, at=at,
            message=f"{current.name}: {before} → retired by {actor}; its {current.gpu_count} "
            f"{current.gpu_type.name} GPUs leave the fleet's capacity and idle cost, and its agent is refused until "
            "an admin returns it to service",
            data={"from": str(before), "to": NodeState.RETIRED.value, "action": "retire", "unschedulable": True,
                  "gpus": current.gpu_count, "retired_at": at.isoformat(), "node_id": current.pk},
        )
    return current


def return_to_service(node: Node, user: AbstractBaseUser, *, now: datetime | None = None) -> Node:
    """Bring a retired node back: state down (its agent has no token: it registers again with
    the bootstrap secret, and the node then comes back cordoned, as an operator's cordon
    outlives a node going away; uncordon it to take work), ``retired_at`` cleared. Its GPUs
    count in the fleet's capacity again from now. Refused (NodeActionRefused) for a node that
    is not retired."""
    actor = user.get_username()
    with transaction.atomic():
        current = Node.objects.select_for_update(no_key=True).get(pk=node.pk)
        if current.state != NodeState.RETIRED:
            raise NodeActionRefused(
                f"node {current.name} is {current.state}, not retired: only a retired node can be returned to service")
        at = now or timezone.now()
        since = current.retired_at
        Node.objects.filter(pk=current.pk).update(state=NodeState.DOWN, retired_at=None)
        current.state, current.retired_at = NodeState.DOWN, None
        record_event(
            EventKind.NODE_STATE, f"user:{actor}", node=current, reason=RETURNED_REASON, at=at,
            message=f"{current.name}: retired → down, returned to service by {actor} (retired since {_when(since)}); "
            f"its {current.gpu_count} GPUs count in the fleet again; it stays down until its agent registers, and "
            + ("comes back cordoned (uncordon it to take work)" if current.unschedulable else "comes back ready"),
            data={"from": NodeState.RETIRED.value, "to": NodeState.DOWN.value, "action": "return",
                  "retired_at": since.isoformat() if since else None, "unschedulable": current.unschedulable,
                  "node_id": current.pk},
        )
    return current


_VERBS: dict[str, Callable[[Node, AbstractBaseUser], Node]] = {
    "cordon": cordon, "drain": drain, "uncordon": uncordon, "retire": retire, "return": return_to_service}
