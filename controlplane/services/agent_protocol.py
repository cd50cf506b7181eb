"""The node-agent protocol: what register, heartbeat and report mean to the control plane.

An agent speaks for exactly one node. It
  1. registers, with the bootstrap secret or its node's token, its inventory and the generations
     it still runs; it gets a fresh per-node token (only its sha256 is stored) and a lease;
  2. heartbeats: renews the lease and pulls the node's desired allocations (active ones, and
     releasing ones with their deadline), each with its generation, command, environment and
     rank information;
  3. reports: processes started, exited (with the exit code), lost (stopped for a reason that
     is not the job's own), progress, device-activity samples;
  4. ships its jobs' output with any heartbeat or report (`logs`: chunks by generation, rank
     and byte offset), stored before the reports are applied (services/job_logs.py).

The storage side of fencing (seed 001 §8.2) lives here and in services/reconcile.py:
  - an expired lease is never renewed: the node is quarantined and its allocations fenced; the
    agent must stop everything and register again, clean;
  - reports name an allocation by generation; a generation that is no longer live on this node
    is stale: the report changes nothing and the reply tells the agent to stop that work;
  - a node's GPUs of an allocation stop being live only when that node's agent confirms the
    processes are gone (or the allocation is fenced), so the scheduler never hands out a GPU
    under a process the control plane knows of.

Lock order, everywhere (so two paths never deadlock): scheduler lease row → node row →
allocation row → job row → allocation GPU rows; several rows of one table in id order (the
cycle's commit kept neither for its runtime-limit kills, its stops, its binds and its waiting
jobs' reasons until 5 Dec: each could deadlock with an agent's report or an array's hold).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import structlog
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Value
from django.db.models.functions import Coalesce, Greatest

from controlplane import triggers
from controlplane.choices import (
    LIVE_ALLOCATION_STATES,
    AllocationState,
    CapacityTier,
    EventKind,
    NodeState,
)
from controlplane.models import (
    Allocation,
    AllocationGpu,
    Event,
    GpuType,
    Job,
    Node,
    SchedulerLease,
    UsageSample,
)
from controlplane.models.names import NODE_NAME_MESSAGE, NODE_NAME_PATTERN, name_problem
from controlplane.services import exit_codes, token_digests, transitions
from controlplane.services.span_text import span_words
from scheduler_core.sentences import counted, verb

log = structlog.get_logger(__name__)

TOKEN_PREFIX = "qma_"
# Why the control plane stopped a gang whose member ended on its own (see _member_gone; their
# home is services/transitions.py, whose fence settles them too).
RELEASE_GANG_MEMBER_EXITED = transitions.RELEASE_GANG_MEMBER_EXITED
RELEASE_GANG_MEMBER_FAILED = transitions.RELEASE_GANG_MEMBER_FAILED
# Why an allocation is fenced when its agent says the processes are gone for a reason that is
# not the job's own (agent restart or shutdown, self-fence on lease loss, refused generation).
FENCE_AGENT_RESTARTED = "AgentRestarted"
FENCE_WORK_LOST = "WorkLostOnNode"
FENCE_REFUSED = "RefusedByAgent"

INVENTORY_FIELDS = ("pool", "gpu_type", "gpu_count", "cpus", "memory_gb", "leaf_switch", "spine")


# ------------------------------------------------------------------------------------ errors


class AgentAuthError(Exception):
    """The presented token is neither this node's token nor the bootstrap secret (HTTP 401)."""


class AgentForbidden(Exception):
    """A valid agent asked for another node's endpoints (HTTP 403)."""


class NodeRetired(Exception):
    """The node was retired (services/nodes.retire): its agent is refused until an admin returns
    it to service (HTTP 409, code ``node_retired``)."""

    def __init__(self, node: Node) -> None:
        from controlplane.services import nodes

        super().__init__(nodes.retired_refusal(node))
        self.node = node


class NodeServedElsewhere(Exception):
    """A registration with the bootstrap secret from another host than the one whose agent
    serves the node, its lease still running (HTTP 409, code ``node_served_elsewhere``): two
    hosts were given one node name. `retry_after_s`: until that lease ends."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class InvalidAgentRequest(Exception):
    """The request cannot be applied; `errors` maps each field to what is wrong (HTTP 400)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


# ------------------------------------------------------------------------------------ values


@dataclass(frozen=True)
class Inventory:
    """What an agent says its node is. Fields left None keep what the control plane has; a
    node registering for the first time must give them all."""

    pool: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    cpus: int | None = None
    memory_gb: int | None = None
    leaf_switch: str | None = None
    spine: str | None = None
    capacity_tier: str | None = None
    simulated: bool | None = None
    devices: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Report:
    """One observation from an agent about one allocation (by generation) on its node.

    kind: started | exited | lost | progress | sample | refused.
    """

    kind: str
    generation: int
    at: datetime
    exit_code: int | None = None
    steps: int | None = None
    useful_tokens: int | None = None
    last_checkpoint_at: datetime | None = None
    started_at: datetime | None = None
    gpu_activity: float | None = None
    message: str = ""


REPORT_KINDS = ("started", "exited", "lost", "progress", "sample", "refused")
# Reports of one batch are applied in this order, so a job that started and exited between two
# heartbeats is first marked started, then its samples land, then it ends.
_REPORT_ORDER = {"started": 0, "progress": 1, "sample": 2, "refused": 3, "lost": 4, "exited": 5}


@dataclass
class Registration:
    node: Node
    token: str
    lease_expires_at: datetime
    released: list[int] = field(default_factory=list)


@dataclass
class Desired:
    """The reply to a heartbeat or a report: what the node must run now."""

    node: str
    node_state: str
    lease_expires_at: datetime | None
    lease_s: float
    heartbeat_interval_s: float
    reregister: bool
    allocations: list[dict[str, Any]]
    stop: list[int]
    stale_reports: list[int]
    # The version of the node's desired allocations this reply describes (see desired_versions):
    # the agent sends it back as `known`; while it still matches, the reply says `unchanged`
    # and carries no allocations (the agent keeps applying the ones it has).
    version: str | None = None
    unchanged: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "node_state": self.node_state,
            "lease_expires_at": self.lease_expires_at.isoformat() if self.lease_expires_at else None,
            "lease_s": self.lease_s,
            "heartbeat_interval_s": self.heartbeat_interval_s,
            "reregister": self.reregister,
            "allocations": self.allocations,
            "stop": self.stop,
            "stale_reports": self.stale_reports,
            "version": self.version,
            "unchanged": self.unchanged,
        }


# ------------------------------------------------------------------------------------ tokens


def token_hash(token: str) -> str:
    return token_digests.digest(token)


def new_token() -> str:
    return token_digests.new_token(TOKEN_PREFIX)


def bootstrap_secret() -> str:
    return str(settings.QM.get("AGENT_BOOTSTRAP_TOKEN", "") or "")


def is_bootstrap_secret(token: str) -> bool:
    secret = bootstrap_secret()
    return bool(secret) and bool(token) and hmac.compare_digest(secret.encode(), token.encode())


def node_for_token(token: str) -> Node | None:
    """The node whose agent holds `token`, or None. Only the token's hash is ever stored."""
    if not token or not token.startswith(TOKEN_PREFIX):
        return None
    # A token's hash names one node: no ordering needed (first() would sort by id).
    found = list(Node.objects.filter(agent_token_hash=token_hash(token)).order_by()[:1])
    return found[0] if found else None


def token_opens(node: Node, token: str) -> bool:
    """Whether `token` is `node`'s agent token (constant-time comparison of the hashes)."""
    return token_digests.matches(node.agent_token_hash, token)


def lease_seconds() -> float:
    return float(settings.QM["AGENT_LEASE_S"])


def heartbeat_interval_seconds() -> float:
    """How often an agent should heartbeat: several times per suspect window, so one lost
    packet never makes a node suspect."""
    qm = settings.QM
    return round(min(float(qm["SUSPECT_AFTER_S"]) / 3.0, lease_seconds() / 5.0), 3)


def actor_for(node: Node | str) -> str:
    return f"agent:{node.name if isinstance(node, Node) else node}"


# ------------------------------------------------------------------------------ registration


#: A node's refused contacts are recorded at most this often: an agent from before 6 Dec sends
#: the same refused contact again every round, and an operator needs to hear of it once, not
#: every 2.7 s.
CONTACT_REFUSED_EVERY = timedelta(minutes=10)
#: How many of a refusal's fields its event names (a contact may carry thousands of reports).
CONTACT_REFUSED_FIELDS = 20
_REFUSED_ELEMENT = re.compile(r"(reports|logs)\.(\d+)(?:\.|$)")


def _storable(text: str, limit: int) -> str:
    """`text` as PostgreSQL takes it: a refusal's words may repeat what the agent sent, and a
    lone surrogate or a NUL has no place in a text column (written as their escapes)."""
    return text.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")[:limit]


