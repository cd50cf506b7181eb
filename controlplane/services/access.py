"""Who may see and do what. One home for the role rules the API and the pages share.

- member: their own team's jobs, quotas and costs.
- finance: showback and costs of every team; changes nothing.
- admin: everything: the API, the pages and the admin UI (/admin/), whether a superuser or
  given a membership with role admin (`FleetAdminPermissions`, `may_use_admin_site`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Permission
from django.db.models import Exists, Model, OuterRef, Q, QuerySet

from controlplane.choices import Role
from controlplane.models import Event, Job, Membership, Project, Quota, Team


@dataclass(frozen=True)
class Access:
    is_admin: bool
    is_finance: bool
    team_ids: frozenset[int]

    @property
    def reads_all_costs(self) -> bool:
        return self.is_admin or self.is_finance

    def may_read_team(self, team_id: int) -> bool:
        return self.is_admin or team_id in self.team_ids

    def may_submit_for(self, team_id: int) -> bool:
        return self.is_admin or team_id in self.team_ids


NO_ACCESS = Access(is_admin=False, is_finance=False, team_ids=frozenset())

_Row = TypeVar("_Row", bound=Model)


def access_of(user: AbstractBaseUser | AnonymousUser) -> Access:
    """What `user` may see and do: read once per request (the user object carries it), or
    already attached by the API's token authentication, which reads memberships in the same
    query as the token (see `remember_memberships`)."""
    if not user.is_authenticated:
        return NO_ACCESS
    cached = getattr(user, "_qm_access", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    rows = list(Membership.objects.filter(user=user).values_list("team_id", "role"))
    return remember_memberships(user, rows)


def remember_memberships(user: AbstractBaseUser, rows: Iterable[Sequence[Any]]) -> Access:
    """Attach the access given by `user`'s membership rows, each (team_id, role), to the user
    object for the rest of the request, and return it."""
    rows = list(rows)
    roles = {role for _, role in rows}
    access = Access(
        is_admin=bool(getattr(user, "is_superuser", False)) or Role.ADMIN in roles,
        is_finance=Role.FINANCE in roles,
        team_ids=frozenset(t for t, role in rows if t is not None and role != Role.FINANCE),
    )
    user._qm_access = access  # type: ignore[attr-defined]
    return access


def _scoped(rows: QuerySet[_Row], access: Access, *, sees_all: bool, team: str = "team_id") -> QuerySet[_Row]:
    """Every row for a user who `sees_all`, else only the rows of the user's own teams."""
    return rows if sees_all else rows.filter(**{f"{team}__in": access.team_ids})


