"""Factories for control-plane tests: small functions with sensible defaults, keyword overrides.

Each creates real rows in the test database (PostgreSQL). Names default to unique values so
tests can call them repeatedly without collisions.
"""

from __future__ import annotations

import hashlib
import itertools
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from controlplane.choices import JobState, Role
from controlplane.models import (
    Cohort,
    Event,
    GpuType,
    Job,
    Membership,
    Node,
    PendingPlace,
    PriceRate,
    PriorityClass,
    Project,
    Quota,
    Team,
)
from controlplane.services import api_tokens

_seq = itertools.count(1)


def _n() -> int:
    return next(_seq)


def make_gpu_type(name: str | None = None, memory_gb: int = 80, **kw: Any) -> GpuType:
    return GpuType.objects.create(name=name or f"GPU-{_n()}", memory_gb=memory_gb, **kw)


def make_priority_class(name: str | None = None, value: int = 100, **kw: Any) -> PriorityClass:
    return PriorityClass.objects.create(name=name or f"class-{_n()}", value=value, **kw)


def make_cohort(name: str | None = None, **kw: Any) -> Cohort:
    return Cohort.objects.create(name=name or f"cohort-{_n()}", **kw)


def make_team(name: str | None = None, **kw: Any) -> Team:
    return Team.objects.create(name=name or f"team-{_n()}", **kw)


def make_project(team: Team, name: str | None = None, **kw: Any) -> Project:
    return Project.objects.create(team=team, name=name or f"project-{_n()}", **kw)


def make_user(
    username: str | None = None,
    *,
    team: Team | None = None,
    role: str = Role.MEMBER,
    password: str | None = None,
    superuser: bool = False,
) -> AbstractBaseUser:
    """A user, with a membership when `team` is given or the role is finance/admin."""
    username = username or f"user{_n()}"
    model = get_user_model()
    if superuser:
        user = model.objects.create_superuser(username=username, password=password or username)
    else:
        user = model.objects.create_user(username=username, password=password or username)
    if team is not None or role != Role.MEMBER:
        Membership.objects.create(user=user, team=team, role=role)
    return user


def trail() -> Any:
    """The audit trail but the users the test's setup made through the ORM (`make_user`: each a
    `UserCreated` event by the test's own process, services/config_audit.user_saved): what the
    test's requests recorded, for tests that assert a refused one recorded nothing."""
    return Event.objects.exclude(reason="UserCreated", actor__startswith="process:")


def token_for(user: AbstractBaseUser) -> str:
    """A new API token of `user`, as a sign-in issues it: its key (the database holds its digest)."""
    return api_tokens.issue(user)


def make_node(gpu_type: GpuType, name: str | None = None, **kw: Any) -> Node:
    fields: dict[str, Any] = {
        "pool": gpu_type.name.lower(), "gpu_count": 8, "cpus": 96, "memory_gb": 1024,
        "leaf_switch": "leaf-1", "spine": "spine-1",
    }
    fields.update(kw)
    return Node.objects.create(name=name or f"node-{_n()}", gpu_type=gpu_type, **fields)


def make_agent_node(gpu_type: GpuType, token: str, **kw: Any) -> Node:
    """A node whose agent authenticates with `token` (stored as its sha256, as agents are)."""
    return make_node(gpu_type, agent_token_hash=hashlib.sha256(token.encode()).hexdigest(), **kw)


def make_quota(team: Team, gpu_type: GpuType, nominal_gpus: int = 16, **kw: Any) -> Quota:
    return Quota.objects.create(team=team, gpu_type=gpu_type, nominal_gpus=nominal_gpus, **kw)


def make_price_rate(gpu_type: GpuType, usd: str = "2.5000", tier: str = "on_demand",
                    effective_from: datetime | None = None) -> PriceRate:
    return PriceRate.objects.create(
        gpu_type=gpu_type, capacity_tier=tier, usd_per_gpu_hour=usd,
        effective_from=effective_from or timezone.now().replace(year=2026, month=1, day=1),
    )


def make_job(team: Team, priority_class: PriorityClass | None = None, **kw: Any) -> Job:
    """A job row written directly (no submit rules): for states a submit cannot produce."""
    at = kw.pop("submitted_at", None) or timezone.now()
    pc = priority_class or team.default_priority_class or PriorityClass.objects.order_by("value").first()
    if pc is None:
        pc = make_priority_class()
    fields: dict[str, Any] = {
        "name": f"job-{_n()}", "gpus": 1, "runtime_limit_s": 3600, "state": JobState.PENDING,
        "submitted_at": at, "state_changed_at": at,
    }
    # A waiting job's queue position and ETA live in its PendingPlace.
    place = {k: kw.pop(k) for k in ("queue_position", "eta") if k in kw}
    fields.update(kw)
    job = Job.objects.create(team=team, priority_class=pc, **fields)
    if place:
        assert "queue_position" in place, "a job with an ETA has a queue position"
        PendingPlace.objects.create(job=job, queue_position=place["queue_position"], eta=place.get("eta"))
    return job


def finished_jobs_of(user: AbstractBaseUser, team: Team, count: int) -> None:
    """`count` succeeded one-GPU jobs `user` submitted for `team`, written in one insert."""
    now = timezone.now()
    Job.objects.bulk_create([
        Job(team=team, priority_class=team.default_priority_class, submitter=user, name=f"sweep-{i}", gpus=1,
            runtime_limit_s=3600, state=JobState.SUCCEEDED, submitted_at=now, state_changed_at=now)
        for i in range(count)])


def admin_change_form(page: Any) -> dict[str, Any]:
    """The POST data of a Django admin change page as rendered (the object's fields and every
    inline formset with its management form), for tests that change one value and submit."""
    form: dict[str, Any] = {}
    for field, bound in ((name, page.context["adminform"].form[name]) for name in page.context["adminform"].form.fields):
        form[field] = "" if bound.value() is None else bound.value()
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        for name in ("TOTAL_FORMS", "INITIAL_FORMS", "MIN_NUM_FORMS", "MAX_NUM_FORMS"):
            form[f"{formset.prefix}-{name}"] = formset.management_form[name].value()
        for i, inline_form in enumerate(formset.forms):
            for field in inline_form.fields:
                value = inline_form[field].value()
                form[f"{formset.prefix}-{i}-{field}"] = "" if value is None else value
    return form


def opened_admin_form(client: Any, path: str) -> dict[str, Any]:
    """An admin change page opened by `client` (200), as its form would POST it back: unchecked
    boxes left out, as a browser leaves them."""
    page = client.get(path)
    assert page.status_code == 200
    return {k: v for k, v in admin_change_form(page).items() if v is not False}