def contact_refused(node: Node, errors: dict[str, list[str]], body: Any, *, now: datetime) -> Event | None:
    """The node's agent sent a heartbeat or report the control plane refused (400: nothing of it
    was applied), for `errors` (field → problems, as the 400 names them; `body` is what it sent):
    the node's `node.agent_refused` event, naming the fields, their problems and the runs
    (generations) of the elements refused, so an operator reads it on the node's page and in
    `events/`. At most one every CONTACT_REFUSED_EVERY a node: None when one was recorded
    since. A `qm-agent` of 6 Dec on sets the elements named aside in its `refused.jsonl` and
    sends the rest (controlplane/agent/node.py); an older one sends the same contact again."""
    if Event.objects.filter(node_id=node.pk, kind=EventKind.NODE_AGENT_REFUSED,
                            created_at__gt=now - CONTACT_REFUSED_EVERY).exists():
        return None
    named = list(errors.items())[:CONTACT_REFUSED_FIELDS]
    generations: set[int] = set()
    for name, _ in named:
        match = _REFUSED_ELEMENT.match(name)
        if match is None or not isinstance(body, dict):
            continue
        elements, index = body.get(match.group(1)), int(match.group(2))
        element = elements[index] if isinstance(elements, list) and index < len(elements) else None
        generation = element.get("generation") if isinstance(element, dict) else None
        if type(generation) is int and 0 < generation < 2**63:
            generations.add(generation)
    said = "; ".join(f"{name}: {' '.join(problems)}" for name, problems in named) or "the body is not JSON it takes"
    runs = f" (generation{'s' if len(generations) > 1 else ''} {', '.join(map(str, sorted(generations)))})" \
        if generations else ""
    more = f"; and {len(errors) - len(named)} more field(s)" if len(errors) > len(named) else ""
    return transitions.record_event(
        EventKind.NODE_AGENT_REFUSED, actor_for(node), node=node, at=now, reason="AgentContactRefused",
        message=_storable(f"{node.name}: its agent's contact was refused and nothing of it applied: {said}{more}"
                          f"{runs}", 1000),
        data={"errors": {_storable(name, 200): [_storable(p, 500) for p in problems] for name, problems in named},
              "fields": len(errors), "generations": sorted(generations)},
    )


def register(
    name: str, inventory: Inventory, *, token: str, running: Sequence[int], now: datetime,
    self_fenced_at: datetime | None = None, launched: Sequence[int] | None = None, host: str = "",
) -> Registration:
    """Register (or re-register) the agent of node `name` (`_register`). A registration that
    found no node and met one created meanwhile by another registration of the same name (an
    agent's retry of a registration it timed out on, still being written) registers it again,
    as any re-registration: until 5 Dec it was refused, quoting the database's unique name."""
    try:
        return _register(name, inventory, token=token, running=running, now=now, self_fenced_at=self_fenced_at,
                         launched=launched, host=host)
    except IntegrityError:
        if not Node.objects.filter(name=name).exists():
            raise
        return _register(name, inventory, token=token, running=running, now=now, self_fenced_at=self_fenced_at,
                         launched=launched, host=host)


def _register(
    name: str, inventory: Inventory, *, token: str, running: Sequence[int], now: datetime,
    self_fenced_at: datetime | None = None, launched: Sequence[int] | None = None, host: str = "",
) -> Registration:
    """Register (or re-register) the agent of node `name`.

    Steps:
      1. authenticate: the bootstrap secret may register any node; a node token only its own;
      2. create the node from the inventory, or update what the agent declares;
      3. settle the node's live allocations the agent no longer runs (a fresh agent runs none:
         its processes died with the old one): releasing ones are confirmed stopped, active
         ones are fenced and their jobs requeued whole with the lost work recorded (as
         `NodeLeaseExpired` when the agent says it self-fenced at `self_fenced_at`: the node
         stopped answering, its agent did not restart); an active one no agent of the node
         ever reported started is the fresh agent's to start (`_never_started_on`), unless
         the agent names it `launched` (an agent of the node launched it: fenced as the others)
         or cannot vouch for the node's past (`_vouches_for_launches`: fenced too);
      4. a suspect, quarantined or down node is ready again (it registered clean); cordoned
         and draining nodes stay as the operator left them; a retired node is refused
         (NodeRetired, 409) until an admin returns it to service;
      5. issue a fresh token (stored as sha256) and a lease.
    """
    from controlplane.services import reconcile

    bootstrap = is_bootstrap_secret(token)
    if not bootstrap and node_for_token(token) is None:
        gone = Node.objects.filter(name=name, state=NodeState.RETIRED).first()
        if gone is not None:
            raise NodeRetired(gone)  # its token was revoked when it was retired: say why
        raise AgentAuthError(
            "register needs the bootstrap secret (QM_AGENT_BOOTSTRAP_TOKEN) or this node's own token"
        )
    keep = set(running)
    existing = Node.objects.filter(name=name).first()
    # Allocations bound after this read are new work for the fresh agent, not abandoned ones:
    # only those read here are settled below (before 30 Nov every live one was, under the lock,
    # so a job bound onto the node's free GPUs meanwhile was fenced without ever running).
    abandoned = {a.pk for a in _live_allocations_on(existing) if a.generation not in keep} if existing else set()
    with transaction.atomic():
        # Fencing draws generations from the lease row: lock it first (see the lock order
        # above), and only when there is something to fence, so registrations stay cheap.
        # So does a change of the node's GPUs, CPUs or memory, as an admin's (services/nodes.py,
        # lock_before_inventory_change): a bind committing meanwhile is seen by the check of
        # what its live allocations hold, or finds the node changed and is left out.
        lease = reconcile.lock_scheduler_lease() if abandoned or _changes_shape(existing, inventory) else None
        node = Node.objects.select_for_update(no_key=True).filter(name=name).first()
        if not bootstrap and (
            node is None or not token_digests.matches(node.agent_token_hash, token)
        ):
            raise AgentForbidden(f"this token belongs to another node's agent; it may not register {name!r}")
        if node is not None and node.state == NodeState.RETIRED:
            raise NodeRetired(node)
        if node is not None and not token_digests.matches(node.agent_token_hash, token):
            _refuse_another_host(node, host, now)
        created = node is None
        # A node an admin (or the demo) created whose agent never spoke registers for the
        # first time, not "again".
        first = created or node.last_heartbeat_at is None
        _refuse_stale_running(node, keep)
        actor = actor_for(name)
        # What the agent no longer runs is settled before the new inventory is checked: a
        # fresh agent with fewer GPUs (one fell off the bus) runs nothing on the ones it lost,
        # so their old allocations are fenced here rather than refusing it until its lease
        # runs out. Work it says it still runs on GPUs it no longer declares is refused (400).
        # Read under the locks, after any start report of the old agent that got in first.
        # Not when it declares other GPUs (or CPUs, memory): what was placed on the old shape is
        # fenced and placed again on the new.
        unstarted = (_never_started_on(node, abandoned) if node is not None and lease is not None
                     and not _changes_shape(existing, inventory) else set())
        # Never started by its report is not never launched: what the agent names `launched` ran
        # here (it may have outlived its agent until this one's sweep), and an agent that cannot
        # vouch for what was launched here is given nothing of the past to start.
        vouched = bool(unstarted) and _vouches_for_launches(node, token, launched, now)
        kept_from_takeover = sorted(unstarted if not vouched else unstarted & set(launched or ()))
        unstarted = unstarted - set(kept_from_takeover) if vouched else set()
        released = (
            _settle_abandoned_allocations(node, keep, abandoned, lease=lease, now=now, actor=actor,
                                          reason=FENCE_AGENT_RESTARTED if self_fenced_at is None
                                          else reconcile.FENCE_LEASE_EXPIRED, unstarted=unstarted)
            if node is not None and lease is not None else []
        )
        taken_over = sorted(unstarted)
        was = None if node is None else (node.gpu_count, node.gpu_type.name)
        settings_were = None if node is None else _settings(node)
        node = _create_node(name, inventory) if node is None else _update_inventory(node, inventory)
        changed = was is not None and was != (node.gpu_count, node.gpu_type.name)
        replaced = {} if settings_were is None else {
            f: v for f, v in settings_were.items() if getattr(node, f) != v}
        before = node.state
        if node.state in (NodeState.SUSPECT, NodeState.QUARANTINED, NodeState.DOWN):
            # An operator's cordon or drain outlives the node going away (services/nodes.py).
            node.state = NodeState.CORDONED if node.unschedulable else NodeState.READY
        # What it declares now, kept on the node: an admin's edit may not contradict it
        # (services/nodes.gpu_type_refusal, gpu_count_refusal); a type it names no more is free.
        node.agent_gpu_type = inventory.gpu_type or ""
        node.agent_gpu_count = node.gpu_count
        node.agent_registered_at = now
        fresh = new_token()
        node.agent_token_hash = token_hash(fresh)
        node.last_heartbeat_at = now
        node.agent_lease_expires_at = now + timedelta(seconds=lease_seconds())
        node.save()
        transitions.record_event(
            EventKind.NODE_REGISTERED, actor, node=node, at=now, reason="Registered" if first else "ReRegistered",
            message=f"{node.name} registered {node.gpu_count}× {node.gpu_type.name}"
            + ("" if created else f", was {before}" + (" (its agent's first registration)" if first else ""))
            + (_inventory_change(was, node) if changed and was is not None else "")
            + (_settings_change(replaced, node) if replaced else "")
            + (f"; {len(released)} allocation(s) it no longer runs were settled" if released else "")
            + (f" (its agent had stopped them itself at {self_fenced_at:%H:%M:%S} when it could not renew its lease)"
               if released and self_fenced_at is not None else "")
            + (f"; its new agent starts what was bound for it and never started there: generation "
               f"{', '.join(map(str, taken_over[:20]))}" + (" …" if len(taken_over) > 20 else "")
               if taken_over else "")
            + (f"; not started again, never reported started yet {_why_not_taken_over(vouched)}: generation "
               f"{', '.join(map(str, kept_from_takeover[:20]))}" + (" …" if len(kept_from_takeover) > 20 else "")
               if kept_from_takeover else ""),
            data={"gpus": node.gpu_count, "from": str(before), "settled_generations": released,
                  **({"taken_over_generations": taken_over} if taken_over else {}),
                  **({"not_taken_over_generations": kept_from_takeover} if kept_from_takeover else {}),
                  **({"launched_generations": sorted(set(launched))[:100]} if launched else {}),
                  **({"host": host} if host else {}),
                  "devices": list(inventory.devices)[:16],
                  **({"gpus_before": was[0], "gpu_type_before": was[1]} if changed and was is not None else {}),
                  **({"inventory_before": replaced} if replaced else {}),
                  # what the agent named its GPUs (kept on the node too, agent_gpu_type, which
                  # services/nodes.gpu_type_refusal reads); absent when it named none
                  **({"gpu_type_declared": inventory.gpu_type} if inventory.gpu_type is not None else {})},
        )
        if before != node.state:
            transitions.record_event(
                EventKind.NODE_STATE, actor, node=node, at=now, reason="RegisteredClean",
                message=f"{node.name}: {before} → {node.state}: "
                + ("its agent registered for the first time" if first
                   else "its agent registered again with nothing stale running")
                + ("; it stays out of service until an operator uncordons it" if node.unschedulable else ""),
                data={"from": str(before), "to": str(node.state)},
            )
        transaction.on_commit(_request_cycle)
    log.info("agent registered", node=name, created=created, settled=released, taken_over=taken_over)
    return Registration(node=node, token=fresh, lease_expires_at=node.agent_lease_expires_at, released=released)