def visible_jobs(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
    """Jobs a user may read one by one (finance sees costs, not job details of other teams)."""
    access = access_of(user)
    return _scoped(Job.objects.all(), access, sees_all=access.is_admin)


def visible_job_teams(user: AbstractBaseUser | AnonymousUser) -> frozenset[int] | None:
    """The teams whose jobs `visible_jobs` keeps, by id; None: every team's (an admin's)."""
    access = access_of(user)
    return None if access.is_admin else access.team_ids


def member_teams(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Team]:
    """The teams whose jobs the user may read and submit for: every team for admins."""
    access = access_of(user)
    return _scoped(Team.objects.all(), access, sees_all=access.is_admin, team="id")


def job_users(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Any]:
    """The people whose jobs the user may read, by name: themself, their teams' members and
    whoever submitted one of their teams' jobs (one who has left the team too); everyone for
    admins."""
    access = access_of(user)
    people = get_user_model().objects.all()
    if access.is_admin:
        return people
    return people.filter(
        Q(pk=getattr(user, "pk", None))
        | Q(Exists(Membership.objects.filter(user=OuterRef("pk"), team_id__in=access.team_ids)))
        | Q(Exists(Job.objects.filter(submitter=OuterRef("pk"), team_id__in=access.team_ids)))
    )


def visible_teams(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Team]:
    access = access_of(user)
    return _scoped(Team.objects.all(), access, sees_all=access.reads_all_costs, team="id")


def primary_team(user: AbstractBaseUser | AnonymousUser) -> Team | None:
    """The team a submit goes to when the request names none: the user's first member team."""
    access = access_of(user)
    if not access.team_ids:
        return None
    return Team.objects.select_related("default_priority_class").filter(id__in=access.team_ids).order_by("name").first()


def is_person(user: object) -> bool:
    """A signed-in human account. Node agents authenticate as their node, never as a user, so
    they fail this test and reach none of the user-facing API."""
    return isinstance(user, AbstractBaseUser) and user.is_authenticated and bool(getattr(user, "is_active", False))


def may_submit(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Members of a team and admins submit jobs; finance-only accounts read, they never act."""
    access = access_of(user)
    return access.is_admin or bool(access.team_ids)


def visible_projects(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Project]:
    access = access_of(user)
    return _scoped(Project.objects.all(), access, sees_all=access.reads_all_costs)


def visible_quotas(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Quota]:
    """Members read their own team's quotas; finance reads all (idle reserved capacity is a cost)."""
    access = access_of(user)
    return _scoped(Quota.objects.all(), access, sees_all=access.reads_all_costs)


def visible_events(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Event]:
    """Admins read the whole audit trail; members read what happened to their team's jobs."""
    access = access_of(user)
    return _scoped(Event.objects.all(), access, sees_all=access.is_admin)


#: The app whose every permission a fleet admin holds in the admin UI: the fleet's records
#: (teams, memberships, quotas, cohorts, priority classes, prices, nodes, windows, hooks) and
#: "Can view the scheduler policy". What a page never lets anyone do (edit a job, an event, the
#: lease; delete a window) its ModelAdmin refuses to superusers too.
FLEET_APP = "controlplane"
#: Beyond the fleet's app, the users list, where a fleet admin grants and takes back roles (a
#: user's page, *Roles*; admin.UserAdmin keeps the account itself read-only for them).
FLEET_ADMIN_EXTRA = frozenset({"auth.view_user"})


def _fleet_admin(user: Any) -> bool:
    return bool(getattr(user, "is_active", False)) and access_of(user).is_admin


class FleetAdminPermissions(BaseBackend):
    """Django's permissions of a fleet admin by membership (settings.AUTHENTICATION_BACKENDS,
    after Django's ModelBackend): every permission of the fleet's app, and viewing users.

    Derived from `access_of` at each request, never stored: a membership with role admin made,
    or deleted, gives or takes the admin UI at the next request, whatever made or deleted it
    (a page, the API, a shell), and no `is_staff` flag or group is left behind to drift from
    the roles. Django's own permissions (ModelBackend: a staff user's groups) still hold beside
    it. It authenticates nobody (BaseBackend.authenticate answers None)."""

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return (perm.startswith(f"{FLEET_APP}.") or perm in FLEET_ADMIN_EXTRA) and _fleet_admin(user_obj)

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return app_label in {FLEET_APP, *(p.split(".")[0] for p in FLEET_ADMIN_EXTRA)} and _fleet_admin(user_obj)

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if obj is not None or not _fleet_admin(user_obj):
            return set()
        ours = Permission.objects.filter(content_type__app_label=FLEET_APP).values_list("codename", flat=True)
        return {f"{FLEET_APP}.{codename}" for codename in ours} | set(FLEET_ADMIN_EXTRA)


def may_use_admin_site(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Who signs in to the admin UI: an active fleet admin (a superuser, or a membership with
    role admin), or a staff user (Django's flag, for operators given some of its permissions
    through groups: "Can view the scheduler policy"). Members and finance are refused there:
    their pages and the API are theirs."""
    return bool(getattr(user, "is_active", False)) and (bool(getattr(user, "is_staff", False))
                                                        or access_of(user).is_admin)
