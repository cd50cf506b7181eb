"""Maintenance windows: operators take nodes out of service for a time, ahead of time.

Slurm's `scontrol create reservation flags=maint nodes=... starttime=... duration=...`. A window
names nodes (or a pool, expanded to its nodes when the window is written), a start, an end and a
reason. The scheduler (scheduler_core) starts a job on those nodes only if its run, from its
start to its runtime limit, does not overlap the window, so the nodes are empty when maintenance
begins without draining them by hand hours ahead; a job that could only run there waits with
the reason `MaintenanceWindow`. Running jobs are never stopped for a window: what an operator
must deal with (drain or cancel) is `affected_running_jobs`, the jobs on those nodes that will
still hold GPUs when it starts.

This module checks and writes windows (create, change, cancel: each under a row lock, all or
nothing, with a `config.changed` audit event and an event on each node concerned) and says
who a window affects; each reconcile tick records on its nodes that a window began or ended
(`record_boundaries`). It decides no placement: the snapshot hands every window not ended and not
cancelled to the engine (services/snapshot.py).

Rules, each refusal naming its field: at least one node; every node exists and is not
retired; a pool exists (its retired nodes are left out); the reason is one line of at most 200
characters; the start now or later (START_GRACE earlier is taken: clock skew, the time to fill a
form), the end after the start, in the future, and at most QM_MAINTENANCE_MAX_S after the start
(14 days); no node in two windows at once: a window may not overlap, on any of its nodes,
another not cancelled and not ended (back to back is fine; extend or change that one instead).
The overlap is checked again under row locks on the nodes, taken in id order, so two writers
naming a node one after the other, never both. A window that has ended, or was cancelled, is
history: it cannot be changed (409). One that has begun keeps its start (the engine has kept the
nodes clear for it); its end may move, to a time still ahead. An upcoming window's start may
not move into the past.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from controlplane.choices import LIVE_ALLOCATION_STATES, AllocationState, EventKind, NodeState
from controlplane.models import AllocationGpu, Event, MaintenanceWindow, Node
from controlplane.models.events import actor_name
from controlplane.models.maintenance import MaintenanceWindowState
from controlplane.services.access import Access
from controlplane.services.plain_text import hidden_character_problem
from controlplane.services.transitions import event_fields
from scheduler_core.sentences import counted

log = structlog.get_logger(__name__)

REASON_MAX_LENGTH = 200
#: Nodes one window may name (a pool is expanded to its nodes): far beyond a fleet's pool.
MAX_NODES = 10_000
#: How far before now a new start is still taken as "now": clock skew between the admin's
#: machine and the server, and the minute a form takes to fill (the pages type minutes).
START_GRACE = timedelta(minutes=5)
#: The fields of a change that move a window in time or across nodes: an overlap is checked.
EXTENT = frozenset({"nodes", "pool", "start_at", "end_at", "duration_s"})


def max_length_s() -> int:
    """The longest a window may last (QM_MAINTENANCE_MAX_S, 14 days by default)."""
    return int(settings.QM.get("MAINTENANCE_MAX_S", 14 * 86400))


class Refused(Exception):
    """The input is wrong: `errors` maps each field at fault to what is wrong with it (a 400)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


class Conflicted(Exception):
    """The window's state does not allow the change (ended, cancelled): a 409."""


#: What a refusal's log line repeats of the request: the window's own fields, nothing else.
_GIVEN_FIELDS = ("nodes", "pool", "start_at", "end_at", "duration_s", "reason")


def _given_said(given: Any) -> dict[str, Any]:
    """The fields of a request as a log line carries them: times in UTC ISO 8601, text cut at 200
    characters, at most 50 node names (a request refused for its shape may hold anything)."""
    if not isinstance(given, dict):
        return {"body": str(given)[:200]}
    said: dict[str, Any] = {}
    for name in _GIVEN_FIELDS:
        if name not in given:
            continue
        value = given[name]
        if isinstance(value, datetime):
            said[name] = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
        elif isinstance(value, list | tuple):
            said[name] = [str(v)[:128] for v in value[:50]]
        elif value is None or isinstance(value, bool | int | float):
            said[name] = value
        else:
            said[name] = str(value)[:200]
    return said


def log_refused(action: str, user: AbstractBaseUser, problem: Refused | Conflicted | dict[str, str], *,
                window: int | None = None, given: Any = None) -> None:
    """One structured line, `maintenance_window_refused`, for a request to create, change or cancel
    a window that was refused (400: the fields at fault and what was said of each; 409: a window
    that ended or was cancelled), with who asked and what was given. Not an Event: no refused
    admin action is one (events record what changed), and a refusal inside a caller's
    transaction (the admin's save) would be rolled back with it."""
    if isinstance(problem, Conflicted):
        status, errors = 409, {"detail": str(problem)}
    else:
        status = 400
        errors = dict(problem.errors if isinstance(problem, Refused) else problem)
    log.info("maintenance_window_refused", action=action, window=window, user=user.get_username(), status=status,
             fields=sorted(k for k in errors if k not in ("detail", "non_field_errors")), errors=errors,
             given=_given_said(given or {}))