def _refuse_another_host(node: Node, host: str, now: datetime) -> None:
    """A registration with the bootstrap secret (not the node's token) from another host than the
    one whose agent registered the node last, while that agent's lease still runs: two hosts were
    given one node name (a copied configuration, a re-imaged spare). Refused (NodeServedElsewhere,
    409) until that lease has ended, so the node's agent keeps it. Until 8 Dec each took the node
    from the other at every heartbeat (the other's token refused, it registered again with the
    bootstrap secret), each registration fencing what the other had started. An agent that names
    no host (before 8 Dec), or a node whose last registration named none, is not refused; a
    restart on the same host (its state directory lost) names the same host and is not either."""
    lease = node.agent_lease_expires_at
    if not host or lease is None or lease < now:
        return
    last = (Event.objects.filter(node_id=node.pk, kind=EventKind.NODE_REGISTERED)
            .order_by("-created_at", "-id").values_list("data", flat=True).first())
    serving = str((last or {}).get("host") or "")
    if not serving or serving == host:
        return
    wait = (lease - now).total_seconds()
    raise NodeServedElsewhere(
        f"node {node.name} is served by the agent on host {serving!r}, whose lease runs until {lease:%H:%M:%S} UTC; "
        f"this agent, on host {host!r}, registers with the bootstrap secret: two hosts were given the name "
        f"{node.name}. Give this one its own name (--name); it may take the node once that lease has ended",
        retry_after_s=max(1.0, wait),
    )


def _changes_shape(node: Node | None, inventory: Inventory) -> bool:
    """Whether registering `inventory` changes what a bind relies on of `node` (as read): its
    GPU type or count, CPUs or memory."""
    if node is None:
        return False
    return ((inventory.gpu_type is not None and inventory.gpu_type != node.gpu_type.name)
            or any(getattr(inventory, f) is not None and getattr(inventory, f) != getattr(node, f)
                   for f in ("gpu_count", "cpus", "memory_gb")))


def _refuse_stale_running(node: Node | None, running: set[int]) -> None:
    """Registering says "nothing of the past runs here but `running`", and makes the node's other
    GPUs free for new work: a generation it names that is no longer live on the node (fenced,
    released, or never bound here) would run beside that new work. 400 naming `running`; the
    node stays as it was until the agent has stopped them. (`qm-agent` registers only once all
    its processes are gone.)"""
    if not running:
        return
    live = set() if node is None else {a.generation for a in _live_allocations_on(node)}
    stale = sorted(running - live)
    if stale:
        listed = ", ".join(str(g) for g in stale[:20]) + (" …" if len(stale) > 20 else "")
        raise InvalidAgentRequest({"running": (
            f"generation(s) {listed} are no longer this node's to run (fenced, released or never bound here); "
            "stop them, then register again without them"
        )})


def _inventory_change(was: tuple[int, str], node: Node) -> str:
    """'; its GPUs changed: 8 → 4 GPUs' (and the type, when that changed)."""
    count, type_name = was
    parts = []
    if count != node.gpu_count:
        parts.append(f"{count} → {node.gpu_count} GPUs")
    if type_name != node.gpu_type.name:
        parts.append(f"GPU type {type_name} → {node.gpu_type.name}")
    return "; its GPUs changed: " + ", ".join(parts)


#: A node's settings an agent may declare beside its GPUs (those `_inventory_change` says), in
#: the words of the admin's NodeChanged events.
_DECLARED_SETTINGS = {"pool": "pool", "cpus": "CPUs", "memory_gb": "memory GB", "leaf_switch": "leaf switch",
                      "spine": "spine", "capacity_tier": "capacity tier"}


def _settings(node: Node) -> dict[str, Any]:
    return {f: getattr(node, f) for f in _DECLARED_SETTINGS}


def _settings_change(before: dict[str, Any], node: Node) -> str:
    """'; its agent declared another inventory: pool h100b → h100, …': a registration replaces
    what an admin edited since the last (a NodeChanged event said that edit; until 6 Dec nothing
    said it was undone, and the trail read the node as edited while it was not)."""
    moved = ", ".join(f"{words} {before[f]} → {getattr(node, f)}" for f, words in _DECLARED_SETTINGS.items()
                      if f in before)
    return (f"; its agent declared another inventory: {moved} (what an agent declares replaces an admin's edit: "
            "change its flags to keep one)")


def _create_node(name: str, inventory: Inventory) -> Node:
    missing = {f: "required when a node registers for the first time" for f in INVENTORY_FIELDS
               if getattr(inventory, f) in (None, "")}
    if not re.match(NODE_NAME_PATTERN, name):
        missing["name"] = NODE_NAME_MESSAGE  # (the API's serializer says it first)
    if missing:
        raise InvalidAgentRequest(missing)
    node = Node(name=name, simulated=bool(inventory.simulated))
    return _apply_inventory(node, inventory)


def _update_inventory(node: Node, inventory: Inventory) -> Node:
    return _apply_inventory(node, inventory)


def _apply_inventory(node: Node, inventory: Inventory) -> Node:
    errors: dict[str, str] = {}
    if inventory.gpu_type is not None:
        gpu_type = GpuType.objects.filter(name=inventory.gpu_type).first()
        if gpu_type is None:
            known = ", ".join(GpuType.objects.order_by("name").values_list("name", flat=True)) or "none yet"
            errors["gpu_type"] = (
                f"unknown GPU type {inventory.gpu_type!r} (known: {known}); an admin creates it first, "
                "or start the agent with --gpu-type naming a known one"
            )
        else:
            node.gpu_type = gpu_type
    for f in ("gpu_count", "cpus", "memory_gb"):
        value = getattr(inventory, f)
        if value is not None:
            if value < (1 if f == "gpu_count" else 0):
                errors[f] = f"must be {'at least 1' if f == 'gpu_count' else 'zero or more'}, got {value}"
            else:
                setattr(node, f, value)
    for f in ("pool", "leaf_switch", "spine"):
        value = getattr(inventory, f)
        if value is not None:
            if not value or len(value) > 64:
                errors[f] = f"must be 1 to 64 characters, got {value!r}"
            elif "\x00" in value or name_problem(value):
                errors[f] = name_problem(value) or "null characters are not allowed in a name"
            else:
                setattr(node, f, value)
    if inventory.capacity_tier is not None:
        if inventory.capacity_tier not in CapacityTier.values:
            errors["capacity_tier"] = f"must be one of {', '.join(CapacityTier.values)}, got {inventory.capacity_tier!r}"
        else:
            node.capacity_tier = inventory.capacity_tier
    if inventory.simulated is not None:
        node.simulated = inventory.simulated
    if node.pk and inventory.gpu_count is not None:
        beyond = AllocationGpu.objects.filter(node=node, live=True, gpu_index__gte=inventory.gpu_count).count()
        if beyond:
            errors["gpu_count"] = (
                f"{beyond} GPU(s) with index ≥ {inventory.gpu_count} are held by live allocations; "
                "drain the node before shrinking its inventory"
            )
    if errors:
        raise InvalidAgentRequest(errors)
    return node


