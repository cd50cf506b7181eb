"""Configuration changes and their audit trail: a priority class, GPU type, price rate, team,
project, membership or node's inventory created, changed or deleted, through the API or the
admin UI, is recorded as a ``config.changed`` event with the record before and after (quotas
and cohorts have kinds of their own: services/quotas.py, services/cohorts.py).

These are the settings that decide who runs first, what a job may ask for and what an hour
costs; "who set the production class to 50, and when" must be answerable later. Reasons are
the model and the verb: PriorityClassChanged, PriceRateCreated, MembershipDeleted, ...
Only the columns an admin sets are recorded: never a node's health, lease or token hash, nor a
team's decayed usage, which the control loop writes every cycle.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import get_hasher, identify_hasher, is_password_usable
from django.contrib.auth.models import Group, Permission
from django.db import models, transaction
from django.db.models import Count, Prefetch, Q, prefetch_related_objects
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import (
    Cohort,
    Event,
    GpuType,
    Job,
    Membership,
    Node,
    NotificationHook,
    PriceRate,
    PriorityClass,
    Project,
    Quota,
    Team,
)
from controlplane.models.events import actor_name
from controlplane.services import api_tokens, cohorts, maintenance, nodes, notifications, quotas
from controlplane.services import jobs as job_service
from controlplane.services.transitions import event_fields
from scheduler_core.sentences import duration

AUDITED: dict[type[models.Model], tuple[str, ...]] = {
    PriorityClass: ("name", "value", "description", "preemptible", "may_preempt_lower", "grace_period_s",
                    "min_runtime_s", "preemption_budget", "budget_window_s", "default_runtime_limit_s",
                    "max_runtime_limit_s"),
    GpuType: ("name", "memory_gb", "relative_throughput"),
    PriceRate: ("gpu_type", "capacity_tier", "usd_per_gpu_hour", "effective_from"),
    Team: ("name", "description", "default_priority_class", "priority_classes"),
    Project: ("name", "team", "description"),
    Membership: ("user", "team", "role"),
    Node: ("name", "pool", "gpu_type", "gpu_count", "cpus", "memory_gb", "leaf_switch", "spine", "capacity_tier",
           "simulated"),
    # What a group's staff members may do on the admin's pages (Django's permissions: "Can
    # change quota" lets a staff user edit every team's quota there).
    Group: ("name", "permissions"),
}


# A user's standing, never their password or profile: who they are, whether they may sign in
# (active), reach the admin site (staff) and are an admin of the fleet (superuser:
# services/access.py), and what they may change on the admin's pages when staff (their groups'
# permissions and their own). Ticking "Superuser status" made a user an admin with no trace here.
USER_AUDITED = ("username", "is_active", "is_staff", "is_superuser", "groups", "user_permissions")
T = TypeVar("T")


def _os_user() -> str:
    try:
        return getpass.getuser()
    except OSError:  # no login name, no passwd entry (a container's bare uid)
        return f"uid {os.getuid()}"


class CommandLine:
    """Who acts when a `manage.py` command changes a user: no request, so no signed-in user; the
    OS user who ran it is what the trail can say (actor ``manage.py:<os user>``), and the event's
    line names the command ("… (manage.py changepassword, run as OS user ops)")."""

    def __init__(self, command: str) -> None:
        self.command = f"manage.py {command}"
        self.os_user = _os_user()
        self.actor = f"manage.py:{self.os_user}"
        self.said = f" ({self.command}, run as OS user {self.os_user})"
        self.data = {"command": self.command, "os_user": self.os_user}


class UnnamedProcess:
    """Who acts when a user is created, changed, deleted or given a password with no page nor
    command saying who (`manage.py shell`, a script, a view that forgot to): the process
    itself, honestly, actor ``process:<os user>``, and what it runs ("manage.py shell",
    "celery", "gunicorn"): the program's name and, for manage.py, the command's, never the rest
    of its command line (a `shell -c "u.set_password('…')"` holds the password)."""

    def __init__(self) -> None:
        self.os_user = _os_user()
        self.pid = os.getpid()
        self.program = _program(list(sys.argv or []))
        self.actor = f"process:{self.os_user}"
        self.said = f" (process {self.pid}, {self.program}, run as OS user {self.os_user}: no page or command said who)"
        self.data = {"process": self.program, "os_user": self.os_user, "pid": self.pid}


def _program(argv: list[str]) -> str:
    if not argv or not argv[0]:
        return "python"
    if argv[0] == "-c":
        return "python -c"
    program = os.path.basename(argv[0])[:64]
    if program in ("manage.py", "django-admin") and len(argv) > 1 and re.fullmatch(r"[a-z_][a-z0-9_]{0,63}", argv[1]):
        return f"{program} {argv[1]}"
    return program


class _Changing(NamedTuple):
    """A page or command changing users (`changing_users`): who, the command, the users it
    changed so far, each with their record before its first change, and the users whose
    deletion it recorded already (`users_deleting`)."""

    actor: str
    command: CommandLine | None
    changed: dict[Any, tuple[Any, dict[str, Any]]]
    deleted: set[Any]


#: Who is changing users in this thread or task now (a page's signed-in user, a command line),
#: set by `changing_users`; unset, the user's save or delete names the process.
_changing: ContextVar[_Changing | None] = ContextVar("qm_user_changer", default=None)


@contextmanager
def changing_users(actor: str, command: CommandLine | None = None) -> Iterator[None]:
    """Run what follows (a page, or a `manage.py` command, that may create, change, delete a
    user or set their password) in one transaction, as ``actor``: the events the users' saves
    and deletes record (`user_saved`, `user_deleted`, `password_saved`) name them and the
    command, in the same transaction. A user changed several times (a page's columns, then
    its groups and permissions, saved after) is one `UserChanged` event, recorded at the end,
    from before the first change to after the last. A change refused sets nothing and records
    nothing."""
    changing = _Changing(actor, command, {}, set())
    said = _changing.set(changing)
    try:
        with transaction.atomic():
            yield
            for user, before in changing.changed.values():
                now = type(user)._default_manager.filter(pk=user.pk).first()
                if now is not None:  # else deleted since, and recorded so
                    _record_user_change(now, before, changing.actor, changing.command)
    finally:
        _changing.reset(said)


def password_change_recorded(actor: str, change: Callable[[], T], command: CommandLine | None = None) -> T:
    """Run ``change`` (a password page, `manage.py changepassword`) as `changing_users` runs it."""
    with changing_users(actor, command):
        return change()


def _origin() -> tuple[str, CommandLine | UnnamedProcess | None]:
    """Who changes a user now: the page or command running (`changing_users`), else the process."""
    changing = _changing.get()
    if changing is None:
        process = UnnamedProcess()
        return process.actor, process
    return changing.actor, changing.command


def _record_user_change(user: Any, before: dict[str, Any], actor: str,
                        origin: CommandLine | UnnamedProcess | None, why: str = "") -> Event | None:
    return record_config_change(user, "changed", before, actor, why=why + (origin.said if origin else ""),
                                data=origin.data if origin else None)


def _user_changed(user: Any, before: dict[str, Any]) -> Event | None:
    """``user`` changed from ``before``: recorded now (the event returned), or at the end of the
    page or command changing them (`changing_users`), once for all its changes (None)."""
    changing = _changing.get()
    if changing is not None:
        changing.changed.setdefault(user.pk, (user, before))
        return None
    actor, origin = _origin()
    return _record_user_change(user, before, actor, origin)


class StoredUser(NamedTuple):
    """A user as stored before a save that may change them: the password's hash, and the
    audited record (`USER_AUDITED`)."""

    password: str
    record: dict[str, Any]


def stored_user(user: Any, update_fields: Any, raw: bool) -> StoredUser | None:
    """``user`` as stored before a save that may write a new password or audited column (read by
    the user's pre_save, one query), or None when the save writes neither: a new user
    (`user_saved` records its creation), a fixture's raw load, a save of other columns only (a
    sign-in's last_login)."""
    if raw or user.pk is None or user._state.adding:
        return None
    if update_fields is not None and not {"password", *USER_AUDITED} & set(update_fields):
        return None
    stored = type(user)._default_manager.filter(pk=user.pk).first()
    return StoredUser(stored.password, config_record(stored)) if stored is not None else None


def user_saved(user: Any, created: bool, before: StoredUser | None) -> None:
    """After a save of ``user`` (post_save), stored as ``before`` until then: one `UserCreated`
    event for a new user, one `UserChanged` for a change of who they are or what they may do
    (`USER_AUDITED`), one `UserPasswordChanged` for a new password (`password_saved`), whatever
    path saved it, each naming the page or command running (`changing_users`), else the
    process. A save outside a transaction (the shell's autocommit) writes the user, then the
    event."""
    if created:
        actor, origin = _origin()
        record_config_change(user, "created", None, actor, why=origin.said if origin else "",
                             data=origin.data if origin else None)
        return
    if before is None:
        return
    if before.record != config_record(user):
        _user_changed(user, before.record)
    password_saved(user, before.password)


def users_access_changing(action: str, instance: Any, reverse: bool, pk_set: Any) -> None:
    """A user's groups or permissions about to change (m2m_changed's pre_add, pre_remove,
    pre_clear; ``reverse``: from the group's or permission's side, ``pk_set`` the users): their
    records as they are, kept on ``instance`` for `users_access_changed`."""
    if not action.startswith("pre_"):
        return
    if not reverse:
        instance._qm_access_before = {instance.pk: (instance, config_record(instance))}
        return
    users = get_user_model()._default_manager.all()
    users = users.filter(pk__in=pk_set) if pk_set is not None else users.filter(
        **{_users_of(instance): instance})
    instance._qm_access_before = {user.pk: (user, config_record(user)) for user in users}


def _users_of(instance: Any) -> str:
    return "groups" if isinstance(instance, Group) else "user_permissions"


class _AccessRemoval:
    """Users' groups or permissions just removed or cleared with no page or command running
    (`changing_users` gathers its own), each recorded: user pk → its event and its record
    before. A `set()` removes what goes, then adds what comes, on the same manager in one
    transaction: that add completes these events (`users_access_changed`), so the change is one
    event from before to after, as the admin's page records it, not "ops → none", "none → ops"."""

    def __init__(self, sender: Any, instance: Any, events: dict[Any, tuple[Event, dict[str, Any]]],
                 using: str) -> None:
        self.sender, self.instance, self.events, self.using = sender, instance, events, using
        # Its transaction's mark: the connection keeps it until that transaction (or the
        # savepoint it was made in) commits or rolls back; the only way Django tells an add in
        # the same transaction from one in the next (the shell's autocommit commits each call).
        self.mark = self._committed
        transaction.on_commit(self.mark, using=using)

    def _committed(self) -> None:
        if _access_removal.get() is self:
            _access_removal.set(None)

    def completed_by(self, sender: Any, instance: Any, using: str) -> bool:
        """Whether an add of ``sender``'s rows on ``instance`` is this removal's `set()` going on."""
        if sender is not self.sender or instance is not self.instance or using != self.using:
            return False
        connection = transaction.get_connection(using)
        return connection.in_atomic_block and any(entry[1] is self.mark for entry in connection.run_on_commit)


#: The last access removal recorded, until any other change is (`record_config_change`).
_access_removal: ContextVar[_AccessRemoval | None] = ContextVar("qm_access_removal", default=None)


def users_access_changed(action: str, instance: Any, sender: Any, using: str) -> None:
    """After the change (post_add, post_remove, post_clear): each user whose groups or
    permissions moved is one `UserChanged` event, whatever changed them (the user's admin page,
    `bob.groups.add(…)` or `group.user_set.add(…)` in a shell); `bob.groups.set(…)`, a removal
    then an add in one transaction, one from before the removal to after the add
    (`_AccessRemoval`)."""
    if not action.startswith("post_"):
        return
    before = getattr(instance, "_qm_access_before", None) or {}
    instance._qm_access_before = None
    removal = _access_removal.get()
    _access_removal.set(None)
    completing = removal.events if (action == "post_add" and removal is not None
                                    and removal.completed_by(sender, instance, using)) else {}
    recorded: dict[Any, tuple[Event, dict[str, Any]]] = {}
    for user, record in before.values():
        if user.pk in completing:
            _complete_access_change(user, *completing[user.pk])
        elif record != config_record(user) and (event := _user_changed(user, record)) is not None:
            recorded[user.pk] = (event, record)
    if action in ("post_remove", "post_clear") and recorded:
        _access_removal.set(_AccessRemoval(sender, instance, recorded, using))


def _complete_access_change(user: Any, event: Event, first: dict[str, Any]) -> None:
    """``event`` recorded ``user``'s groups or permissions removed by a `set()` from ``first``:
    it says the whole change now that the set's add is done, or goes when the set changed
    nothing (the groups they had, set again with clear=True). Still in the transaction that
    wrote it: no one has read it."""
    after = config_record(user)
    if after == first:
        Event.objects.filter(pk=event.pk).delete()
        return
    _, origin = _origin()
    fields = _config_event_fields(user, "changed", first, after, event.actor,
                                  why=origin.said if origin else "", data=origin.data if origin else None)
    Event.objects.filter(pk=event.pk).update(message=fields["message"], data=fields["data"])


def user_deleted(user: Any) -> None:
    """Before ``user`` is deleted (pre_delete, whatever deletes them: a page, a queryset's
    delete in a shell): their deletion recorded (`_record_users_deleted`), unless the page
    deleting them recorded it with the others it deletes (`users_deleting`)."""
    changing = _changing.get()
    if changing is not None:
        if user.pk in changing.deleted:
            return
        changing.changed.pop(user.pk, None)  # the deletion says what they were
    actor, origin = _origin()
    _record_users_deleted([user], actor, origin)


def users_deleting(pks: Sequence[Any]) -> list[Any]:
    """The users of ``pks`` that a page running (`changing_users`) is about to delete together
    (the users list's "Delete selected users"): locked (FOR UPDATE: a user deleted meanwhile by
    another admin is not recorded twice), their deletion recorded at once, as the page's, and
    their deletes' pre_delete then records nothing more (`user_deleted`). Returns the users
    still there, to delete. A constant number of queries, whatever the number of users (each
    kind of record read once for all of them, every event in one insert), where each user's own
    pre_delete reads and writes a dozen."""
    changing = _changing.get()
    if changing is None:
        raise RuntimeError("users_deleting runs inside changing_users: the events name who deletes")
    users = list(get_user_model()._default_manager.select_for_update(of=("self",)).filter(pk__in=list(pks))
                 .exclude(pk__in=list(changing.deleted)).order_by("pk"))
    prefetch_related_objects(users, "groups", Prefetch(
        "user_permissions", queryset=Permission.objects.select_related("content_type")))
    for user in users:
        changing.changed.pop(user.pk, None)
    _record_users_deleted(users, changing.actor, changing.command)
    changing.deleted.update(user.pk for user in users)
    return users


def _record_users_deleted(users: Sequence[Any], actor: str, origin: CommandLine | UnnamedProcess | None) -> None:
    """Before ``users`` are deleted: for each, one `UserDeleted` event, one per membership, hook
    and API token that goes with them (CASCADE), one `job.updated` per job they submitted or
    hold and one `MaintenanceWindowChanged` per maintenance window they created or cancelled,
    which stay without them (SET_NULL). Each kind of record is read once for all the users
    (services/maintenance.py, notifications.py, api_tokens.py), and the events are written in
    one insert per 2,000, each user's together, their `UserDeleted` first, as their own
    deletion writes them."""
    if not users:
        return
    _access_removal.set(None)  # a set()'s add completes its removal's events only right after it
    why, data = (origin.said, origin.data) if origin else ("", None)
    pks = [user.pk for user in users]
    gone = {user.pk: f" (user {user.get_username()} deleted)" for user in users}
    events: dict[Any, list[Event]] = {
        user.pk: [Event(**_config_event_fields(user, "deleted", config_record(user), None, actor, why, data))]
        for user in users}
    for membership in Membership.objects.filter(user_id__in=pks).select_related("team", "user"):
        events[membership.user_id].append(Event(**_config_event_fields(
            membership, "deleted", config_record(membership), None, actor, gone[membership.user_id], None)))
    named = {user.get_username(): user.pk for user in users}
    for event in notifications.deletions_with_owner(NotificationHook.objects.filter(user_id__in=pks), actor,
                                                    lambda hook: gone[hook.user_id]):
        events[named[event.data["before"]["user"]]].append(event)
    for losing in (api_tokens.owner_deleted(users, actor, why, data), _jobs_losing_users(users, actor, why, data),
                   maintenance.users_deleted(users, actor, why, data)):
        for pk, more in losing.items():
            events[pk].extend(more)
    Event.objects.bulk_create([event for user in users for event in events[user.pk]], batch_size=2000)


def password_saved(user: Any, before: str | None) -> Event | None:
    """After a save of ``user`` whose stored hash was ``before``: when the password changed,
    record one `UserPasswordChanged` event: who changed whose password, or made it unusable
    ("password-based sign-in disabled"), as `user_saved` names them. Never the password nor
    its hash; the hashes are compared only to tell whether it changed.

    A hash that differs for the same password is no change: Django stores a password again
    under the preferred hasher at a sign-in (`check_password`, clearing the raw password it set
    first). The same holds for a hash assigned by hand (`u.password = make_password(…)`, no
    raw password on the user) over one the preferred hasher would have redone: it cannot be
    told from that, and is not recorded (set_password is)."""
    if before is None or user.password == before:
        return None
    if getattr(user, "_password", None) is None and _rehashed(before, user.password):
        return None
    _access_removal.set(None)
    actor, origin = _origin()
    name = user.get_username()
    usable = user.has_usable_password()
    said = "password changed" if usable else "password-based sign-in disabled"
    return Event.objects.create(**event_fields(
        EventKind.CONFIG_CHANGED, actor, reason="UserPasswordChanged",
        message=f"User {name}'s {said}{origin.said if origin else ''}",
        data={"model": "user", "user": name, "usable_password": usable, **(origin.data if origin else {})}))


def _rehashed(before: str, after: str) -> bool:
    """Whether ``after`` may be ``before``'s password stored again by the preferred hasher: a
    sign-in's upgrade (django.contrib.auth.hashers.check_password: only a hash from another
    hasher, or one it must update, is redone)."""
    if not (is_password_usable(before) and is_password_usable(after)):
        return False
    try:
        was, now = identify_hasher(before), identify_hasher(after)
    except ValueError:
        return False
    preferred = get_hasher("default")
    return (now.algorithm == preferred.algorithm and not preferred.must_update(after)
            and (was.algorithm != preferred.algorithm or preferred.must_update(before)))


def _is_user(obj: models.Model) -> bool:
    return bool(obj._meta.label == settings.AUTH_USER_MODEL)


def _audited_fields(obj: models.Model) -> tuple[str, ...] | None:
    fields = AUDITED.get(type(obj))
    if fields is None and _is_user(obj):
        return USER_AUDITED
    return fields


def audited(obj: models.Model) -> bool:
    return _audited_fields(obj) is not None


def config_record(obj: models.Model) -> dict[str, Any]:
    """The audited columns, as JSON: related records by their name, decimals and times as text."""
    record: dict[str, Any] = {"id": obj.pk}
    for name in _audited_fields(obj) or ():
        if not hasattr(obj, name) and not hasattr(obj, f"{name}_id"):
            continue
        field = obj._meta.get_field(name)
        if field.many_to_many:  # a team's priority classes, a user's groups: their names, [] for none
            if obj.pk is None:
                record[name] = []
                continue
            rows = getattr(obj, name).all()
            if rows.model is Permission and name not in getattr(obj, "_prefetched_objects_cache", {}):
                rows = rows.select_related("content_type")  # prefetched (users_deleting): with it
            record[name] = sorted(_named(r) for r in rows)
            continue
        value = getattr(obj, name, None) if not field.is_relation else _related(obj, field)
        if isinstance(value, Decimal):
            value = str(value)
        elif hasattr(value, "isoformat"):
            value = value.isoformat().replace("+00:00", "Z")
        record[name] = value
    return record


def _named(related: Any) -> str:
    if isinstance(related, Permission):  # as has_perm names it: "controlplane.change_quota"
        return f"{related.content_type.app_label}.{related.codename}"
    return str(getattr(related, "name", related))


def _related(obj: models.Model, field: Any) -> str | None:
    if getattr(obj, field.attname) is None:
        return None
    related = getattr(obj, field.name)
    return str(getattr(related, "get_username", lambda: related)())


def before_change(obj: models.Model) -> dict[str, Any] | None:
    """The record as stored now (read before the change is saved), or None for a new one."""
    if not audited(obj) or obj.pk is None:
        return None
    stored = type(obj)._default_manager.filter(pk=obj.pk).first()
    return config_record(stored) if stored is not None else None


def record_config_change(obj: models.Model, verb: str, before: dict[str, Any] | None, actor: str,
                         why: str = "", after: dict[str, Any] | None = None,
                         data: dict[str, Any] | None = None) -> Event | None:
    """`verb`: created, changed or deleted. Call it in the transaction that writes the record
    (for a deletion, before deleting it, with ``before`` from :func:`config_record`). Nothing
    for a model that is not audited, or a change that changed nothing. ``after``: the record as
    it will be, when the database does not hold it yet (a team losing a class that is about to
    be deleted); else it is read from ``obj``. ``data``: more for the event's data (the process
    or command that made the change, `user_saved`)."""
    if not audited(obj):
        return None
    _access_removal.set(None)  # a set()'s add completes its removal's events only right after it
    if verb == "deleted":
        after = None
    elif after is None:
        after = config_record(obj)
    if verb == "changed" and before == after:
        return None
    event = Event.objects.create(**_config_event_fields(obj, verb, before, after, actor, why, data))
    if verb == "deleted" and isinstance(obj, Team) and obj.pk is not None:
        _record_team_cascade(obj, actor)
    # A user's deletion records what goes and stays with them: `_record_users_deleted`.
    if verb == "deleted" and isinstance(obj, Node) and obj.pk is not None:
        maintenance.node_deleted(obj, actor)  # its windows lose it, each recorded
    if verb == "deleted" and isinstance(obj, Group) and obj.pk is not None:
        # Its members leave it (the many-to-many rows go with it, no signal said): each recorded.
        for user in get_user_model()._default_manager.filter(groups=obj).order_by("pk"):
            was = config_record(user)
            becomes = {**was, "groups": [name for name in was["groups"] if name != obj.name]}
            record_config_change(user, "changed", was, actor, why=f" (group {obj.name} deleted)", after=becomes)
    if verb == "deleted" and isinstance(obj, GpuType) and obj.pk is not None:
        # PriceRate.gpu_type is CASCADE: the type's prices go with it, each recorded.
        for rate in PriceRate.objects.filter(gpu_type_id=obj.pk).select_related("gpu_type"):
            record_config_change(rate, "deleted", config_record(rate), actor, why=f" (GPU type {obj.name} deleted)")
    if verb == "deleted" and isinstance(obj, PriorityClass) and obj.pk is not None:
        # Team.default_priority_class is SET_NULL: each team that had it loses its default; and
        # the class leaves the lists of classes teams may use (its many-to-many rows go with it).
        # Each such team's event holds its list as it becomes, which the database does not yet.
        for team in _teams_using(obj).select_related("default_priority_class"):
            was = config_record(team)
            if team.default_priority_class_id == obj.pk:
                team.default_priority_class = None
            becomes = {**config_record(team),
                       "priority_classes": [name for name in was["priority_classes"] if name != obj.name]}
            record_config_change(team, "changed", was, actor, why=f" (class {obj.name} deleted)", after=becomes)
    return event


def _config_event_fields(obj: models.Model, verb: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
                         actor: str, why: str, data: dict[str, Any] | None) -> dict[str, Any]:
    label = str(obj._meta.verbose_name)
    fields = event_fields(
        EventKind.CONFIG_CHANGED, actor, reason=f"{type(obj).__name__}{verb.title()}",
        message=(f"{label[:1].upper()}{label[1:]} {_name(obj, before)} {verb}{what_changed(before, after)}"
                 f"{_price_said(obj, verb, before, after)}{why}"),
        data={"model": obj._meta.model_name, "before": before, "after": after, **(data or {})},
    )
    # Written before a deletion: the event keeps pointing at the record until it goes
    # (Event.node and Event.team are SET_NULL), and its message names it for ever.
    if isinstance(obj, Node):
        fields["node_id"] = obj.pk
    team_id = obj.pk if isinstance(obj, Team) else getattr(obj, "team_id", None)
    if team_id is not None:
        fields["team_id"] = team_id
    return fields


def _jobs_losing_users(users: Sequence[Any], actor: str, why: str, data: dict[str, Any] | None) -> dict[Any, list[Event]]:
    """Before ``users`` are deleted: one `job.updated` event on each job one of them submitted or
    holds, which the deletion leaves with none (Job.submitter and Job.held_by are SET_NULL), by
    the deletion's ``actor``; a job submitted by one and held by another, one for each. The
    events, not yet written, by user pk; one query, whatever the number of users and jobs (a
    user with a year of sweeps has thousands)."""
    names = {user.pk: user.get_username() for user in users}
    at = timezone.now()
    events: dict[Any, list[Event]] = {pk: [] for pk in names}
    for pk, team_id, state, submitted, held in (
        Job.objects.filter(Q(submitter_id__in=list(names)) | Q(held_by_id__in=list(names))).order_by("pk")
        .values_list("pk", "team_id", "state", "submitter_id", "held_by_id")
    ):
        for user_pk in dict.fromkeys(u for u in (submitted, held) if u in names):
            name = names[user_pk]
            submitter, holder = submitted == user_pk, held == user_pk
            role = "submitter and holder" if submitter and holder else "submitter" if submitter else "holder"
            changes = {**({"submitter": [name, None]} if submitter else {}),
                       **({"held_by": [name, None]} if holder else {})}
            events[user_pk].append(Event(**event_fields(
                EventKind.JOB_UPDATED, actor, job=Job(pk=pk, team_id=team_id), at=at,
                reason="SubmitterDeleted" if submitter else "HolderDeleted",
                message=f"Its {role} {name} was deleted by {actor_name(actor)}{'; it stays held' if holder else ''}{why}",
                data={"changes": changes, "state": state, "user": name, **(data or {})})))
    return events


def _teams_using(priority_class: PriorityClass) -> models.QuerySet[Team]:
    """The teams whose default ``priority_class`` is, or whose members may submit in it by name."""
    return Team.objects.filter(
        Q(default_priority_class_id=priority_class.pk)
        | Q(pk__in=Team.priority_classes.through.objects.filter(priorityclass_id=priority_class.pk)
            .values("team_id"))).order_by("name")


def deletion_refused(obj: models.Model) -> str | None:
    """Why ``obj`` may not be deleted though no row protects it in the database, or None.

    A priority class that is the only one a team may use: the class's rows in the team's list
    go with it, and an empty list means *every* class (Team.priority_classes), so deleting the
    one class a team was limited to let its members submit in the highest class there is, never
    preempted and preempting the rest; the trail said nothing of it. A node whose agent holds a
    live lease (services/nodes.deletion_refusal)."""
    if isinstance(obj, Node) and obj.pk is not None:
        return nodes.deletion_refusal(obj)
    if not isinstance(obj, PriorityClass) or obj.pk is None:
        return None
    limited = Team.objects.filter(
        pk__in=Team.priority_classes.through.objects.filter(priorityclass_id=obj.pk).values("team_id"),
    ).annotate(classes=Count("priority_classes")).filter(classes=1).order_by("name")
    named = list(limited.values_list("pk", "name"))
    if not named:
        return None
    teams = ", ".join(name for _, name in named)
    pk, first = named[0]
    return (f"{'Team' if len(named) == 1 else 'Teams'} {teams} may submit only in {obj.name}: deleted, it would "
            f"leave {'its' if len(named) == 1 else 'their'} list of classes empty, and a team with none chosen may "
            f"submit in every class (the highest included). Choose the classes {'it' if len(named) == 1 else 'each'} "
            f"may use instead first (the team's page in the admin; PATCH teams/{pk}/ {{\"priority_classes\": "
            f"[…]}} for {first}), then delete {obj.name}")


def _record_team_cascade(team: Team, actor: str) -> None:
    """A team's quotas, projects, memberships and hooks go with it (CASCADE), and it leaves its cohort:
    each is recorded as if deleted on its own, so no trail is left believing they remain."""
    why = f" (team {team.name} deleted)"
    for quota in Quota.objects.filter(team_id=team.pk).select_related("team", "gpu_type"):
        quotas.record_quota_change(quota, "deleted", quotas.quota_record(quota), actor, why=why)
    for row in [*Project.objects.filter(team_id=team.pk).select_related("team"),
                *Membership.objects.filter(team_id=team.pk).select_related("team", "user")]:
        record_config_change(row, "deleted", config_record(row), actor, why=why)
    notifications.deleted_with_owner(NotificationHook.objects.filter(team_id=team.pk), actor, why)
    cohort = cohorts.cohort_of(team.pk)
    if cohort is not None:
        cohorts.record_move(team, cohort, None, actor, why)


def deletion_consequences(obj: models.Model) -> list[str]:
    """What deleting ``obj`` does to the records that point at it without being deleted, one
    line each (the admin's confirmation page): a priority class that is a team's default; a
    quota whose team's running jobs hold GPUs of its type; a node's maintenance windows; a
    user's jobs, maintenance windows and API tokens."""
    if _is_user(obj):
        return users_leave([obj])
    if isinstance(obj, Node):
        return maintenance.windows_left(obj)
    if isinstance(obj, Quota):
        held = quotas.held_gpus(obj)
        if not held:
            return []
        return [f"Team {obj.team.name}'s running jobs hold {held} {obj.gpu_type.name} GPUs: they keep them (deleting "
                "a quota stops nothing), but with no quota all of them count as borrowed, and any team owed its "
                "guarantee may reclaim them by preemption, after their class's minimum runtime; the team starts no "
                f"more {obj.gpu_type.name} work"]
    if not isinstance(obj, PriorityClass):
        return []
    lines = []
    for team in Team.objects.filter(default_priority_class_id=obj.pk).order_by("name"):
        fallback = job_service.lowest_class_for(team, without=obj)
        limited = team.priority_classes.exclude(pk=obj.pk).exists()
        gets = (f"will get {fallback}, the lowest class{' it may use' if limited else ''}" if fallback is not None
                else "will be refused, as no class is left")
        lines.append(f"Team {team.name}: its default class becomes none; its jobs submitted without a class {gets} "
                     "(set another default on the team's page)")
    # A team limited to this class alone is refused (deletion_refused); the others keep the rest.
    for team in _teams_using(obj).prefetch_related("priority_classes"):
        names = sorted(c.name for c in team.priority_classes.all())
        if obj.name in names and len(names) > 1:
            lines.append(f"Team {team.name} may no longer submit in {obj.name}; it keeps "
                         f"{', '.join(n for n in names if n != obj.name)}")
    return lines


def users_leave(users: Sequence[Any]) -> list[str]:
    """What deleting ``users`` empties and keeps (SET_NULL, which Django's list of what goes
    leaves out), counted, each user's lines in turn: the jobs they submitted or hold, the
    maintenance windows they created or cancelled, each recorded by the deletion
    (`_jobs_losing_users`, `maintenance.users_deleted`); and their API tokens, which go with them
    as Django's list says, but unnamed ("API token 12 of 7"), and which the clients signed in as
    them stop working with (`api_tokens.owner_deleted`). One query for the jobs, one for the
    windows and one for the tokens, whatever the number of users and records."""
    pks = [user.pk for user in users]
    submitted = dict.fromkeys(pks, 0)
    held = dict.fromkeys(pks, 0)
    for submitter, holder, n in (Job.objects.filter(Q(submitter_id__in=pks) | Q(held_by_id__in=pks)).order_by()
                                 .values_list("submitter_id", "held_by_id").annotate(n=Count("pk"))):
        if submitter in submitted:
            submitted[submitter] += n
        if holder in held:
            held[holder] += n
    windows = maintenance.windows_touched_by(users)
    tokens = api_tokens.held_by(users)
    on_jobs, on_windows = ("its events say so", "each job's events say so"), \
        ("the audit trail says so", "the audit trail says so of each")
    lines = []
    for user in users:
        name = user.get_username()
        created, cancelled = windows[user.pk]
        said = [(submitted[user.pk], "submitted", "job", "", "submitter", on_jobs),
                (held[user.pk], "holds", "job", " held", "holder", on_jobs),
                (created, "created", "maintenance window", "", "creator", on_windows),
                (cancelled, "cancelled", "maintenance window", " cancelled", "canceller", on_windows)]
        lines += [f"{name} {did} {n:,} {noun}{'' if n == 1 else 's'}: {'it stays' if n == 1 else 'they stay'}"
                  f"{stays}, with no {who}, and {trail[0] if n == 1 else trail[1]}"
                  for n, did, noun, stays, who, trail in said if n]
        if held_tokens := tokens[user.pk]:
            one = len(held_tokens) == 1
            issued = ", ".join(f"token {pk} issued {api_tokens.issued_said(at)}" for pk, at in held_tokens)
            lines.append(f"{name}'s {len(held_tokens)} API {'token is' if one else 'tokens are'} deleted with the "
                         f"account ({issued}): every client signed in as {name} (qm login) is refused from then on, "
                         f"and the audit trail says so{'' if one else ' of each'}")
    return lines


def deletions_consequences(objs: Sequence[models.Model]) -> list[str]:
    """:func:`deletion_consequences` of each of ``objs`` (a "Delete selected" page), users' read
    together (`users_leave`)."""
    users = [obj for obj in objs if _is_user(obj)]
    lines = users_leave(users) if users else []
    return lines + [line for obj in objs if not _is_user(obj) for line in deletion_consequences(obj)]


def deleted_with(obj: models.Model) -> list[str]:
    """Everything deleting ``obj`` changes beyond it, one line each, read before it is deleted:
    what the API's DELETE answers (the admin's confirmation page lists the same: the rows that
    go with it, and :func:`deletion_consequences`). A cohort's teams leave it
    (services/cohorts.py); a team's quotas, projects, memberships and notification hooks go with it and
    it leaves its cohort; a GPU type's prices go with it; a node leaves its maintenance windows; a priority class's teams lose
    their default."""
    if isinstance(obj, Cohort):
        return cohorts.leaving_teams(obj)
    if isinstance(obj, Team):
        lines = [f"Its quota on {q.gpu_type.name} (nominal {q.nominal_gpus}) is deleted"
                 for q in Quota.objects.filter(team_id=obj.pk).select_related("gpu_type").order_by("gpu_type__name")]
        lines += [f"Project {name} is deleted"
                  for name in Project.objects.filter(team_id=obj.pk).order_by("name").values_list("name", flat=True)]
        lines += [f"{user} is no longer a member of {obj.name} (was {role})" for user, role in
                  Membership.objects.filter(team_id=obj.pk).order_by("user__username")
                  .values_list("user__username", "role")]
        lines += notifications.hooks_gone_lines(NotificationHook.objects.filter(team_id=obj.pk))
        cohort = cohorts.cohort_of(obj.pk)
        if cohort is not None:
            lines.append(f"It leaves cohort {cohort}: it no longer lends or borrows")
        return lines
    if isinstance(obj, GpuType):
        return [f"Its price {rate.gpu_type.name} {rate.capacity_tier} (${rate.usd_per_gpu_hour} per GPU-hour from "
                f"{rate.effective_from:%Y-%m-%d}) is deleted"
                for rate in PriceRate.objects.filter(gpu_type_id=obj.pk).select_related("gpu_type")
                .order_by("capacity_tier", "effective_from")]
    return deletion_consequences(obj)


def _name(obj: models.Model, before: dict[str, Any] | None) -> str:
    if _is_user(obj):
        return str((before or {}).get("username") or obj.get_username())  # type: ignore[attr-defined]
    if isinstance(obj, PriceRate):
        return f"{obj.gpu_type.name} {obj.capacity_tier}"
    if isinstance(obj, Membership):
        return f"of {obj.user.get_username()} in {obj.team.name if obj.team_id else 'no team'}"
    return str((before or {}).get("name") or getattr(obj, "name", obj.pk))


# A setting's name in the events' words, where its column's name is not a word.
_WORDS = {
    "grace_period_s": "grace period", "min_runtime_s": "min runtime", "budget_window_s": "budget window",
    "default_runtime_limit_s": "default runtime limit", "max_runtime_limit_s": "max runtime limit",
    "gpu_count": "GPUs", "cpus": "CPUs", "memory_gb": "memory GB", "gpu_type": "GPU type",
    "usd_per_gpu_hour": "$ per GPU-hour", "is_active": "active", "is_staff": "staff", "is_superuser": "superuser",
    "user_permissions": "permissions",
}


def span(seconds: int) -> str:
    """A configured span as it was likely typed: whole days, whole hours, else as sentences say it."""
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return duration(seconds)


def _said(key: str, value: Any) -> str:
    if value is None or (key == "min_runtime_s" and value == 0):
        return "none"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):  # a team's priority classes (none chosen: any), a user's groups
        return ", ".join(map(str, value)) or ("any" if key == "priority_classes" else "none")
    if key.endswith("_s") and isinstance(value, int):
        return span(value)
    return str(value)


