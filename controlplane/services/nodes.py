"""Operator actions on nodes: cordon, drain, uncordon.

- cordon: the node takes no new work; what runs there keeps running.
- drain: the node takes no new work and its running jobs are left to finish (the control loop
  turns a drained node with nothing left on it into a cordoned one).
- uncordon: a cordoned or draining node takes work again.

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

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Sum

from controlplane.choices import EventKind, NodeState
from controlplane.models import AllocationGpu, GpuType, Node
from controlplane.services.transitions import record_event

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


def gpu_count_refusal(node: Node, gpu_count: int) -> str | None:
    """Why `node` may not have `gpu_count` GPUs now, or None: live allocations hold GPUs whose
    index would be beyond it (the engine refuses such a fleet, so every cycle would fail). The
    API and the admin UI ask this before shrinking a node; an agent's re-registration makes
    the same check (services/agent_protocol.py)."""
    if node.pk is None:
        return None
    beyond = AllocationGpu.objects.filter(node_id=node.pk, live=True, gpu_index__gte=gpu_count).count()
    if not beyond:
        return None
    return (f"{beyond} GPU(s) with index ≥ {gpu_count} are held by live allocations: "
            f"{_holders(node.pk, True, gpu_index__gte=gpu_count)}; "
            + _DRAIN_FIRST.format(pk=node.pk, what="its GPU count"))


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
        return None
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


def _apply(node: Node, action: _Action, user: AbstractBaseUser) -> Node:
    """Move `node` to the action's state, or leave it where it already is.

    Returns the node as stored afterwards. Raises NodeActionRefused when the current state does
    not allow it (a suspect node cannot be uncordoned: it was never cordoned)."""
    with transaction.atomic():
        current = Node.objects.select_for_update(no_key=True).get(pk=node.pk)
        if current.state in _AWAY:
            return _while_away(current, action, user)
        if current.state == action.target:
            return current  # already there: nothing changed, nothing to record
        if current.state not in action.allowed_from:
            raise NodeActionRefused(
                f"node {current.name} is {current.state}; it can be {action.verb}ed only from "
                + " or ".join(str(s) for s in (*action.allowed_from, *_AWAY))
            )
        before = current.state
        # Row lock held: the control loop's health update waits for us, then sees our state.
        Node.objects.filter(pk=current.pk).update(state=action.target, unschedulable=action.unschedulable)
        current.state, current.unschedulable = action.target, action.unschedulable
        record_event(
            EventKind.NODE_STATE, f"user:{user.get_username()}", node=current, reason=action.reason,
            message=f"{current.name}: {before} → {action.target} ({action.verb} by {user.get_username()})",
            data={"from": str(before), "to": str(action.target), "action": action.verb,
                  "unschedulable": action.unschedulable},
        )
    return current


def _while_away(current: Node, action: _Action, user: AbstractBaseUser) -> Node:
    """A quarantined or down node keeps its state (the control loop's); the action decides
    how it comes back when its agent registers again: cordoned, or ready."""
    if current.unschedulable == action.unschedulable:
        return current  # the wish is already recorded
    Node.objects.filter(pk=current.pk).update(unschedulable=action.unschedulable)
    current.unschedulable = action.unschedulable
    comes_back = NodeState.CORDONED if action.unschedulable else NodeState.READY
    record_event(
        EventKind.NODE_STATE, f"user:{user.get_username()}", node=current, reason=action.reason,
        message=f"{current.name}: {action.verb}ed by {user.get_username()} while {current.state}; it returns "
        f"{comes_back} when its agent registers again",
        data={"from": str(current.state), "to": str(current.state), "action": action.verb,
              "unschedulable": action.unschedulable, "returns": str(comes_back)},
    )
    return current


def cordon(node: Node, user: AbstractBaseUser) -> Node:
    return _apply(node, CORDON, user)


def drain(node: Node, user: AbstractBaseUser) -> Node:
    return _apply(node, DRAIN, user)


def uncordon(node: Node, user: AbstractBaseUser) -> Node:
    return _apply(node, UNCORDON, user)