def _settle_abandoned_allocations(
    node: Node, keep: set[int], abandoned: set[int], *, lease: SchedulerLease, now: datetime, actor: str,
    reason: str, unstarted: set[int],
) -> list[int]:
    """Live allocations on `node` whose generation the agent does not run any more, of those
    (`abandoned`, by id) that were live before it registered; the active ones no agent of the
    node ever started (`unstarted`, by generation) are left to the fresh agent to start."""
    settled: list[int] = []
    live = [a for a in _live_allocations_on(node) if a.generation not in keep and a.pk in abandoned]
    for allocation in live:
        if allocation.generation in unstarted:
            continue
        settled.append(allocation.generation)
        if allocation.state == AllocationState.RELEASING:
            # It was being stopped anyway; the agent confirms nothing of it runs here.
            _member_gone(allocation.pk, allocation.generation, node, exit_code=None, at=now, actor=actor)
        else:
            transitions.fence_allocation(allocation.pk, lease=lease, at=now, actor=actor, reason=reason)
    return settled


def _never_started_on(node: Node, allocation_ids: set[int]) -> set[int]:
    """The generations of the active allocations among `allocation_ids` whose start no agent of
    `node` ever reported (no `job.started` event for them there): bound since its agent last
    spoke, or given to it and not started before it died. A registration saying it runs none of
    them leaves nothing of theirs on the node, so nothing is lost and nothing needs fencing: the
    fresh agent starts them under the same generation, on the GPUs they hold (until 7 Dec they
    were fenced as abandoned, and a job the loop bound onto a node whose agent was restarting was
    fenced and requeued without ever running, once per node it was bound to meanwhile)."""
    if not allocation_ids:
        return set()
    begun = Event.objects.filter(kind=EventKind.JOB_STARTED, node_id=node.pk, allocation_id__in=allocation_ids)
    return set(
        Allocation.objects.filter(pk__in=allocation_ids, state=AllocationState.ACTIVE)
        .exclude(pk__in=begun.values("allocation_id")).values_list("generation", flat=True)
    )


def _vouches_for_launches(node: Node, token: str, launched: Sequence[int] | None, now: datetime) -> bool:
    """Whether a registration may be believed when it says nothing was launched on `node` but the
    runs it names `launched` (and `running`), so that the rest of what was bound there and never
    reported started is the fresh agent's to start.

    Yes when the node's previous agent's lease has run out: alive, it killed its runs when it
    could not renew it (its self-fence comes first, node.py); dead, they died with it (their
    death signal, its reaper) or were found by this agent's sweep and named. Else only an agent
    that says what was launched (`launched`, a `qm-agent` of 8 Dec on; one before it says
    nothing and is not believed) and is this node's agent as its predecessor was: it holds the
    node's token, which the previous agent wrote into the state directory where its launch
    journal is (controlplane/agent/launch_journal.py), or the node is simulated (its runs live
    in its agent's memory and die with it). A registration with the bootstrap secret while the
    previous agent's lease still runs may come from another host given the node's name, or from
    a state directory lost with its journal: what it was not told of may still run."""
    # (as reconcile reads a lease: over once past; at its instant a heartbeat still renews it)
    lease_over = node.agent_lease_expires_at is None or node.agent_lease_expires_at < now
    if lease_over:
        return True
    return launched is not None and (node.simulated or token_digests.matches(node.agent_token_hash, token))


def _why_not_taken_over(vouched: bool) -> str:
    return ("(its agent says an agent of the node launched it: lost with that agent, requeued)" if vouched else
            "(its agent could not vouch that none of them was launched by the agent before it, whose lease "
            "still ran: requeued)")


def _live_allocations_on(node: Node) -> list[Allocation]:
    ids = AllocationGpu.objects.filter(node=node, live=True).values("allocation_id")
    return list(Allocation.objects.filter(pk__in=ids, state__in=LIVE_ALLOCATION_STATES).order_by("generation"))


# --------------------------------------------------------------------------- heartbeat/report


@dataclass(frozen=True)
class SyncRequest:
    """One node's heartbeat (renew=True) or report (renew=False)."""

    node: Node
    reports: Sequence[Report] = ()
    running: Sequence[int] = ()
    renew: bool = True
    goodbye: bool = False
    known: str | None = None  # the version of the desired state the agent holds, if any
    shutting_down: bool = False  # its agent stops its jobs to shut down: no new work goes there


def sync(
    node: Node,
    *,
    reports: Sequence[Report],
    running: Sequence[int],
    renew: bool,
    now: datetime,
    goodbye: bool = False,
    known: str | None = None,
    shutting_down: bool = False,
) -> Desired:
    """Apply an agent's reports, renew its lease (heartbeat), and say what the node must run."""
    return sync_many([SyncRequest(node, reports, running, renew, goodbye, known, shutting_down)], now=now)[0]


def sync_many(requests: Sequence[SyncRequest], *, now: datetime) -> list[Desired]:
    """Heartbeats and reports of many nodes at once (one agent, or a process simulating many).

    Steps:
      1. each node's reports, applied in order (only nodes that sent some);
      2. goodbyes: the node is down, its remaining work fenced;
      3. every heartbeat's lease renewed in one compare-and-set: a lease that already ran out,
         or a quarantined or down node, is never renewed; such a node is expired (quarantined,
         its allocations fenced) and its agent told to stop everything and register again;
      4. every node's desired-state version, in one query; the desired allocations, in two
         more queries whatever the number of nodes, only for the nodes whose agent does not
         already hold that version (see desired_versions_many);
      5. what an agent runs that it is no longer given is listed to stop, and recorded.
    """
    stale = apply_reports_many([(r.node, r.reports) for r in requests], now=now,
                               leaving=frozenset(r.node.pk for r in requests if r.goodbye))
    stale = {r.node.pk: stale.get(r.node.pk, []) for r in requests}
    # an agent that says it is shutting down: its node takes no new work from this contact on,
    # its idle GPUs too (before its first stopped job's report, they were still bound)
    _shutting_down([r.node for r in requests if r.shutting_down and not r.goodbye], now)
    reregister: set[int] = set()
    for request in requests:
        if request.goodbye:
            _goodbye(request.node, now)
            reregister.add(request.node.pk)
    view = _renew_heartbeats(requests, now, reregister)
    # The versions are read before the allocations: a reply may carry allocations newer than
    # its version (the next heartbeat then sends them again), never older.
    serving = [r for r in requests if r.node.pk not in reregister]
    versions = desired_versions_many([r.node.pk for r in serving])
    unchanged: set[int] = set()
    for request in serving:
        if request.known:
            version, _, releasing = versions.get(request.node.pk, _NO_ALLOCATIONS)
            # A releasing allocation's grace is counted from now: always sent in full.
            if request.known == version and not releasing:
                unchanged.add(request.node.pk)
    # A node given nothing needs no payload queries (the last exit of a wave, an idle node).
    full = [r.node for r in serving if r.node.pk not in unchanged
            and versions.get(r.node.pk, _NO_ALLOCATIONS)[1]]
    desired = desired_allocations_many(full, now)
    replies = []
    for request in requests:
        pk = request.node.pk
        if pk in reregister:
            replies.append(_reply(request, view[pk], [], set(), stale[pk], None, now, reregister=True))
            continue
        if pk in unchanged:
            allocations, given = [], set(versions[pk][1])
        else:
            allocations = desired.get(pk, [])
            given = {a["generation"] for a in allocations}
        replies.append(_reply(request, view[pk], allocations, given, stale[pk], versions[pk][0], now,
                              unchanged=pk in unchanged))
    return replies


def _renew_heartbeats(requests: Sequence[SyncRequest], now: datetime,
                      reregister: set[int]) -> dict[int, tuple[str, datetime | None]]:
    """Step 3 of :func:`sync_many`: every heartbeat's lease renewed in one compare-and-set;
    a node whose lease ran out, or that is quarantined or down, is expired and added to
    ``reregister``. Returns each node's state and lease as its reply tells them."""
    from controlplane.services import reconcile

    heartbeats = [r.node for r in requests if r.renew and not r.goodbye]
    renewed = renew_leases(heartbeats, now)
    for node in heartbeats:
        if node.pk not in renewed:
            # The lease ran out before this heartbeat arrived, or the node was quarantined.
            reconcile.expire_node(node.pk, now=now)
            reregister.add(node.pk)
    # Not renewed: read what the node is now (quarantined by the expiry above, or retired
    # meanwhile: the reply says which), a goodbye's excepted (down, see below).
    unsure = [r.node.pk for r in requests if r.node.pk not in renewed and not r.goodbye]
    current = {
        pk: (state, lease)
        for pk, state, lease in Node.objects.filter(pk__in=unsure).values_list("pk", "state", "agent_lease_expires_at")
    } if unsure else {}
    expires = now + timedelta(seconds=lease_seconds())
    view: dict[int, tuple[str, datetime | None]] = {}
    for request in requests:
        node = request.node
        if node.pk in renewed:
            # Renewed: the compare-and-set proved the node is neither quarantined nor down.
            view[node.pk] = (node.state if node.state != NodeState.SUSPECT else NodeState.READY, expires)
        elif node.pk in current:
            view[node.pk] = current[node.pk]
        else:
            view[node.pk] = (NodeState.QUARANTINED if not request.goodbye else NodeState.DOWN, None)
        if view[node.pk][0] in (NodeState.QUARANTINED, NodeState.DOWN, NodeState.RETIRED):
            reregister.add(node.pk)  # a retired node's registration is then refused (409)
    return view