def when(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def span(seconds: float) -> str:
    """A window's length as typed: 4 h, 90 min, 2 d 6 h."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "", f"{minutes} min" if minutes else ""]
    said = " ".join(p for p in parts if p)
    return said or f"{seconds} s"


# ------------------------------------------------------------------------------ checking


@dataclass
class Checked:
    nodes: list[Node]
    start_at: datetime
    end_at: datetime
    reason: str


def _reason_problem(reason: Any) -> str | None:
    if not isinstance(reason, str) or not reason.strip():
        return "give what the maintenance is, in a few words (e.g. \"firmware upgrade\")"
    text = reason.strip()
    hidden = hidden_character_problem(text, offset=len(reason) - len(reason.lstrip()))
    if hidden:
        return hidden
    if len(text) > REASON_MAX_LENGTH:
        return f"{len(text)} characters: at most {REASON_MAX_LENGTH}"
    return None


def _pool_names() -> list[str]:
    return sorted(set(Node.objects.exclude(state=NodeState.RETIRED).values_list("pool", flat=True)))


def resolve_nodes(names: Sequence[str] | None, pool: str | None, errors: dict[str, str]) -> list[Node]:
    """The nodes named, plus those of `pool` (its retired ones left out), each once, by name.
    Unknown or retired names, an unknown pool: said in `errors` under `nodes` or `pool`."""
    found: dict[str, Node] = {}
    if names:
        wanted = list(dict.fromkeys(str(n).strip() for n in names if str(n).strip()))
        if len(wanted) > MAX_NODES:
            errors["nodes"] = f"{len(wanted)} nodes: a window names at most {MAX_NODES:,}"
            return []
        rows = {n.name: n for n in Node.objects.filter(name__in=[w for w in wanted if "\x00" not in w])}
        unknown = [w for w in wanted if w not in rows]
        retired = [w for w in wanted if w in rows and rows[w].state == NodeState.RETIRED]
        if unknown:
            errors["nodes"] = (f"no node named {', '.join(repr(u[:128]) for u in unknown[:5])}"
                               + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
                               + " (`qm nodes` lists them)")
        elif retired:
            errors["nodes"] = (f"{', '.join(retired[:5])} {'is' if len(retired) == 1 else 'are'} retired: out of the "
                               "fleet, it takes no work and needs no maintenance window (return it to service first)")
        found.update({w: rows[w] for w in wanted if w in rows})
    elif names is not None and not pool:
        errors["nodes"] = "give at least one node (or a pool)"
    if pool is not None:
        pool = str(pool).strip()
        in_pool = list(Node.objects.filter(pool=pool).exclude(state=NodeState.RETIRED)) if "\x00" not in pool else []
        if not pool:
            errors["pool"] = "give a pool's name, or leave pool out"
        elif not in_pool:
            known = _pool_names()
            errors["pool"] = (f"no pool named '{pool[:64]}' has a node in the fleet: pools are "
                              + (", ".join(known) if known else "none yet"))
        for node in in_pool:
            found.setdefault(node.name, node)
    if not found and "nodes" not in errors and "pool" not in errors:
        errors["nodes"] = "give at least one node, or a pool"
    return sorted(found.values(), key=lambda n: n.name)


def _aware(at: datetime) -> datetime:
    return timezone.make_aware(at, UTC) if timezone.is_naive(at) else at


def _check_times(start_at: datetime | None, end_at: datetime | None, duration_s: int | None,
                 now: datetime, errors: dict[str, str], *, end_field: str,
                 new_start: bool = True) -> tuple[datetime | None, datetime | None]:
    """The window's start and end (from `end_at` or `duration_s`), each problem in `errors`.
    `new_start`: the start is being set (a new window, or an upcoming one moved), so it may not
    be past (START_GRACE is taken)."""
    if start_at is None:
        errors["start_at"] = "give when the maintenance begins"
        return None, None
    start_at = _aware(start_at)
    if new_start and start_at < now - START_GRACE:
        errors["start_at"] = (f"it starts at {when(start_at)}, before now ({when(now)}): a window starts now or "
                              f"later (up to {span(START_GRACE.total_seconds())} earlier is taken, for clock skew); "
                              "to take nodes out at once, start it now")
    if end_at is not None and duration_s is not None:
        errors["end_at"] = "give the end (end_at) or the length (duration_s), not both"
        return start_at, None
    if duration_s is not None:
        if duration_s <= 0:
            errors["duration_s"] = f"{duration_s} s: a window lasts at least a second"
            return start_at, None
        if duration_s > max_length_s():
            # said as the rule, in days: not the calendar's end, in seconds nobody typed
            errors["duration_s"] = (f"{span(duration_s)} long: a window lasts at most {span(max_length_s())} "
                                    "(QM_MAINTENANCE_MAX_S); schedule a longer maintenance as back-to-back windows")
            return start_at, None
        try:
            end_at = start_at + timedelta(seconds=duration_s)
        except OverflowError:
            errors["duration_s"] = f"{duration_s} s after {when(start_at)} is beyond the calendar (year 9999)"
            return start_at, None
    if end_at is None:
        errors["end_at"] = "give when the maintenance ends (end_at), or how long it lasts (duration_s)"
        return start_at, None
    end_at = _aware(end_at)
    longest = max_length_s()
    if end_at <= start_at:
        errors[end_field] = (f"it would end at {when(end_at)}, not after its start at {when(start_at)}: "
                             "a window ends after it begins")
    elif end_at <= now:
        errors[end_field] = (f"it would end at {when(end_at)}, which is past (it is {when(now)}): a window "
                             "ends in the future")
    elif (end_at - start_at).total_seconds() > longest:
        errors[end_field] = (f"{span((end_at - start_at).total_seconds())} long: a window lasts at most "
                             f"{span(longest)} (QM_MAINTENANCE_MAX_S); schedule a longer maintenance as back-to-back windows")
    return start_at, end_at


def _window_said(window: MaintenanceWindow) -> str:
    return (f"maintenance window {window.pk} ({window.reason}, from {when(window.start_at)} to {when(window.end_at)}, "
            f"{span((window.end_at - window.start_at).total_seconds())})")


def overlap_problem(nodes: Sequence[Node], start_at: datetime, end_at: datetime, now: datetime, *,
                    other_than: int | None = None) -> str | None:
    """What is wrong if a window on `nodes` from `start_at` to `end_at` would overlap another
    not cancelled and not ended (`other_than`: the window being changed) on any of them, or
    None. One ending when this one starts (or starting when it ends) does not overlap. One query."""
    ids = [n.pk for n in nodes]
    if not ids:
        return None
    others = (MaintenanceWindow.objects.filter(cancelled_at__isnull=True, start_at__lt=end_at,
                                               end_at__gt=max(now, start_at), nodes__in=ids)
              .distinct().order_by("start_at", "id").prefetch_related("nodes"))
    if other_than is not None:
        others = others.exclude(pk=other_than)
    clashes = list(others[:4])
    if not clashes:
        return None
    wanted = {n.pk for n in nodes}
    said = []
    for other in clashes[:3]:
        shared = sorted(n.name for n in other.nodes.all() if n.pk in wanted)
        said.append(f"{_nodes_said(shared)} {'is' if len(shared) == 1 else 'are'} already in {_window_said(other)}")
    more = others.count() - 3 if len(clashes) > 3 else 0
    first = clashes[0].pk
    return ("; ".join(said) + (f"; and {counted(more, 'other window')}" if more else "")
            + f": windows on the same node cannot overlap; extend or change window {first} instead "
            f"(`qm maint edit {first}`, PATCH maintenance-windows/{first}/), or choose a time outside it")


def _lock_nodes(nodes: Sequence[Node]) -> None:
    """Row locks on `nodes`, taken in id order (two writers naming some of the same nodes take
    them in the same order: no deadlock). A concurrent create or change naming any of them waits
    for this transaction to end, then its overlap check sees this window."""
    list(Node.objects.select_for_update(no_key=True).filter(pk__in=[n.pk for n in nodes])
         .order_by("pk").values_list("pk", flat=True))


def _refuse_overlap(checked: Checked, now: datetime, other_than: int | None) -> None:
    """Under the nodes' row locks: Refused on `nodes` if the window would overlap another.

    The scheduler lease row is locked first (lock order lease → node, as the cycle's commit,
    reconcile and the node actions): a cycle committing binds meanwhile either commits before
    this write (its jobs are running when the window's answer names the jobs it affects) or
    after it (and leaves out its binds onto the window's nodes, planned without the window:
    snapshot.nodes_of_windows_written_since). Before, a window written between a cycle's read
    and its commit let the plan start a job there that would run into it."""
    from controlplane.services.reconcile import lock_scheduler_lease

    lock_scheduler_lease()
    _lock_nodes(checked.nodes)
    problem = overlap_problem(checked.nodes, checked.start_at, checked.end_at, now, other_than=other_than)
    if problem:
        raise Refused({"nodes": problem})


# ------------------------------------------------------------------------------ records


def window_record(window: MaintenanceWindow, node_names: Iterable[str] | None = None) -> dict[str, Any]:
    """What the audit trail keeps of a window: its nodes by name, times as ISO text in UTC, who
    created and cancelled it by username (None once their account is deleted: `users_deleted`)."""
    names = sorted(node_names if node_names is not None else (n.name for n in window.nodes.all()))
    return {
        "id": window.pk,
        "nodes": names,
        "start_at": window.start_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "end_at": window.end_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "reason": window.reason,
        "cancelled_at": (window.cancelled_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
                         if window.cancelled_at else None),
        "created_by": window.created_by.get_username() if window.created_by_id else None,
        "cancelled_by": window.cancelled_by.get_username() if window.cancelled_by_id else None,
    }


def _nodes_said(names: Sequence[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _times_said(record: dict[str, Any]) -> str:
    start = datetime.fromisoformat(record["start_at"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(record["end_at"].replace("Z", "+00:00"))
    return f"from {when(start)} to {when(end)} ({span((end - start).total_seconds())})"


def _changes_said(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    said = []
    if before["start_at"] != after["start_at"] or before["end_at"] != after["end_at"]:
        said.append(f"{_times_said(before)} → {_times_said(after)}")
    added = sorted(set(after["nodes"]) - set(before["nodes"]))
    removed = sorted(set(before["nodes"]) - set(after["nodes"]))
    if added:
        said.append(f"nodes added: {_nodes_said(added)}")
    if removed:
        said.append(f"nodes removed: {_nodes_said(removed)}")
    if before["reason"] != after["reason"]:
        said.append(f"reason '{before['reason']}' → '{after['reason']}'")
    return said


def _record(window: MaintenanceWindow, verb: str, before: dict[str, Any] | None, after: dict[str, Any],
            actor: str, at: datetime, why: str = "") -> list[Event]:
    """One `config.changed` event for the window (reason MaintenanceWindowCreated, ...Changed or
    ...Cancelled, with the record before and after), and one on each node it concerns (added,
    kept, or removed by the change): the node's page lists them. Nothing for a change that
    changed nothing. ``why``: what changed it, when not a change of the window itself."""
    label = f"Maintenance window {window.pk}"
    if verb == "created":
        message = f"{label} created: {_nodes_said(after['nodes'])} {_times_said(after)}: {after['reason']}"
    elif verb == "cancelled":
        message = f"{label} cancelled ({_nodes_said(after['nodes'])} {_times_said(after)}: {after['reason']})"
    else:
        assert before is not None
        said = _changes_said(before, after)
        if not said:
            return []
        message = f"{label} changed: {'; '.join(said)}{why}"
    who = actor_name(actor)
    rows = [Event(**event_fields(
        EventKind.CONFIG_CHANGED, actor, reason=f"MaintenanceWindow{verb.title()}", message=message, at=at,
        data={"model": "maintenancewindow", "before": before, "after": after}))]
    reasons = {"created": "MaintenanceScheduled", "changed": "MaintenanceRescheduled",
               "cancelled": "MaintenanceCancelled"}
    concerned = sorted(set(after["nodes"]) | set((before or {}).get("nodes", ())))
    ids = dict(Node.objects.filter(name__in=concerned).values_list("name", "pk"))
    for name in concerned:
        if name not in ids:
            continue
        if verb == "changed" and name not in after["nodes"]:
            reason, words = "MaintenanceRemoved", f"taken out of maintenance window {window.pk} by {who}"
        elif verb == "changed" and before is not None and name not in before["nodes"]:
            reason, words = "MaintenanceScheduled", (f"added to maintenance window {window.pk} by {who}: "
                                                     f"{_times_said(after)}: {after['reason']}")
        elif verb == "cancelled":
            reason, words = reasons[verb], f"maintenance window {window.pk} cancelled by {who}"
        else:
            reason, words = reasons[verb], (f"maintenance window {window.pk} {_times_said(after)}: "
                                            f"{after['reason']} ({verb} by {who})")
        fields = event_fields(EventKind.CONFIG_CHANGED, actor, reason=reason, message=f"{name}: {words}", at=at,
                              data={"model": "maintenancewindow", "window": window.pk, "node": name})
        fields["node_id"] = ids[name]
        rows.append(Event(**fields))
    return Event.objects.bulk_create(rows)


def node_deleted(node: Node, actor: str) -> None:
    """Before ``node`` is deleted (services/config_audit.py): each window it is in loses it, the
    many-to-many rows going with the node and no signal saying so; recorded as the window's
    change "(node h100-0 deleted)", so the trail no longer reads the window as covering it."""
    at = timezone.now()
    for window in (MaintenanceWindow.objects.filter(nodes=node).select_related("created_by", "cancelled_by")
                   .prefetch_related("nodes").order_by("pk")):
        before = window_record(window)
        after = {**before, "nodes": [name for name in before["nodes"] if name != node.name]}
        _record(window, "changed", before, after, actor, at, why=f" (node {node.name} deleted)")


def users_deleted(users: Sequence[Any], actor: str, why: str, data: dict[str, Any] | None) -> dict[Any, list[Event]]:
    """Before ``users`` are deleted (services/config_audit.py): each window one of them created
    or cancelled loses them (`created_by`, `cancelled_by` are SET_NULL, the window stays), its
    change recorded by the deletion's ``actor``: "Maintenance window 3 (firmware): its creator
    dora was deleted by boss", the record before and after. A window two of them touched is one
    event for each, each emptying its own. Nothing on its nodes, whose maintenance is unchanged.
    The events, not yet written, by user pk; two queries, whatever the number of users and windows."""
    names = {user.pk: user.get_username() for user in users}
    who, at = actor_name(actor), timezone.now()
    events: dict[Any, list[Event]] = {pk: [] for pk in names}
    for window in (MaintenanceWindow.objects.filter(Q(created_by_id__in=list(names)) | Q(cancelled_by_id__in=list(names)))
                   .select_related("created_by", "cancelled_by").prefetch_related("nodes").order_by("pk")):
        before = window_record(window)
        for pk, name in names.items():
            created, cancelled = window.created_by_id == pk, window.cancelled_by_id == pk
            if not (created or cancelled):
                continue
            after = {**before, **({"created_by": None} if created else {}),
                     **({"cancelled_by": None} if cancelled else {})}
            role = "creator and canceller" if created and cancelled else "creator" if created else "canceller"
            events[pk].append(Event(**event_fields(
                EventKind.CONFIG_CHANGED, actor, reason="MaintenanceWindowChanged", at=at,
                message=f"Maintenance window {window.pk} ({window.reason}): its {role} {name} was deleted by {who}{why}",
                data={"model": "maintenancewindow", "before": before, "after": after, "user": name, **(data or {})})))
    return events


def windows_touched_by(users: Sequence[Any]) -> dict[Any, tuple[int, int]]:
    """How many windows each of ``users`` created, and cancelled, by user pk: what their deletion
    leaves without a creator or canceller. One query, whatever their number."""
    pks = [user.pk for user in users]
    counts = {pk: (0, 0) for pk in pks}
    for creator, canceller, n in (
        MaintenanceWindow.objects.filter(Q(created_by_id__in=pks) | Q(cancelled_by_id__in=pks)).order_by()
        .values_list("created_by_id", "cancelled_by_id").annotate(n=Count("pk"))
    ):
        if creator in counts:
            counts[creator] = (counts[creator][0] + n, counts[creator][1])
        if canceller in counts:
            counts[canceller] = (counts[canceller][0], counts[canceller][1] + n)
    return counts


def windows_left(node: Node) -> list[str]:
    """One line per window ``node`` is in, for what deleting it answers."""
    lines = []
    for window in MaintenanceWindow.objects.filter(nodes=node).prefetch_related("nodes").order_by("pk"):
        rest = sorted(n.name for n in window.nodes.all() if n.pk != node.pk)
        lines.append(f"It leaves maintenance window {window.pk} ({window.reason}), which "
                     + (f"keeps {_nodes_said(rest)}" if rest else "then covers no node"))
    return lines


# ------------------------------------------------------------------------------ writing


def _actor(user: AbstractBaseUser) -> str:
    return f"user:{user.get_username()}"


def check_new(*, start_at: datetime | None, reason: Any, nodes: Sequence[str] | None = None, pool: str | None = None,
              end_at: datetime | None = None, duration_s: int | None = None, now: datetime | None = None,
              overlaps: bool = True) -> Checked:
    """A new window's fields checked whole: its nodes, times and reason, or Refused naming every
    field at fault; then (`overlaps`, once the rest is right) that it overlaps no other window on
    its nodes. The API and the admin's form ask this; `create` too, checking the overlap again
    under the nodes' row locks."""
    now = now or timezone.now()
    errors: dict[str, str] = {}
    problem = _reason_problem(reason)
    if problem:
        errors["reason"] = problem
    chosen = resolve_nodes(nodes if nodes is not None else ([] if pool is None else None), pool, errors)
    start_at, end_at = _check_times(start_at, end_at, duration_s, now, errors,
                                    end_field="duration_s" if duration_s is not None and end_at is None else "end_at")
    if errors:
        raise Refused(errors)
    assert start_at is not None and end_at is not None
    problem = overlap_problem(chosen, start_at, end_at, now) if overlaps else None
    if problem:
        raise Refused({"nodes": problem})
    return Checked(chosen, start_at, end_at, str(reason).strip())


def create(user: AbstractBaseUser, *, start_at: datetime | None, reason: Any, nodes: Sequence[str] | None = None,
           pool: str | None = None, end_at: datetime | None = None, duration_s: int | None = None,
           now: datetime | None = None) -> MaintenanceWindow:
    """A new window, checked whole (Refused naming every field at fault, logged by log_refused)
    and written with its events in one transaction."""
    now = now or timezone.now()
    try:
        checked = check_new(start_at=start_at, reason=reason, nodes=nodes, pool=pool, end_at=end_at,
                            duration_s=duration_s, now=now, overlaps=False)
        with transaction.atomic():
            _refuse_overlap(checked, now, None)
            window = MaintenanceWindow.objects.create(start_at=checked.start_at, end_at=checked.end_at,
                                                      reason=checked.reason, created_by=user, created_at=now)
            window.nodes.set(checked.nodes)
            after = window_record(window, [n.name for n in checked.nodes])
            _record(window, "created", None, after, _actor(user), now)
    except Refused as refused:
        log_refused("create", user, refused, given={"nodes": nodes, "pool": pool, "start_at": start_at,
                                                    "end_at": end_at, "duration_s": duration_s, "reason": reason})
        raise
    log.info("maintenance_window_created", window=window.pk, nodes=after["nodes"], start_at=after["start_at"],
             end_at=after["end_at"], reason=window.reason, user=user.get_username())
    return window


CHANGEABLE = frozenset({"nodes", "pool", "start_at", "end_at", "duration_s", "reason"})


def _locked(window_pk: int) -> MaintenanceWindow:
    try:
        return MaintenanceWindow.objects.select_for_update().get(pk=window_pk)
    except MaintenanceWindow.DoesNotExist:
        raise Conflicted(f"maintenance window {window_pk} no longer exists") from None


def _refuse_history(window: MaintenanceWindow, now: datetime, verb: str) -> None:
    state = window.state_at(now)
    if state == MaintenanceWindowState.CANCELLED:
        assert window.cancelled_at is not None
        raise Conflicted(f"maintenance window {window.pk} was cancelled at {when(window.cancelled_at)}; it cannot "
                         f"be {verb}: schedule a new one (POST maintenance-windows/, `qm maint add`)")
    if state == MaintenanceWindowState.ENDED:
        raise Conflicted(f"maintenance window {window.pk} ended at {when(window.end_at)}; it is history and cannot "
                         f"be {verb}: schedule a new one (POST maintenance-windows/, `qm maint add`)")


def check_change(window: MaintenanceWindow, changes: dict[str, Any], now: datetime | None = None, *,
                 overlaps: bool = True) -> Checked:
    """`window` with `changes` (any of CHANGEABLE) checked whole: its nodes, times and reason
    after the change, or Refused naming every field at fault; Conflicted for a window that ended
    or was cancelled. Nodes given replace its nodes (a pool given adds the pool's; a pool alone
    replaces them with the pool's). A new start alone moves the window whole (its length kept);
    `duration_s` sets the end from the (new) start. A window that has begun keeps its start; an
    upcoming one's start may not move into the past. A change of its nodes or times is checked
    (`overlaps`) against the other windows on its nodes."""
    now = now or timezone.now()
    unknown = sorted(set(changes) - CHANGEABLE)
    if unknown:
        raise Refused({name: "not a field of a maintenance window you can change: give nodes, pool, start_at, "
                             "end_at, duration_s or reason" for name in unknown})
    _refuse_history(window, now, "changed")
    errors: dict[str, str] = {}
    reason = changes.get("reason", window.reason)
    if "reason" in changes:
        problem = _reason_problem(reason)
        if problem:
            errors["reason"] = problem
    if "nodes" in changes or "pool" in changes:
        chosen = resolve_nodes(changes.get("nodes"), changes.get("pool"), errors)
    else:
        chosen = sorted(window.nodes.all(), key=lambda n: n.name)
    start_at = _aware(changes.get("start_at") or window.start_at)
    if "start_at" in changes and changes["start_at"] is None:
        errors["start_at"] = "give when the maintenance begins"
    elif window.start_at <= now and start_at != window.start_at:
        errors["start_at"] = (f"the window began at {when(window.start_at)}: its start cannot move (the "
                              "scheduler has kept its nodes clear for it); change its end, or cancel it")
    end_at = changes.get("end_at")
    duration_s = changes.get("duration_s")
    if end_at is None and duration_s is None and start_at != window.start_at:
        try:
            end_at = start_at + (window.end_at - window.start_at)
        except OverflowError:
            errors["start_at"] = f"{when(start_at)} is too late: the window would end beyond the calendar (year 9999)"
            raise Refused(errors) from None
    elif end_at is None and duration_s is None:
        end_at = window.end_at
    start, end = _check_times(start_at, end_at, duration_s, now, errors,
                              end_field="duration_s" if duration_s is not None and end_at is None else "end_at",
                              new_start=window.start_at > now and start_at != window.start_at)
    if errors:
        raise Refused(errors)
    assert start is not None and end is not None
    problem = (overlap_problem(chosen, start, end, now, other_than=window.pk)
               if overlaps and EXTENT & set(changes) else None)
    if problem:
        raise Refused({"nodes": problem})
    return Checked(chosen, start, end, str(reason).strip())


def change(window_pk: int, user: AbstractBaseUser, changes: dict[str, Any],
           now: datetime | None = None) -> MaintenanceWindow:
    """Change a window, all or nothing, under its row lock (`check_change` says the rules),
    recorded when anything changed."""
    now = now or timezone.now()
    try:
        with transaction.atomic():
            window = _locked(window_pk)
            before = window_record(window)
            checked = check_change(window, changes, now, overlaps=False)
            if EXTENT & set(changes):
                _refuse_overlap(checked, now, window.pk)
            MaintenanceWindow.objects.filter(pk=window.pk).update(start_at=checked.start_at, end_at=checked.end_at,
                                                                  reason=checked.reason)
            window.start_at, window.end_at, window.reason = checked.start_at, checked.end_at, checked.reason
            names = [n.name for n in checked.nodes]
            if names != before["nodes"]:
                window.nodes.set(checked.nodes)
            after = window_record(window, names)
            events = _record(window, "changed", before, after, _actor(user), now)
    except (Refused, Conflicted) as problem:
        log_refused("change", user, problem, window=window_pk, given=changes)
        raise
    if events:
        log.info("maintenance_window_changed", window=window.pk, changes=_changes_said(before, after),
                 nodes=after["nodes"], start_at=after["start_at"], end_at=after["end_at"], user=user.get_username())
    return window


def cancel(window_pk: int, user: AbstractBaseUser, now: datetime | None = None) -> MaintenanceWindow:
    """Cancel a window (kept, with who and when): its nodes take any work again from the next
    cycle. A window already cancelled stays as it is (nothing recorded); one that ended is
    history (Conflicted)."""
    now = now or timezone.now()
    with transaction.atomic():
        window = _locked(window_pk)
        if window.cancelled_at is not None:
            return window
        try:
            _refuse_history(window, now, "cancelled")
        except Conflicted as conflict:
            log_refused("cancel", user, conflict, window=window_pk)
            raise
        MaintenanceWindow.objects.filter(pk=window.pk).update(cancelled_at=now, cancelled_by=user)
        window.cancelled_at, window.cancelled_by = now, user
        after = window_record(window)
        _record(window, "cancelled", {**after, "cancelled_at": None}, after, _actor(user), now)
    log.info("maintenance_window_cancelled", window=window.pk, nodes=after["nodes"], start_at=after["start_at"],
             end_at=after["end_at"], user=user.get_username())
    return window


# ------------------------------------------------------------------------------ boundaries


MAINTENANCE_BEGAN = "MaintenanceBegan"
MAINTENANCE_ENDED = "MaintenanceEnded"
#: How long after a window's end its boundaries are still looked for: a loop stopped for a
#: week still writes what happened meanwhile; older windows are history already told.
BOUNDARY_LOOKBACK = timedelta(days=7)


def record_boundaries(now: datetime) -> int:
    """Each reconcile tick: a `node.state` event on each node of a window that has begun
    (`MaintenanceBegan`, at the window's start) or ended (`MaintenanceEnded`, at its end), once
    per window and node, however many ticks or workers see it (the windows' rows are locked
    and the events read again before writing). A window cancelled before it began has no
    boundary; one cancelled after it began ended with its `MaintenanceCancelled` event. Until
    7 Dec nothing said a window began or ended: a node's history read "maintenance window 3
    from 02:00 UTC for 4 h" and nothing after. Returns the events written."""
    windows = list(
        MaintenanceWindow.objects.filter(start_at__lte=now, end_at__gt=now - BOUNDARY_LOOKBACK)
        .filter(Q(cancelled_at__isnull=True) | Q(cancelled_at__gt=F("start_at")))
        .order_by("pk").values_list("pk", "start_at", "end_at", "cancelled_at", "reason", "created_at")
    )
    if not windows:
        return 0
    due = _boundaries_due(windows, now)
    missing = due.keys() - _boundaries_written(due)
    if not missing:
        return 0
    with transaction.atomic():
        # Another worker's tick (or a change or cancel of the window) waits here or went first.
        list(MaintenanceWindow.objects.select_for_update().filter(pk__in=sorted({w for w, _, _ in missing}))
             .order_by("pk").values_list("pk", flat=True))
        windows = list(
            MaintenanceWindow.objects.filter(pk__in={w for w, _, _ in missing}, start_at__lte=now)
            .filter(Q(cancelled_at__isnull=True) | Q(cancelled_at__gt=F("start_at")))
            .order_by("pk").values_list("pk", "start_at", "end_at", "cancelled_at", "reason", "created_at")
        )
        due = _boundaries_due(windows, now)
        written = _boundaries_written(due)
        actor = _boundary_actor()
        rows = [Event(**event_fields(EventKind.NODE_STATE, actor, at=at, reason=reason, message=words, data=data)
                      | {"node_id": node_id})
                for key, (at, words, data) in sorted(due.items(), key=lambda item: (item[1][0], item[0]))
                if key not in written for _, node_id, reason in [key]]
        Event.objects.bulk_create(rows)
    if rows:
        log.info("maintenance_boundaries_recorded", events=len(rows),
                 windows=sorted({r.data["window"] for r in rows}))
    return len(rows)


def _boundary_actor() -> str:
    from controlplane.services import reconcile

    return reconcile.actor()


def _boundaries_due(windows: Sequence[tuple[int, datetime, datetime, datetime | None, str, datetime]],
                    now: datetime) -> dict[tuple[int, int, str], tuple[datetime, str, dict[str, Any]]]:
    """(window, node id, reason) → (when, message, data) of each boundary reached by `now`."""
    by_pk = {w[0]: w for w in windows}
    members = MaintenanceWindow.nodes.through.objects.filter(maintenancewindow_id__in=by_pk).values_list(
        "maintenancewindow_id", "node_id", "node__name", "node__state")
    due: dict[tuple[int, int, str], tuple[datetime, str, dict[str, Any]]] = {}
    for window_pk, node_id, name, state in members:
        _, start_at, end_at, cancelled_at, reason, created_at = by_pk[window_pk]
        data = {"window": window_pk, "node": name, "start_at": start_at.isoformat(), "end_at": end_at.isoformat()}
        # A window created to begin "now" began when it was written, not the instant before.
        due[(window_pk, node_id, MAINTENANCE_BEGAN)] = (
            max(start_at, created_at), f"{name}: maintenance window {window_pk} began: no new work goes there until {when(end_at)}: "
            f"{reason}", {**data, "maintenance": "began"})
        if cancelled_at is None and end_at <= now:
            after = "it takes work again" if state == NodeState.READY else f"it is {state}, so it takes no work yet"
            due[(window_pk, node_id, MAINTENANCE_ENDED)] = (
                end_at, f"{name}: maintenance window {window_pk} ended: {after} ({reason})",
                {**data, "maintenance": "ended", "node_state": str(state)})
    return due


def _boundaries_written(due: dict[tuple[int, int, str], Any]) -> set[tuple[int, int, str]]:
    """Which of `due` are written already (read from the events since the earliest of them)."""
    if not due:
        return set()
    since = min(at for at, _, _ in due.values())
    written = Event.objects.filter(
        kind=EventKind.NODE_STATE, created_at__gte=since, reason__in=(MAINTENANCE_BEGAN, MAINTENANCE_ENDED),
        node_id__in={node_id for _, node_id, _ in due},
    ).values_list("data__window", "node_id", "reason")
    return {(int(w), n, r) for w, n, r in written if w is not None}


# ------------------------------------------------------------------------------ reading


def active_at(now: datetime) -> QuerySet[MaintenanceWindow]:
    """The windows holding their nodes at `now` (begun, not ended, not cancelled): a node in one
    takes no work (scheduler_core/maintenance.py), and every page, figure and metric that counts
    free or schedulable GPUs leaves it out (`active_at(now).filter(nodes=OuterRef("pk"))`)."""
    return MaintenanceWindow.objects.filter(_active(now))


def concerning_each_node(nodes: QuerySet[Node], now: datetime) -> QuerySet[Node]:
    """`nodes`, each with the window that concerns it first, as the Nodes page's rows say it
    (frontend/views/nodes.in_maintenance): the one holding it now (`active_at`, the rule of the
    fleet's figures and the API's `maintenance_window`), else the next to begin (`in_state`
    upcoming): `maintenance_held` (in one now), `maintenance_window` (its id, None for none),
    `maintenance_start_at`, `maintenance_end_at`, `maintenance_reason`. Subqueries of the
    node's own query: a list of nodes costs no query more, however many windows there are.
    A node's windows never overlap, so ordered by start the active one, if any, comes first."""
    first = (in_state(MaintenanceWindow.objects.all(), (MaintenanceWindowState.ACTIVE, MaintenanceWindowState.UPCOMING),
                      now).filter(nodes=OuterRef("pk")).order_by("start_at", "id"))
    return nodes.annotate(
        maintenance_held=Exists(active_at(now).filter(nodes=OuterRef("pk"))),
        maintenance_window=Subquery(first.values("id")[:1]),
        maintenance_start_at=Subquery(first.values("start_at")[:1]),
        maintenance_end_at=Subquery(first.values("end_at")[:1]),
        maintenance_reason=Subquery(first.values("reason")[:1]),
    )


def concerning_said(node: Node) -> str | None:
    """A node's window of `concerning_each_node`, in words: "in maintenance until 2026-12-07
    14:00 UTC: firmware", "from 2026-12-08 02:00 UTC for 4 h: rack move"; None for none."""
    start_at, end_at = getattr(node, "maintenance_start_at", None), getattr(node, "maintenance_end_at", None)
    if start_at is None or end_at is None:
        return None
    reason = getattr(node, "maintenance_reason", "")
    if getattr(node, "maintenance_held", False):
        return f"in maintenance until {when(end_at)}: {reason}"
    return f"from {when(start_at)} for {span((end_at - start_at).total_seconds())}: {reason}"


def _active(now: datetime) -> Q:
    return Q(cancelled_at__isnull=True, start_at__lte=now, end_at__gt=now)


def in_state(windows: QuerySet[MaintenanceWindow], states: Iterable[str], now: datetime) -> QuerySet[MaintenanceWindow]:
    """The windows in any of `states` (upcoming, active, ended, cancelled) at `now`."""
    open_ = Q(cancelled_at__isnull=True)
    each = {
        MaintenanceWindowState.UPCOMING: open_ & Q(start_at__gt=now),
        MaintenanceWindowState.ACTIVE: _active(now),
        MaintenanceWindowState.ENDED: open_ & Q(end_at__lte=now),
        MaintenanceWindowState.CANCELLED: ~open_,
    }
    wanted = Q(pk__in=[])
    for state in states:
        wanted |= each[MaintenanceWindowState(state)]
    return windows.filter(wanted)


@dataclass
class AffectedJob:
    """A running job on a window's nodes that will still hold GPUs there when it begins."""

    job_id: int
    name: str
    team_id: int
    team: str
    state: str
    started_at: datetime
    runtime_limit_s: int
    holds_until: datetime
    gpus: int = 0
    nodes: list[str] = field(default_factory=list)

    def as_seen_by(self, who: Access) -> dict[str, Any]:
        """For the API and pages: a job of a team the reader may not read is its team only."""
        readable = who.may_read_team(self.team_id)
        return {
            "id": self.job_id if readable else None,
            "name": self.name if readable else None,
            "team": self.team,
            "state": self.state,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "started_at": self.started_at,
            "runtime_limit_s": self.runtime_limit_s,
            "holds_until": self.holds_until,
        }


def affected_running_jobs(windows: Sequence[MaintenanceWindow],
                          now: datetime | None = None) -> dict[int, list[AffectedJob]]:
    """Per window (upcoming or active; none for an ended or cancelled one), the running jobs on
    its nodes that will still hold GPUs at its start by their runtime limits (for one that has
    begun: every job on them now), by the end of their limit: one query for all the windows.
    A job told to stop (releasing) holds its GPUs until its stop deadline at most. The windows'
    nodes must be prefetched (`prefetch_related("nodes")`)."""
    now = now or timezone.now()
    live = [w for w in windows if w.state_at(now) in (MaintenanceWindowState.UPCOMING, MaintenanceWindowState.ACTIVE)]
    out: dict[int, list[AffectedJob]] = {w.pk: [] for w in windows}
    if not live:
        return out
    node_ids = {n.pk for w in live for n in w.nodes.all()}
    if not node_ids:
        return out
    rows = (
        AllocationGpu.objects.filter(live=True, allocation__state__in=LIVE_ALLOCATION_STATES, node_id__in=node_ids)
        .values_list("node_id", "node__name", "allocation_id", "allocation__job_id", "allocation__job__name",
                     "allocation__job__team_id", "allocation__job__team__name", "allocation__job__state",
                     "allocation__job__runtime_limit_s", "allocation__state", "allocation__release_deadline")
        .annotate(started=Coalesce("allocation__started_at", "allocation__created_at"), gpus=Count("id"))
        .order_by("allocation__job_id", "node__name")
    )
    per_node: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows:
        per_node.setdefault(row[0], []).append(row)
    for window in live:
        begun = window.start_at <= now
        jobs: dict[int, AffectedJob] = {}
        for node in window.nodes.all():
            for (_, node_name, _, job_id, name, team_id, team, state, limit, alloc_state, deadline,
                 started, gpus) in per_node.get(node.pk, ()):
                holds_until = started + timedelta(seconds=limit)
                if alloc_state == AllocationState.RELEASING and deadline is not None:
                    holds_until = min(holds_until, deadline)
                if not begun and holds_until <= window.start_at:
                    continue
                job = jobs.get(job_id)
                if job is None:
                    job = jobs[job_id] = AffectedJob(job_id, name, team_id, team, state, started, limit, holds_until)
                job.gpus += gpus
                if node_name not in job.nodes:
                    job.nodes.append(node_name)
        out[window.pk] = sorted(jobs.values(), key=lambda j: (j.holds_until, j.job_id))
        for job in out[window.pk]:
            job.nodes.sort()
    return out


def overlapping_windows(windows: Sequence[MaintenanceWindow]) -> dict[int, list[int]]:
    """Per window, the ids (ascending) of the other windows, not cancelled, that overlap it in
    time on a node they share: windows stored before the overlap rule was checked on writing,
    which the rule cannot see now. None for a cancelled window (it holds no node). One query for
    all the windows (none when every one is cancelled); back to back is no overlap."""
    out: dict[int, list[int]] = {w.pk: [] for w in windows}
    ids = [w.pk for w in windows if w.cancelled_at is None]
    if not ids:
        return out
    # one filter() call: the three conditions are on the same other window, reached through a
    # node the two share; the window itself matches too and is dropped below
    pairs = (MaintenanceWindow.objects.filter(pk__in=ids)
             .filter(nodes__maintenance_windows__cancelled_at__isnull=True,
                     nodes__maintenance_windows__start_at__lt=F("end_at"),
                     nodes__maintenance_windows__end_at__gt=F("start_at"))
             .order_by().values_list("pk", "nodes__maintenance_windows").distinct())
    for window_id, other_id in pairs:
        if other_id != window_id:
            out[window_id].append(other_id)
    for others in out.values():
        others.sort()
    return out


def affected_said(jobs: Sequence[AffectedJob]) -> str:
    """`2 running jobs will still hold GPUs when it begins` in words, for the CLI and pages."""
    if not jobs:
        return "no running job will still hold its GPUs when it begins"
    return f"{counted(len(jobs), 'running job')} will still hold GPUs when it begins: drain or cancel them"
