"""Operator actions on nodes: cordon, drain, uncordon.

- cordon: the node takes no new work; what runs there keeps running.
- drain: the node takes no new work and its running jobs are left to finish (the control loop
  turns a drained node with nothing left on it into a cordoned one).
- uncordon: a cordoned or draining node takes work again.

Health states (suspect, down, quarantined) belong to the control loop, which sets them from
heartbeats and leases; an operator cannot wish a down node back to ready. Each action is a
compare-and-set on the node's state, so an operator's click and the control loop's verdict
can't overwrite each other: if the state moved between read and write, the action is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from controlplane.choices import EventKind, NodeState
from controlplane.models import AllocationGpu, Node
from controlplane.services.transitions import record_event


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
    return (f"{beyond} GPU(s) with index ≥ {gpu_count} are held by live allocations; "
            "drain the node before shrinking its inventory")


class NodeActionRefused(Exception):
    """The node's current state does not allow the action; the message says why and what to do."""


@dataclass(frozen=True)
class _Action:
    verb: str
    target: NodeState
    allowed_from: tuple[NodeState, ...]
    reason: str


CORDON = _Action("cordon", NodeState.CORDONED, (NodeState.READY, NodeState.SUSPECT, NodeState.DRAINING), "Cordoned")
DRAIN = _Action("drain", NodeState.DRAINING, (NodeState.READY, NodeState.SUSPECT, NodeState.CORDONED), "Draining")
UNCORDON = _Action("uncordon", NodeState.READY, (NodeState.CORDONED, NodeState.DRAINING), "Uncordoned")


def _apply(node: Node, action: _Action, user: AbstractBaseUser) -> Node:
    """Move `node` to the action's state, or leave it where it already is.

    Returns the node as stored afterwards. Raises NodeActionRefused when the current state does
    not allow it (a down node cannot be uncordoned; its agent must come back)."""
    with transaction.atomic():
        current = Node.objects.select_for_update(no_key=True).get(pk=node.pk)
        if current.state == action.target:
            return current  # already there: nothing changed, nothing to record
        if current.state not in action.allowed_from:
            raise NodeActionRefused(
                f"node {current.name} is {current.state}; it can be {action.verb}ed only from "
                + " or ".join(str(s) for s in action.allowed_from)
                + (". It returns to ready by itself when its agent re-registers" if action is UNCORDON else "")
            )
        before = current.state
        # Row lock held: the control loop's health update waits for us, then sees our state.
        Node.objects.filter(pk=current.pk, state=before).update(state=action.target)
        current.state = action.target
        record_event(
            EventKind.NODE_STATE, f"user:{user.get_username()}", node=current, reason=action.reason,
            message=f"{current.name}: {before} → {action.target} ({action.verb} by {user.get_username()})",
            data={"from": str(before), "to": str(action.target), "action": action.verb},
        )
    return current


def cordon(node: Node, user: AbstractBaseUser) -> Node:
    return _apply(node, CORDON, user)


def drain(node: Node, user: AbstractBaseUser) -> Node:
    return _apply(node, DRAIN, user)


def uncordon(node: Node, user: AbstractBaseUser) -> Node:
    return _apply(node, UNCORDON, user)