def _reply(request: SyncRequest, view: tuple[str, datetime | None], allocations: list[dict[str, Any]],
           given: set[int], stale: list[int], version: str | None, now: datetime, *,
           reregister: bool = False, unchanged: bool = False) -> Desired:
    """Step 5 of :func:`sync_many`: one node's answer. What its agent runs and is not given
    any more is listed to stop (and recorded when it still runs it)."""
    node = request.node
    state, lease = view
    stop = sorted({g for g in request.running if g not in given} | set(stale))
    running_stale = sorted(g for g in stop if g in set(request.running))
    if running_stale:
        # Not a run released on its agent's own word (its exit, its confirmed stop): a `running`
        # list older than that word (a wake-up's, sent when the wait began; a heartbeat held up
        # on the way) still names it, yet the agent no longer runs it. A fenced run keeps
        # no generation of its own (the fence bumps it) and is still told here.
        ended = set(Allocation.objects.filter(generation__in=running_stale, state=AllocationState.RELEASED)
                    .values_list("generation", flat=True))
        running_stale = [g for g in running_stale if g not in ended]
    if running_stale:
        # The agent runs work the control plane no longer gives it: a healed partition, a
        # fenced allocation, a lost message. Record it; the reply makes the agent stop it.
        transitions.record_event(
            EventKind.NODE_STATE, actor_for(node), node=node, at=now, reason="StaleWorkStopped",
            message=f"{node.name} still runs generation(s) {', '.join(map(str, running_stale))} that are no "
            "longer its to run; told to stop them",
            data={"generations": running_stale, "node_state": str(state)},
        )
    return Desired(
        node=node.name,
        node_state=str(state),
        lease_expires_at=None if reregister else lease,
        lease_s=lease_seconds(),
        heartbeat_interval_s=heartbeat_interval_seconds(),
        reregister=reregister,
        allocations=allocations,
        stop=stop,
        stale_reports=sorted(set(stale)),
        version=version,
        unchanged=unchanged,
    )


def renew_lease(node: Node, now: datetime) -> bool:
    return node.pk in renew_leases([node], now)


def renew_leases(nodes: Sequence[Node], now: datetime) -> set[int]:
    """Extend the leases that are still valid; returns the ids renewed. Compare-and-set: an
    expired lease, or a quarantined, down or retired node, is never renewed (reconcile may be
    fencing it right now). A suspect node whose heartbeats resumed is ready again, or cordoned
    or draining again when an operator had cordoned or drained it (the node objects given are
    updated to the state they returned to)."""
    if not nodes:
        return set()
    expires = now + timedelta(seconds=lease_seconds())
    ids = [n.pk for n in nodes]
    updated = (
        Node.objects.filter(pk__in=ids, agent_lease_expires_at__gte=now)
        .exclude(state__in=[NodeState.QUARANTINED, NodeState.DOWN, NodeState.RETIRED])
        .update(last_heartbeat_at=now, agent_lease_expires_at=expires)
    )
    if not updated:
        return set()
    renewed = set(ids) if updated == len(set(ids)) else set(
        Node.objects.filter(pk__in=ids, agent_lease_expires_at=expires).values_list("pk", flat=True)
    )
    for node in nodes:
        if node.pk not in renewed or node.state != NodeState.SUSPECT:
            continue
        from controlplane.services import reconcile

        wish = Node.objects.filter(pk=node.pk).values_list("unschedulable", flat=True).first()
        node.unschedulable = bool(wish)
        back = reconcile.state_after_suspect(node)
        # The state and its event together or not at all (the next heartbeat tries again).
        with transaction.atomic():
            if not Node.objects.filter(pk=node.pk, state=NodeState.SUSPECT).update(state=back):
                continue
            transitions.record_event(
                EventKind.NODE_STATE, actor_for(node), node=node, at=now, reason="HeartbeatsResumed",
                message=f"{node.name}: suspect → {back}, heartbeats resumed before its lease ran out"
                + ("" if back == NodeState.READY else f" (it stays {back}, as an operator left it)"),
                data={"from": NodeState.SUSPECT.value, "to": str(back)},
            )
            transaction.on_commit(_request_cycle)
        node.state = back
    return renewed


def _goodbye(node: Node, now: datetime) -> None:
    """The agent shuts down after stopping its work: its lease ends now and the node is down
    until an agent registers it again."""
    from controlplane.services.nodes import jobs_on

    with transaction.atomic():
        current = Node.objects.select_for_update(no_key=True).get(pk=node.pk)
        before = current.state
        Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=now, state=NodeState.DOWN)
        # The jobs still holding its GPUs: fenced off it and requeued whole just below
        # (reconcile.expire_node); its own event names them, as a lease that ran out does.
        left = jobs_on(node.pk)
        # Before them, the jobs its agent stopped to shut down, reported (`stopped: shutdown`) in
        # this heartbeat or an earlier one since it last registered: fenced off it and requeued
        # already, so no longer on it, yet requeued because it went away.
        gone = [(job_id, name, others) for job_id, name, others in _stopped_for_shutdown(node, now)
                if job_id not in {j.job_id for j in left}]
        gone += [(j.job_id, j.name, list(j.other_nodes)) for j in left]
        said = [f"job {job_id} {name}" + (f" (also on {', '.join(others)})" if others else "")
                for job_id, name, others in gone]
        requeued = [job_id for job_id, _, _ in gone]
        transitions.record_event(
            EventKind.NODE_STATE, actor_for(node), node=node, at=now, reason="AgentShutdown",
            message=f"{node.name}: {before} → down, its agent shut down after stopping its work; "
            + (f"requeued whole: {', '.join(said[:20])}" + (f" and {len(said) - 20} more" if len(said) > 20 else "")
               if said else "nothing ran on it"),
            data={"from": str(before), "to": NodeState.DOWN.value, "requeued": requeued},
        )
    if _live_allocations_on(node):
        from controlplane.services import reconcile

        reconcile.expire_node(node.pk, now=now)


def _stopped_for_shutdown(node: Node, now: datetime) -> list[tuple[int, str, list[str]]]:
    """The jobs fenced off `node` since its agent last registered because that agent stopped
    them to shut down (`NodeUnavailable`, by this node's agent: a gang another node's agent
    stopped is that node's to name): (job id, name, the gang's other nodes), oldest first."""
    registered = (Event.objects.filter(node_id=node.pk, kind=EventKind.NODE_REGISTERED, created_at__lte=now)
                  .order_by("-created_at", "-id").values_list("created_at", flat=True).first())
    fenced = Event.objects.filter(
        kind=EventKind.ALLOCATION_FENCED, reason=_fence_node_unavailable(), actor=actor_for(node),
        allocation__gpus__node_id=node.pk,
    )
    if registered is not None:
        fenced = fenced.filter(created_at__gte=registered)
    out: list[tuple[int, str, list[str]]] = []
    seen: set[int] = set()
    for job_id, name, data in fenced.order_by("created_at", "id").values_list("job_id", "job__name", "data").distinct():
        if job_id is None or job_id in seen:
            continue
        seen.add(job_id)
        others = sorted(set((data or {}).get("nodes") or ()) - {node.name})
        out.append((job_id, name, others))
    return out


def _fence_node_unavailable() -> str:
    from controlplane.services import reconcile

    return reconcile.FENCE_NODE_UNAVAILABLE


def apply_reports(node: Node, reports: Sequence[Report], *, now: datetime) -> list[int]:
    """Apply one node's reports; returns the generations they named that are stale here."""
    return apply_reports_many([(node, reports)], now=now).get(node.pk, [])