def _price_said(obj: models.Model, verb: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """A price rate created or deleted: its price and from when, which finance reads the trail
    for ("Price rate H100-80GB on_demand created" said neither before 5 Dec 2026)."""
    record = after if verb == "created" else before if verb == "deleted" else None
    if not isinstance(obj, PriceRate) or record is None:
        return ""
    return (f": {'it was ' if verb == 'deleted' else ''}${record['usd_per_gpu_hour']} per GPU-hour "
            f"from {record['effective_from']}")


def what_changed(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """The event's line, readable without its data: each setting that moved, before → after, in
    words ("grace period 30 s → 10 min", "default priority class production (1000) → none");
    the data keeps the columns and their values."""
    if before is None or after is None:
        return ""
    moved = [f"{_WORDS.get(key, key.replace('_', ' '))} {_said(key, before.get(key))} → {_said(key, after.get(key))}"
             for key in after if key != "id" and before.get(key) != after.get(key)]
    return ": " + ", ".join(moved)


def changed_by_since(obj: models.Model, since: Any) -> list[str]:
    """Who changed ``obj`` (a quota, cohort or audited record) after ``since``, oldest first,
    from the audit trail: what an admin whose page was opened at ``since`` is told before her
    save would undo their change. A team's cohort move counts as a change of the team."""
    kind = {Quota: EventKind.QUOTA_CHANGED, Cohort: EventKind.COHORT_CHANGED}.get(type(obj), EventKind.CONFIG_CHANGED)
    kinds = [kind, EventKind.COHORT_CHANGED] if isinstance(obj, Team) else [kind]
    model = obj._meta.model_name
    actors: list[str] = []
    for event_kind, reason, actor, data in (
        Event.objects.filter(kind__in=kinds, created_at__gt=since).order_by("created_at", "id")
        .values_list("kind", "reason", "actor", "data")
    ):
        record = (data or {}).get("after") or (data or {}).get("before") or {}
        if event_kind == EventKind.COHORT_CHANGED and reason == "TeamCohortChanged":
            ours = isinstance(obj, Team) and data.get("team") == getattr(obj, "name", None)
        elif event_kind == EventKind.CONFIG_CHANGED:
            ours = data.get("model") == model and record.get("id") == obj.pk
        else:
            ours = record.get("id") == obj.pk
        if ours and actor not in actors:
            actors.append(actor)
    return actors


def deleted_since(model: type[models.Model], pk: Any, since: Any) -> tuple[str, str] | None:
    """Who deleted the ``model`` record ``pk`` after ``since``, and the record as it was, in
    words ("ml × H100-80GB: 16", "alice in ml as member"), from its deletion event; None when
    the trail has no such deletion."""
    kind = {Quota: EventKind.QUOTA_CHANGED, Cohort: EventKind.COHORT_CHANGED}.get(model, EventKind.CONFIG_CHANGED)
    for actor, data in (
        Event.objects.filter(kind=kind, reason__endswith="Deleted", created_at__gt=since).order_by("-created_at", "-id")
        .values_list("actor", "data")
    ):
        before = (data or {}).get("before") or {}
        if before.get("id") != pk or (kind == EventKind.CONFIG_CHANGED and data.get("model") != model._meta.model_name):
            continue
        if model is Quota:
            shown = f"{before.get('team')} × {before.get('gpu_type')}: {before.get('nominal_gpus')}"
        elif model is Membership:
            shown = f"{before.get('user')} in {before.get('team') or 'no team'} as {before.get('role')}"
        else:
            shown = str(before.get("name") or pk)
        return actor, shown
    return None