def apply_reports_many(batches: Sequence[tuple[Node, Sequence[Report]]], *, now: datetime,
                       leaving: frozenset[int] = frozenset()) -> dict[int, list[int]]:
    """Apply the reports of many nodes; returns, per node, the generations that are stale there.

    Steps (a handful of queries for the whole batch, plus one transaction per ending):
      1. find every named allocation that holds GPUs on the reporting node; a generation that
         does not (fenced since, or never this node's) is stale;
      2. starts: an Event per node, `started_at` once every node of a gang has started;
      3. progress: totals only move forward;
      4. endings, in each node's order: exits and confirmed stops release the node's share
         (services: _member_gone), work lost for a reason not the job's own is fenced;
      5. usage samples.
    A node whose agent reports a job stopped for its shutdown is draining from then
    (`_shutting_down`), unless it is in `leaving`: its goodbye in the same request takes it down.
    """
    batches = [(n, r) for n, r in batches if r]
    stale: dict[int, set[int]] = {n.pk: set() for n, _ in batches}
    if not batches:
        return {}
    generations = {r.generation for _, reports in batches for r in reports}
    # (allocation, node) → how many of the allocation's GPUs are on that node (samples need it).
    held: dict[tuple[int, int], int] = {
        (allocation_id, node_id): n
        for allocation_id, node_id, n in AllocationGpu.objects.filter(
            node_id__in=[n.pk for n, _ in batches], allocation__generation__in=generations
        ).order_by().values("allocation_id", "node_id").annotate(n=Count("id")).values_list("allocation_id", "node_id", "n")
    }
    # No ordering (the model's default would make Django copy the whole filter, big `IN`
    # lists included, for every ORDER BY expression it resolves).
    allocations = {
        a.generation: a
        for a in Allocation.objects.filter(pk__in=sorted({a for a, _ in held}))
        .order_by()
        .select_related("job")
        .only("id", "generation", "state", "created_at", "started_at", "released_at", "release_reason", "job_id",
              "job__team_id")
        .annotate(node_count=Count("gpus__node_id", distinct=True))
    }
    started: list[tuple[Node, Allocation, Report]] = []
    samples: list[tuple[Node, Allocation, Report]] = []
    progress: dict[int, Report] = {}
    endings: list[tuple[Node, Allocation, Report]] = []
    for node, reports in batches:
        for report in sorted(reports, key=lambda r: (_REPORT_ORDER[r.kind], r.at)):
            allocation = allocations.get(report.generation)
            if allocation is None or (allocation.pk, node.pk) not in held:
                stale[node.pk].add(report.generation)
                continue
            report = _not_before_bind(report, allocation.created_at)
            if report.kind == "sample":
                samples.append((node, allocation, report))
            elif allocation.state not in LIVE_ALLOCATION_STATES:
                # Released or fenced already: nothing to change. A process still running under
                # it must stop; an exit of it is old news.
                if report.kind in ("started", "progress"):
                    stale[node.pk].add(report.generation)
            elif report.kind == "started":
                started.append((node, allocation, report))
            elif report.kind == "progress":
                previous = progress.get(allocation.job_id)
                if previous is None or (report.steps or 0) >= (previous.steps or 0):
                    progress[allocation.job_id] = report
            else:
                endings.append((node, allocation, report))
    _flush_started(started)
    _apply_progress(progress, now)
    _time_out_limit_stops(endings)
    # (a node saying goodbye in the same request goes down at once: no draining on the way)
    _shutting_down({n.pk: n for n, _, r in endings
                    if r.message.strip() == AGENT_SHUTDOWN_STOP and n.pk not in leaving}.values(), now)
    # The common ending, a single-node job exiting (by itself or as asked), is settled for the
    # whole batch at once; gang members and lost work go one by one.
    alone = [(n, a, r) for n, a, r in endings if r.kind == "exited" and a.node_count == 1]
    if alone:
        if transitions.complete_releases(
            [(a.pk, a.generation, r.exit_code, r.at) for _, a, r in alone],
            actor_of={a.pk: actor_for(n) for n, a, _ in alone},
            said_of={a.pk: said for _, a, r in alone if (said := owner_reads(r))},
        ):
            _after_release()
    for node, allocation, report in endings:
        if report.kind == "exited" and allocation.node_count == 1:
            continue
        if report.kind == "exited":
            _member_gone(allocation.pk, allocation.generation, node, exit_code=report.exit_code, at=report.at,
                         actor=actor_for(node), said=owner_reads(report))
        else:
            _work_lost(allocation, node, report, actor=actor_for(node))
    _store_samples(samples, held)
    return {pk: sorted(generations) for pk, generations in stale.items()}


def _not_before_bind(report: Report, bound: datetime) -> Report:
    """`report` with its instants (`at`, a sample's `started_at`) no earlier than its allocation's
    bind: nothing of a run happens before it is bound, whatever the agent's clock says. (Until
    5 Dec a sample from 1970, a clock without its real-time source, was stored whole: 56 years of
    a GPU, cut by the next accounting run into ~500,000 hourly rows; a start of 1970 put the run's
    runtime limit long past.) `last_checkpoint_at` is the job's, and may precede this run."""
    if report.at >= bound and (report.started_at is None or report.started_at >= bound):
        return report
    return replace(report, at=max(report.at, bound),
                   started_at=None if report.started_at is None else max(report.started_at, bound))


def _shutting_down(nodes: Iterable[Node], now: datetime) -> None:
    """A ready node whose agent says it shuts down (`shutting_down`, sent from its first contact
    after SIGTERM), or reports a job it stopped to shut down (`stopped: shutdown`, an agent of
    before 4 Dec), is draining until its goodbye: no new work goes there while the agent stops
    the rest, its idle GPUs included. Until
    4 Dec it stayed ready, and each cycle bound a job on the GPUs just freed, which the agent
    then refused (or, before that, ran into its shutdown): one job was requeued nine times in
    the 20 s a slow job took to stop. The operator's wish (`unschedulable`) is untouched: the
    node returns ready when its agent registers again, as it would have."""
    from controlplane.services import reconcile

    for node in nodes:
        with transaction.atomic():
            # The lease row first, as a cordon takes it: a cycle's commit binding onto the node now
            # is done before (its job is then one the agent stops), or finds the node draining and
            # leaves the bind out (until 5 Dec it could commit after, and the agent refused it).
            reconcile.lock_scheduler_lease()
            if Node.objects.filter(pk=node.pk, state=NodeState.READY).update(state=NodeState.DRAINING):
                node.state = NodeState.DRAINING
                transitions.record_event(
                    EventKind.NODE_STATE, actor_for(node), node=node, at=now, reason="AgentShuttingDown",
                    message=f"{node.name}: ready → draining, its agent is stopping its jobs to shut down; no new "
                    "work goes there, and it goes down once they have stopped",
                    data={"from": NodeState.READY.value, "to": NodeState.DRAINING.value},
                )


def _flush_started(started: list[tuple[Node, Allocation, Report]]) -> None:
    """Mark processes started: an Event per node, and the allocation's `started_at` once every
    node of the gang has reported (allocations carry `node_count`).

    One transaction, the allocations locked first (as every transition takes them) and read
    again under the lock: the events and `started_at` are written together or not at all, and
    a report sent again (the agent resends what got no reply) or racing its twin adds nothing.
    Until 5 Dec each statement committed on its own: a failure between them left the event
    without `started_at`, and the resend then wrote a single-node run's event twice, or a
    gang's last member took its own event for a resend and `started_at` was never written."""
    # A single-node allocation already started needs nothing; a gang's members are deduplicated
    # by their per-node events.
    started = [(n, a, r) for n, a, r in started if a.node_count > 1 or a.started_at is None]
    if not started:
        return
    with transaction.atomic():
        begun = dict(
            Allocation.objects.select_for_update(no_key=True).filter(pk__in={a.pk for _, a, _ in started})
            .order_by("pk").values_list("pk", "started_at")
        )
        started = [(n, a, r) for n, a, r in started
                   if a.pk in begun and (a.node_count > 1 or begun[a.pk] is None)]
        _write_started(started)


def _write_started(started: list[tuple[Node, Allocation, Report]]) -> None:
    """The writes of :func:`_flush_started`, its allocations locked and read again."""
    if not started:
        return
    multi = {a.pk for _, a, _ in started if a.node_count > 1}
    already = set(
        Event.objects.filter(kind=EventKind.JOB_STARTED, allocation_id__in=multi).values_list("allocation_id", "node_id")
    ) if multi else set()
    seen: set[tuple[int, int]] = set()
    fresh = []
    for node, allocation, report in started:
        key = (allocation.pk, node.pk)
        if key not in already and key not in seen:
            seen.add(key)
            fresh.append((node, allocation, report))
    if fresh:
        Event.objects.bulk_create([
            Event(**transitions.event_fields(
                EventKind.JOB_STARTED, actor_for(n), job=a.job, allocation=a, node=n, at=r.at, reason="Started",
                message=f"Generation {a.generation} started on {n.name}", data={"generation": a.generation},
            ))
            for n, a, r in fresh
        ])
    elif not multi:
        return
    started_nodes = dict(
        Event.objects.filter(kind=EventKind.JOB_STARTED, allocation_id__in=multi)
        .values("allocation_id")
        .annotate(n=Count("node_id", distinct=True))
        .values_list("allocation_id", "n")
    ) if multi else {}
    # Every report, a resend's too: a gang whose members' events were all written before (by a
    # contact that failed before its `started_at`, until 5 Dec) starts now.
    complete: dict[int, datetime] = {}
    for _, allocation, report in started:
        if allocation.node_count <= started_nodes.get(allocation.pk, 1):
            complete[allocation.pk] = max(report.at, complete.get(allocation.pk, report.at))
    if complete:
        # Compare-and-set per row (only the first start counts): on PostgreSQL one statement
        # for the whole batch, elsewhere one pipelined statement per row.
        table = Allocation._meta.db_table
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                ids = sorted(complete)
                cursor.execute(
                    f"UPDATE {table} AS a SET started_at = v.at FROM unnest(%s::bigint[], %s::timestamptz[]) "
                    "AS v(id, at) WHERE a.id = v.id AND a.started_at IS NULL",
                    [ids, [complete[pk] for pk in ids]],
                )
            else:
                cursor.executemany(
                    f"UPDATE {table} SET started_at = %s WHERE id = %s AND started_at IS NULL",
                    [(connection.ops.adapt_datetimefield_value(at), pk) for pk, at in complete.items()],
                )


def _apply_progress(progress: dict[int, Report], now: datetime) -> None:
    """Progress only moves forward: a late or repeated report never lowers it."""
    for job_id, report in progress.items():
        values: dict[str, Any] = {"last_progress_at": now}
        if report.steps is not None:
            values["steps"] = Greatest(F("steps"), Value(report.steps))
        if report.useful_tokens is not None:
            values["useful_tokens"] = Greatest(F("useful_tokens"), Value(report.useful_tokens))
        if report.last_checkpoint_at is not None:
            values["last_checkpoint_at"] = Greatest(
                Coalesce(F("last_checkpoint_at"), Value(report.last_checkpoint_at)), Value(report.last_checkpoint_at)
            )
        Job.objects.filter(pk=job_id).update(**values)


def _store_samples(samples: list[tuple[Node, Allocation, Report]], gpus_here: dict[tuple[int, int], int]) -> None:
    """Usage samples → UsageSample rows. A sample reaching past the allocation's end is cut at
    the end: nobody pays for time after a fence, even if a partitioned process ran on.
    `gpus_here` maps (allocation id, node id) to the allocation's GPUs on that node."""
    if not samples:
        return
    rows = []
    for node, allocation, report in samples:
        begin = report.started_at
        end = report.at
        if allocation.state not in LIVE_ALLOCATION_STATES and allocation.released_at is not None:
            end = min(end, allocation.released_at)
        if begin is None or end <= begin:
            continue
        rows.append(
            UsageSample(
                allocation=allocation,
                job_id=allocation.job_id,
                node=node,
                started_at=begin,
                ended_at=end,
                gpus=gpus_here.get((allocation.pk, node.pk), 0),
                gpu_activity=min(1.0, max(0.0, float(report.gpu_activity or 0.0))),
                steps=max(0, int(report.steps or 0)),
                useful_tokens=max(0, int(report.useful_tokens or 0)),
            )
        )
    if not rows:
        return
    # A resent batch (its reply was lost) must not count twice: one sample per allocation,
    # node and interval start.
    if connection.vendor == "postgresql":
        # One statement: the rows not stored yet are inserted (no read, no model instances).
        table = UsageSample._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (allocation_id, job_id, node_id, started_at, ended_at, gpus, gpu_activity, "
                "steps, useful_tokens) SELECT DISTINCT ON (v.a, v.n, v.s) v.a, v.j, v.n, v.s, v.e, v.g, v.act, v.st, "
                "v.tok FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::timestamptz[], %s::timestamptz[], "
                "%s::integer[], %s::float8[], %s::bigint[], %s::bigint[]) AS v(a, j, n, s, e, g, act, st, tok) "
                f"WHERE NOT EXISTS (SELECT 1 FROM {table} u WHERE u.allocation_id = v.a AND u.node_id = v.n "
                "AND u.started_at = v.s)",
                [[r.allocation_id for r in rows], [r.job_id for r in rows], [r.node_id for r in rows],
                 [r.started_at for r in rows], [r.ended_at for r in rows], [r.gpus for r in rows],
                 [r.gpu_activity for r in rows], [r.steps for r in rows], [r.useful_tokens for r in rows]],
            )
        return
    seen = set(
        UsageSample.objects.filter(
            node_id__in={r.node_id for r in rows}, allocation_id__in={r.allocation_id for r in rows},
            started_at__in={r.started_at for r in rows},
        ).values_list("allocation_id", "node_id", "started_at")
    )
    rows = [r for r in rows if (r.allocation_id, r.node_id, r.started_at) not in seen]
    UsageSample.objects.bulk_create(rows)


def _member_gone(
    allocation_id: int, generation: int, node: Node, *, exit_code: int | None, at: datetime, actor: str,
    said: str = "",
) -> None:
    """This node's processes of the allocation are gone: the job's own exit, or a confirmed stop.
    ``said``: what the agent said of it that the job's owner should read (`owner_reads`).

    Steps:
      1. lock the allocation; if it is no longer live under this generation, nothing to do;
      2. a single-node allocation is settled at once (transitions.complete_release);
      3. in a gang across nodes, this node's GPUs stop being live now (confirmed clean) and an
         Event records the member's exit; if the gang was active, the rest of it is told to
         stop (a gang runs whole or not at all), with the reason that decides the job's fate;
      4. once no node holds a live GPU of it, the allocation is settled with the exit code of
         the member that ended the gang.
    """
    with transaction.atomic():
        allocation = (
            # Lock the allocation row only: FOR UPDATE on the joined job and priority class
            # rows would make every report of the fleet queue on one priority-class row.
            Allocation.objects.select_for_update(no_key=True, of=("self",))
            .select_related("job__priority_class")
            .filter(pk=allocation_id, generation=generation)
            .first()
        )
        if allocation is None or allocation.state not in LIVE_ALLOCATION_STATES:
            return
        nodes = set(AllocationGpu.objects.filter(allocation=allocation).values_list("node_id", flat=True))
        if nodes == {node.pk}:
            transitions.complete_release(allocation.pk, exit_code=exit_code, at=at, actor=actor, said=said)
            _after_release()
            return
        exited = (f" (exit code {exit_codes.said(exit_code)})" if exit_code is not None else "") + (
            f": {said}" if said else "")
        changed = AllocationGpu.objects.filter(allocation=allocation, node=node, live=True).update(live=False)
        if changed:
            transitions.record_event(
                EventKind.ALLOCATION_RELEASED, actor, job=allocation.job, allocation=allocation, node=node, at=at,
                reason="MemberExited",
                message=f"Generation {allocation.generation}: the member on {node.name} is gone{exited}"
                + f"; its {counted(changed, 'GPU')} {verb(changed, 'is', 'are')} free",
                # stopping: gone as the stop asked (its GPUs' work since the checkpoint is lost
                # with the rest, transitions.held_until_stop), not on its own before it.
                # `nodes` as every allocation event says where (one node here); `node` kept for
                # readers of events written before 30 Nov.
                data={"generation": allocation.generation, "exit_code": exit_code, "node": node.name,
                      "nodes": [node.name], "gpus": changed, "stopping": allocation.state == AllocationState.RELEASING,
                      **({"agent_said": said} if said else {})},
            )
            _after_release()
        if not AllocationGpu.objects.filter(allocation=allocation, live=True).exists():
            code, words = exit_code, said
            if allocation.release_reason in (RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED):
                # the gang ended because a member did: its code and its agent's words are the job's
                code, words = transitions.first_member_exit(allocation, default=(exit_code, said))
            transitions.complete_release(allocation.pk, exit_code=code, at=at, actor=actor, said=words)
            return
        if allocation.state == AllocationState.ACTIVE:
            failed = exit_code != 0
            grace = allocation.job.priority_class.grace_period_s
            transitions.signal_stop(
                allocation.pk, allocation.generation,
                reason=RELEASE_GANG_MEMBER_FAILED if failed else RELEASE_GANG_MEMBER_EXITED,
                grace_period_s=grace, at=at, actor=actor,
                message=f"The gang member on {node.name} "
                + (f"exited with code {exit_codes.said(exit_code)}" if exit_code is not None else "is gone")
                + (f" ({said})" if said else "") + f"; the rest of the gang gets {grace} s to exit",
            )


def _work_lost(allocation: Allocation, node: Node, report: Report, *, actor: str) -> None:
    """The agent stopped the processes for a reason that is not the job's own (its lease ran
    out, it shuts down, it refused a stale generation). A releasing allocation just counts as
    stopped; an active one is fenced, its job requeued whole with the lost work recorded."""
    from controlplane.services import reconcile

    if allocation.state == AllocationState.RELEASING:
        _member_gone(allocation.pk, allocation.generation, node, exit_code=report.exit_code, at=report.at, actor=actor)
        return
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        fenced = transitions.fence_allocation(
            allocation.pk, lease=lease, at=report.at, actor=actor, reason=_why_work_was_lost(report),
        )
    if fenced:
        _after_release()


#: How `qm-agent` words a member it stopped itself when shutting down (SIGTERM to the agent).
AGENT_SHUTDOWN_STOP = "stopped: shutdown"
#: ... and one it stopped at the job's runtime limit, no stop having come from the control plane.
AGENT_LIMIT_STOP = "stopped: limit"
#: ... and a run it could not launch (exit code 126, the reason after the colon: a bad env name,
#: a rank's output file that could not be opened, ...).
AGENT_LAUNCH_FAILED = "launch failed:"


def owner_reads(report: Report) -> str:
    """What the agent said of an exit that the job's owner should read in its history, "" when
    nothing: why its run could not be launched. (Before 5 Dec only the agent's log said it; the
    job read "failed with exit code 126" and nothing more.) The agent's other words (stopped:
    release, limit, shutdown) are the control plane's own business, told by its own events."""
    message = report.message.strip()
    return message if report.kind == "exited" and message.startswith(AGENT_LAUNCH_FAILED) else ""


def _time_out_limit_stops(endings: Sequence[tuple[Node, Allocation, Report]]) -> None:
    """An exit the agent caused at the job's runtime limit (its fallback when no stop came: the
    loop down, the control plane unreachable) ends the job as the control plane's own stop at the
    limit does: the allocation is marked stopping for `RuntimeLimitExceeded` (a `job.timed_out`
    event naming the node) before the exit settles it, so the job ends timed out, not succeeded
    or failed by the exit code its SIGTERM handler chose. Only once the limit has passed by the
    control plane's own record (the allocation's start and the job's limit): before it, the
    exit is the job's own, as any other."""
    for node, allocation, report in endings:
        if report.kind != "exited" or report.message.strip() != AGENT_LIMIT_STOP:
            continue
        if allocation.state != AllocationState.ACTIVE or allocation.started_at is None:
            continue
        limit = Job.objects.filter(pk=allocation.job_id).values_list("runtime_limit_s", flat=True).first()
        if not limit or report.at < allocation.started_at + timedelta(seconds=limit):
            continue
        ran = (report.at - allocation.started_at).total_seconds()
        with transaction.atomic():
            if transitions.signal_stop(
                allocation.pk, allocation.generation, reason=transitions.RELEASE_RUNTIME_LIMIT, grace_period_s=0.0,
                at=report.at, actor=actor_for(node),
                message=f"Job {allocation.job_id} reached its runtime limit of {span_words(limit)} (started "
                f"{span_words(ran)} ago); no stop came from the control plane, so the agent on {node.name} stopped it",
            ):
                allocation.state = AllocationState.RELEASING


def _why_work_was_lost(report: Report) -> str:
    """The fence's reason: refused by the agent, stopped because the agent shut down (its job's
    history then says so, as when a node goes away — not that the processes were lost), or lost."""
    from controlplane.services import reconcile

    if report.message.strip() == AGENT_SHUTDOWN_STOP:
        # stopped, or refused before it started, because the agent shuts down
        return reconcile.FENCE_NODE_UNAVAILABLE
    if report.kind == "refused":
        return FENCE_REFUSED
    return FENCE_WORK_LOST


def _after_release() -> None:
    transaction.on_commit(_request_cycle)


def _request_cycle() -> None:
    triggers.request_cycle()


# --------------------------------------------------------------------------- desired state


def desired_allocations(node: Node, now: datetime) -> list[dict[str, Any]]:
    return desired_allocations_many([node], now).get(node.pk, [])


def desired_allocations_many(nodes: Sequence[Node], now: datetime) -> dict[int, list[dict[str, Any]]]:
    """Every live allocation holding a live GPU on each node, as its agent needs it: two
    queries whatever the number of nodes.

    Ranks are numbered over the whole gang in (node name, GPU index) order, over all of its
    GPUs, so they never shift while a gang winds down node by node."""
    if not nodes:
        return {}
    names = {n.pk: n.name for n in nodes}
    here = AllocationGpu.objects.filter(node_id__in=list(names), live=True).values("allocation_id")
    # Plain rows, only the columns the agent needs: a heartbeat of a busy fleet builds
    # thousands of these, and model instances with every job column cost several times more.
    allocations = list(
        Allocation.objects.filter(pk__in=here, state__in=LIVE_ALLOCATION_STATES)
        .order_by("generation")
        .values(*_PAYLOAD_COLUMNS)
    )
    if not allocations:
        return {}
    members: dict[int, list[tuple[str, int, bool, str]]] = defaultdict(list)
    live_on: dict[int, set[int]] = defaultdict(set)
    for allocation_id, node_id, node_name, gpu_index, live, role in (
        AllocationGpu.objects.filter(allocation_id__in=[a["id"] for a in allocations])
        .values_list("allocation_id", "node_id", "node__name", "gpu_index", "live", "role")
        .order_by("allocation_id", "node__name", "gpu_index")
    ):
        members[allocation_id].append((node_name, gpu_index, live, role))
        if live and node_id in names:
            live_on[node_id].add(allocation_id)
    out: dict[int, list[dict[str, Any]]] = {}
    for node_id, allocation_ids in live_on.items():
        out[node_id] = [
            _allocation_payload(a, members[a["id"]], names[node_id], now) for a in allocations
            if a["id"] in allocation_ids
        ]
    return out


# --- versions of the desired state
#
# A node's desired state is a function of the live allocations holding its live GPUs: their
# generation, epoch, state, release deadline and reason, the GPUs they hold here, and their
# job's runtime limit (the rest of a payload is fixed when the allocation is bound, but for
# `started_at`, which the agent reported itself and does not read back: a start changes no
# version, so the reply to a start report stays "unchanged"). The
# version is a digest of exactly those columns, read in one plain query, so a heartbeat whose
# agent already holds the current version needs neither the payload queries nor the payloads.
# Fencing is untouched: the generations are in the version, so a fence, a release, a new bind or
# a lease expiry changes it, `stop` is still computed from what the agent says it runs, and a
# node that must register again never gets an "unchanged".

_NO_ALLOCATIONS: tuple[str, tuple[int, ...], bool] = ("", (), False)


def _digest(rows: Iterable[tuple[Any, ...]]) -> str:
    return "v1:" + hashlib.sha1(repr(list(rows)).encode(), usedforsecurity=False).hexdigest()[:20]


def _version_row(generation: int, epoch: int, state: str,
                 release_deadline: datetime | None, release_reason: str | None, gpus: Sequence[int] | str,
                 runtime_limit_s: Any) -> tuple[Any, ...]:
    if isinstance(gpus, str):  # SQLite's group_concat: "0,1,2"
        gpus = [int(g) for g in gpus.split(",")]
    return (int(generation), int(epoch), str(state),
            release_deadline.isoformat() if release_deadline else None, release_reason or "",
            tuple(sorted(int(g) for g in gpus)), None if runtime_limit_s is None else float(runtime_limit_s))


def desired_versions_many(node_ids: Sequence[int]) -> dict[int, tuple[str, tuple[int, ...], bool]]:
    """node id → (version of its desired allocations, their generations, whether one of them is
    releasing), in one query. Nodes with no live allocation map to the empty version."""
    if not node_ids:
        return {}
    gpu = AllocationGpu._meta.db_table
    alloc = Allocation._meta.db_table
    job = Job._meta.db_table
    rows: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    if connection.vendor == "postgresql":
        # One statement text whatever the number of nodes, so PostgreSQL reuses its plan.
        gpus, among, ids = "array_agg(g.gpu_index)", "= ANY(%s)", [list(node_ids)]
    else:  # SQLite, the embedded demo
        gpus, among, ids = "group_concat(g.gpu_index)", f"IN ({', '.join(['%s'] * len(node_ids))})", list(node_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT g.node_id, a.generation, a.epoch, a.state, a.release_deadline, a.release_reason, "
            f"{gpus}, j.runtime_limit_s "
            f"FROM {gpu} g JOIN {alloc} a ON a.id = g.allocation_id JOIN {job} j ON j.id = a.job_id "
            f"WHERE g.node_id {among} AND g.live AND a.state IN (%s, %s) "
            f"GROUP BY g.node_id, a.id, j.runtime_limit_s ORDER BY g.node_id, a.generation",
            [*ids, AllocationState.ACTIVE.value, AllocationState.RELEASING.value],
        )
        for node_id, *row in cursor.fetchall():
            rows[node_id].append(_version_row(*row))
    out: dict[int, tuple[str, tuple[int, ...], bool]] = {}
    for node_id in node_ids:
        mine = rows.get(node_id, [])
        out[node_id] = (_digest(mine), tuple(r[0] for r in mine),
                        any(r[2] == AllocationState.RELEASING.value for r in mine))
    return out


_PAYLOAD_COLUMNS = (
    "id", "generation", "epoch", "state", "started_at", "release_deadline", "release_reason",
    "job_id", "job__team_id", "job__submitter_id", "job__name", "job__command", "job__env", "job__runtime_limit_s",
    "job__checkpoint_interval_s",
)


def _allocation_payload(
    allocation: dict[str, Any], gang: list[tuple[str, int, bool, str]], here: str, now: datetime
) -> dict[str, Any]:
    node_names = sorted({n for n, _, _, _ in gang})
    local = [(rank, gpu) for rank, (n, gpu, live, _) in enumerate(gang) if n == here and live]
    release = None
    if allocation["state"] == AllocationState.RELEASING:
        deadline = allocation["release_deadline"] or now
        release = {
            "reason": allocation["release_reason"],
            "deadline": deadline.isoformat(),
            "grace_remaining_s": max(0.0, round((deadline - now).total_seconds(), 3)),
        }
    return {
        "generation": allocation["generation"],
        "epoch": allocation["epoch"],
        "state": allocation["state"],
        "job": {
            "id": allocation["job_id"],
            "team_id": allocation["job__team_id"],
            "submitter_id": allocation["job__submitter_id"],  # whose uid with `qm-agent --job-user user`
            "name": allocation["job__name"],
            "command": allocation["job__command"],
            "env": allocation["job__env"] or {},
            "runtime_limit_s": allocation["job__runtime_limit_s"],
            "checkpoint_interval_s": allocation["job__checkpoint_interval_s"],
        },
        "gpus": [gpu for _, gpu in local],
        "ranks": [rank for rank, _ in local],
        "world_size": len(gang),
        "nnodes": len(node_names),
        "node_rank": node_names.index(here),
        "master_addr": node_names[0],
        "master_port": master_port(allocation["generation"]),
        "started_at": allocation["started_at"].isoformat() if allocation["started_at"] else None,
        "release": release,
        **_roles_payload(gang, here),
    }


def _roles_payload(gang: list[tuple[str, int, bool, str]], here: str) -> dict[str, Any]:
    """A heterogeneous gang's roles as this node's processes need them, aligned with `gpus`:
    each GPU's role, its rank within the role (numbered like `ranks`, over the role's GPUs of
    the whole gang) and each role's size. Nothing for a plain gang."""
    if not any(role for _, _, _, role in gang):
        return {}
    role_ranks: list[int] = []
    roles: list[str] = []
    sizes: dict[str, int] = defaultdict(int)
    for node, _, live, role in gang:
        if node == here and live:
            roles.append(role)
            role_ranks.append(sizes[role])
        sizes[role] += 1
    return {"roles": roles, "role_ranks": role_ranks, "role_sizes": dict(sizes)}


def master_port(generation: int) -> int:
    """A rendezvous port per allocation: distinct for the few allocations one node hosts."""
    return 20000 + generation % 20000


def parse_running(values: Iterable[Any]) -> list[int]:
    return sorted({int(v) for v in values})
