"""Quota changes and their audit trail: every quota created, changed or deleted, through the API
or the admin UI, is recorded as a quota.changed event with the quota before and after."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Case, Count, IntegerField, Q, QuerySet, Sum, Value, When

from controlplane.choices import EventKind, NodeState
from controlplane.models import AllocationGpu, Event, Node, Quota, Team
from controlplane.services.quota_text import LENT_SHARE_NOTE, is_share, lent_said
from controlplane.services.transitions import event_fields
from controlplane.services.usage_tiers import Guarantee, Holding, PriceBook, idle_guarantees
from controlplane.services.whole_numbers import is_whole_number


def quota_record(quota: Quota) -> dict[str, Any]:
    """The quota as the API shows it (QuotaSerializer's fields): what an event's before and
    after hold."""
    return {
        "id": quota.pk, "team": quota.team.name, "gpu_type": quota.gpu_type.name,
        "nominal_gpus": quota.nominal_gpus, "borrowing_limit": quota.borrowing_limit,
        "lending_limit": quota.lending_limit,
    }


_LIMITS = (("nominal_gpus", "nominal"), ("borrowing_limit", "borrowing limit"), ("lending_limit", "lending limit"))


def _what_changed(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """The event's one line, so the audit trail reads without opening its data: each limit that
    moved, before → after ("none" = unlimited or unset); a new or deleted quota's figures."""
    def shown(value: Any) -> str:
        return "none" if value is None else str(value)
    if before is None or after is None:
        record = after or before or {}
        said = [f"{label} {shown(record.get(key))}" for key, label in _LIMITS if record.get(key) is not None
                or key in ("nominal_gpus", "borrowing_limit")]
        return ("was " if after is None else "") + ", ".join(said)
    moved = [f"{label} {shown(before.get(key))} → {shown(after.get(key))}" for key, label in _LIMITS
             if before.get(key) != after.get(key)]
    if before.get("team") != after.get("team") or before.get("gpu_type") != after.get("gpu_type"):
        moved.insert(0, f"was {before.get('team')} on {before.get('gpu_type')}")
    return ", ".join(moved) or "saved unchanged"


def record_quota_change(quota: Quota, verb: str, before: dict[str, Any] | None, actor: str, why: str = "") -> Event:
    """`verb`: created, changed or deleted. Call it in the transaction that writes the quota
    (for a deletion, before deleting it). ``why`` is appended to the event's words."""
    after = quota_record(quota) if verb != "deleted" else None
    fields = event_fields(
        EventKind.QUOTA_CHANGED, actor, reason=f"Quota{verb.title()}",
        message=f"Quota of {quota.team.name} on {quota.gpu_type.name} {verb}: " + _what_changed(before, after) + why,
        data={"before": before, "after": after},
    )
    return Event.objects.create(**{**fields, "team_id": quota.team_id})


def clear_limits_out_of_cohort(team: Team, left: str, actor: str) -> list[str]:
    """A team that left cohort ``left`` for none borrows from no one and lends to no one (the
    engine's ledger gives it nothing beyond nominal), and a limit on its quota would say what
    never happens, as the API and the admin refuse one set on such a quota
    (Quota._refuse_limits_without_cohort). So leaving clears them: each of the team's quotas
    with a borrowing or lending limit (its row locked, FOR NO KEY UPDATE, as every quota write
    locks it) is set to none, with its quota.changed event saying why and what it was. Returns
    one line per quota cleared ("H100-80GB: borrowing limit 8, lending limit 4"), for the move's
    event and the admin's page. Call it in the transaction that moves the team.

    Before, the limits stayed on the quotas with no word: `qm quotas` and the admin read "none
    (no cohort)" while the API gave the limits, and on joining any cohort later, the limits set
    for the old one applied there unseen."""
    lines = []
    held = (Quota.objects.select_for_update(no_key=True, of=("self",)).select_related("team", "gpu_type")
            .filter(team_id=team.pk).exclude(borrowing_limit__isnull=True, lending_limit__isnull=True)
            .order_by("pk"))
    for quota in held:
        before = quota_record(quota)
        was = _limits_line(quota.gpu_type.name, quota.borrowing_limit, quota.lending_limit)
        quota.borrowing_limit = quota.lending_limit = None
        quota.save(update_fields=["borrowing_limit", "lending_limit"])
        record_quota_change(quota, "changed", before, actor, why=(
            f" (team {team.name} left cohort {left}: in no cohort it borrows and lends nothing, so its quota keeps "
            "no borrowing or lending limit; set them again once it joins a cohort)"))
        lines.append(was)
    return lines


def lock_teams_for_quota_write(quota_pk: Any = None, team_pk: Any = None, team_name: Any = None) -> None:
    """Lock the rows of the teams a quota write judges (the quota's stored team, and the team
    the write names, by key or by name), FOR NO KEY UPDATE, by key, before the quota's own row
    and before they are read for the write. A quota's limits are judged against its team's
    cohort (Quota._refuse_limits_without_cohort), and a team's move out of its cohort locks the
    team, then clears its quotas' limits (clear_limits_out_of_cohort): locked in that order, a
    limit set while the move is in flight waits for it and is judged in no cohort, and a move
    after the limit waits for it and clears it. Before, the write read the team unlocked, judged
    the limit against the cohort the team was leaving and saved it after the move had found
    nothing to clear. Call it inside the write's transaction; values that name no team lock
    nothing (the write then says what is wrong with them)."""
    teams = Q(pk__in=Quota.objects.filter(pk=quota_pk).values("team_id")) if _a_key(quota_pk) else Q(pk__in=[])
    if _a_key(team_pk):
        teams |= Q(pk=team_pk)
    if isinstance(team_name, str) and _A_SLUG.fullmatch(team_name):  # a NUL or a lone surrogate fails the read
        teams |= Q(name=team_name)
    list(Team.objects.select_for_update(no_key=True).filter(teams).order_by("pk").values_list("pk", flat=True))


#: What a team's name may be (Team.name, an ASCII slug): anything else names no team.
_A_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")


def _a_key(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, str) and is_whole_number(value, signed=False)
                                      and len(value) < 19)


def limits_on_quotas(team: Team) -> list[str]:
    """The borrowing and lending limits on ``team``'s quotas, one line per quota that has one
    ("H100-80GB: borrowing limit 8, lending limit 4"): what leaving its cohort clears."""
    return [_limits_line(*row) for row in Quota.objects.filter(team_id=team.pk)
            .exclude(borrowing_limit__isnull=True, lending_limit__isnull=True)
            .order_by("pk").values_list("gpu_type__name", "borrowing_limit", "lending_limit")]


def _limits_line(gpu_type: str, borrowing: int | None, lending: int | None) -> str:
    return f"{gpu_type}: " + ", ".join(f"{label} {value}" for label, value in (
        ("borrowing limit", borrowing), ("lending limit", lending)) if value is not None)


def held_now() -> dict[tuple[int, int], int]:
    """The GPUs live allocations hold now, by (team id, GPU type id): one grouped query over the
    GPU rows held now only (AllocationGpu.held), however long the fleet's history."""
    return {(team, gpu_type): n for team, gpu_type, n in (
        AllocationGpu.held().order_by()
        .values_list("allocation__job__team_id", "node__gpu_type_id").annotate(n=Count("pk"))
    )}


def with_held_gpus(queryset: QuerySet[Quota]) -> QuerySet[Quota]:
    """Each quota annotated with ``held_gpus``: the GPUs of its type its team's live allocations
    hold now (the admin's quota list shows it beside the nominal and the limits, and sorts by it).

    Counted once (held_now) and written into the query as constants: a subquery per quota read
    every job its team ever ran and their allocations (2.5 s for 60 quotas with 107,000 jobs,
    bench/scale_audit.py)."""
    held = held_now()
    cases = [When(team_id=team, gpu_type_id=gpu_type, then=Value(n)) for (team, gpu_type), n in sorted(held.items())]
    return queryset.annotate(held_gpus=Case(*cases, default=Value(0), output_field=IntegerField()))


def held_gpus(quota: Quota, *, fresh: bool = False) -> int:
    """The GPUs of the quota's type its team's live allocations hold now (the annotation of
    :func:`with_held_gpus` when the quota came from it; ``fresh``: counted again, for a quota
    moved to another team or type since it was read)."""
    annotated = None if fresh else getattr(quota, "held_gpus", None)
    if annotated is not None:
        return int(annotated)
    return AllocationGpu.held().filter(
        node__gpu_type_id=quota.gpu_type_id, allocation__job__team_id=quota.team_id,
    ).count()


def held_above_nominal(quota: Quota, before: dict[str, Any] | None = None) -> str | None:
    """What an admin should know after a change (``before``: the quota as it was, from
    :func:`quota_record`; None for a new one) leaves `quota`'s team holding more than its
    nominal, or None. Nothing for a change that moved neither the nominal nor the borrowing
    limit, nor the quota to another team or GPU type: it changed nothing of this.

    Changing a quota stops nothing by itself: the team's running jobs keep their GPUs, and it
    starts no more work of that type while it holds more than nominal plus what it may borrow.
    What it holds above the new nominal is borrowed (its jobs started last), so a team owed its
    guarantee reclaims it by preemption: of its cohort, or of any cohort once the team's side
    holds more above nominal than it lends itself (a team in no cohort: anything above its
    nominal) (docs/operations.md, *Changing quotas on a running fleet*)."""
    if before is not None and (before.get("nominal_gpus"), before.get("borrowing_limit"), before.get("team"),
                               before.get("gpu_type")) == (quota.nominal_gpus, quota.borrowing_limit,
                                                           quota.team.name, quota.gpu_type.name):
        return None
    moved_elsewhere = before is not None and (before.get("team"), before.get("gpu_type")) != (
        quota.team.name, quota.gpu_type.name)
    held = held_gpus(quota, fresh=moved_elsewhere)
    over, limit, kind = held - quota.nominal_gpus, quota.borrowing_limit, quota.gpu_type.name
    if over <= 0:
        return None
    moved = before is None or before.get("nominal_gpus") != quota.nominal_gpus
    lowered = before is not None and (before.get("nominal_gpus") or 0) > quota.nominal_gpus
    said = f"Team {quota.team.name} holds {held} {kind} GPUs now, {over} above its {'new ' if moved else ''}nominal " \
           f"{quota.nominal_gpus}"
    if limit is not None and over > limit:
        said += f", {over - limit} beyond its borrowing limit {limit}"
    said += f". Its running jobs keep them ({'lowering' if lowered else 'changing'} a quota stops nothing); "
    if quota.team.cohort_id is None or (limit is not None and over >= limit):
        said += f"it starts no more {kind} work while over its quota and borrowing limit. "
    elif limit is None:
        said += f"it may borrow more {kind} GPUs (it has no borrowing limit) where its cohort has them to lend. "
    else:
        said += f"it may borrow up to {limit - over} more {kind} GPUs where its cohort has them to lend. "
    return said + (
        (f"In cohort {quota.team.cohort.name} the {over} above nominal count as borrowed "
         "(its jobs started last): a team owed its guarantee may reclaim them by preemption, after their "
         "class's minimum runtime "
         if quota.team.cohort_id is not None else
         f"It is in no cohort, so it borrows the {over} above nominal from the teams whose guarantee they are: "
         "a team of any cohort owed its guarantee may reclaim them by preemption, after their class's minimum "
         "runtime ")
        + "(see docs/operations.md, Changing quotas on a running fleet)."
    )


def lent_beyond_lending_limit(quota: Quota, before: dict[str, Any] | None = None) -> str | None:
    """What an admin should know after a change (``before`` as for :func:`held_above_nominal`)
    leaves `quota`'s team lending more GPUs than its lending limit, or None: a limit lowered
    under the teams of its cohort that borrow its unused guarantee. Nothing for a change that
    moved neither the lending limit nor the nominal, nor the quota to another team or type.

    Lowering a lending limit stops nothing: the borrowers keep the GPUs they run on, still lent
    (lent_now counts them, beyond the limit), and borrow no more of them; they come back when
    the lender reclaims them, a job of its own within its nominal preempting the borrowed work
    first, after its class's minimum runtime (scheduler_core: tests/scheduler_core/
    test_engine_quota.py, test_a_lender_whose_lending_limit_was_lowered_under_its_borrowers_reclaims_them)."""
    limit = quota.lending_limit
    if limit is None or quota.team.cohort_id is None:
        return None
    if before is not None and (before.get("lending_limit"), before.get("nominal_gpus"), before.get("team"),
                               before.get("gpu_type")) == (limit, quota.nominal_gpus, quota.team.name,
                                                           quota.gpu_type.name):
        return None
    lent = lent_now().get((quota.team_id, quota.gpu_type_id), 0.0)
    beyond = lent - limit
    if round(beyond, 1) <= 0:
        return None
    team, kind = quota.team.name, quota.gpu_type.name
    lowered = before is not None and (before.get("lending_limit") is None or before["lending_limit"] > limit)
    return (f"Team {team} lends {lent_said(lent)} {kind} GPUs now, {lent_said(beyond)} beyond its "
            f"{'new ' if before is None or before.get('lending_limit') != limit else ''}lending limit {limit}: "
            f"teams of cohort {quota.team.cohort.name} borrowed them before and keep them "
            f"({'lowering' if lowered else 'changing'} a lending limit stops nothing), but borrow no more. "
            f"They come back when {team} reclaims them: a job of {team} within its nominal preempts the borrowed "
            "work first, after its class's minimum runtime (see docs/operations.md, Changing quotas on a running "
            "fleet)." + (f" {LENT_SHARE_NOTE}" if is_share(lent) or is_share(beyond) else ""))


def above_nominal(team: Team) -> list[tuple[str, int, int]]:
    """Per GPU type ``team``'s live allocations hold more of than its nominal quota (none: 0):
    (type name, GPUs held, nominal), by type name. Two queries."""
    nominal = dict(Quota.objects.filter(team=team).values_list("gpu_type__name", "nominal_gpus"))
    held = dict(
        AllocationGpu.held().filter(allocation__job__team=team).order_by()
        .values_list("node__gpu_type__name").annotate(n=Count("pk")).values_list("node__gpu_type__name", "n")
    )
    return [(name, held[name], nominal.get(name, 0)) for name in sorted(held) if held[name] > nominal.get(name, 0)]


def held_above_nominal_after_move(team: Team, before: str | None) -> list[str]:
    """What an admin should know after moving ``team`` from cohort ``before`` (a name, or None)
    to its cohort now, per GPU type it holds more of than its nominal quota (none when it holds
    no more). Moving stops nothing: the GPUs above nominal stay with the team's running jobs,
    and count as borrowed in the new cohort (or from whoever's guarantee they are, in none).
    The old cohort's teams reclaim them only while the team's new side holds more above
    nominal than it lends itself (reclaim crosses cohorts then: scheduler_core's
    QuotaLedger.overdrawn)."""
    after = team.cohort.name if team.cohort_id is not None else None
    old_members = (list(Team.objects.filter(cohort__name=before).exclude(pk=team.pk).order_by("name")
                        .values_list("name", flat=True)) if before is not None else [])
    warnings = []
    for gpu_type, held, nominal in above_nominal(team):
        over = held - nominal
        said = (f"Team {team.name} holds {held} {gpu_type} GPUs, {over} above its nominal "
                f"{nominal}. Its running jobs keep them (moving a team stops nothing).")
        if old_members and after is None:
            said += (f" The teams of cohort {before} ({', '.join(old_members)}) may still reclaim them by "
                     f"preemption, after their class's minimum runtime: in no cohort, what {team.name} holds above "
                     f"its nominal is another team's guarantee.")
        elif old_members:
            said += (f" The teams of cohort {before} ({', '.join(old_members)}) may reclaim them by preemption "
                     f"only while cohort {after} holds more {gpu_type} GPUs above its nominal than its teams lend.")
        if after is None:
            said += f" In no cohort, {team.name} borrows nothing: it starts no more {gpu_type} work above its nominal."
        else:
            lenders = list(Quota.objects.filter(team__cohort_id=team.cohort_id, gpu_type__name=gpu_type,
                                                nominal_gpus__gt=0).exclude(team=team).order_by("team__name")
                           .values_list("team__name", flat=True))
            said += (f" In cohort {after} the {over} above nominal count as borrowed: a team of it owed its guarantee "
                     f"({', '.join(lenders)}) may reclaim them by preemption, after their class's minimum runtime."
                     if lenders else
                     f" In cohort {after} no other team has {gpu_type} quota to lend, so {team.name} starts no more "
                     f"{gpu_type} work above its nominal.")
        warnings.append(said)
    return warnings


def fleet_gpus_by_type() -> dict[int, int]:
    """Per GPU type id, the fleet's GPUs: every node not retired, a cordoned or down one too (it
    may come back), as the what-if page and the metrics count them: what a quota above the fleet
    is judged against (above_fleet_warnings). Not what "lent now" splits borrowing by: the engine
    lends no GPU beyond the guarantees (usage_tiers.idle_guarantees, step 2). One query."""
    capacity: dict[int, int] = {}
    for gpu_type_id, gpus in Node.objects.exclude(state=NodeState.RETIRED).values_list("gpu_type_id", "gpu_count"):
        capacity[gpu_type_id] = capacity.get(gpu_type_id, 0) + gpus
    return capacity


def guaranteed_by_type() -> dict[int, int]:
    """Per GPU type id, the sum of every team's nominal quota of it. One query."""
    return dict(Quota.objects.order_by().values_list("gpu_type_id").annotate(n=Sum("nominal_gpus"))
                .values_list("gpu_type_id", "n"))


def above_fleet_warnings(quota: Quota, fleet: dict[int, int] | None = None,
                         guaranteed: dict[int, int] | None = None) -> list[str]:
    """What a quota above the fleet's GPUs of its type means, for the API's `warnings` and the
    admin's save; [] when it fits. Taken, never refused: capacity may be coming (Kueue takes a
    nominal quota above the cluster too), but a nominal above the fleet is a guarantee the team
    can never hold in full, a borrowing limit above it limits nothing, and nominal quotas adding
    up past the fleet are guarantees that cannot all be honoured at once. A lending limit is
    never above nominal (Quota.clean), so it is said through the nominal. ``fleet`` and
    ``guaranteed``: `fleet_gpus_by_type()` and `guaranteed_by_type()`, when read already (a
    list's rows share one read)."""
    fleet = fleet_gpus_by_type() if fleet is None else fleet
    guaranteed = guaranteed_by_type() if guaranteed is None else guaranteed
    has = fleet.get(quota.gpu_type_id, 0)
    gpu_type = quota.gpu_type.name
    fleet_has = f"the {has} {gpu_type} GPUs the fleet has"
    warnings = []
    if quota.nominal_gpus > has:
        warnings.append(f"Nominal {quota.nominal_gpus} is above {fleet_has}: the team can never hold it all "
                        "until more come.")
    if quota.borrowing_limit is not None and quota.borrowing_limit > has:
        warnings.append(f"Borrowing limit {quota.borrowing_limit} is above {fleet_has}: the team can never borrow "
                        "that many; until more come it limits nothing.")
    total = guaranteed.get(quota.gpu_type_id, 0)
    if quota.nominal_gpus and total > has:
        warnings.append(f"All teams' nominal {gpu_type} quotas add up to {total}, above {fleet_has}: these "
                        "guarantees cannot all be honoured at once.")
    return warnings


def lent_now() -> dict[tuple[int, int], float]:
    """Per (team id, GPU type id) with a quota: the GPUs of its unused guarantee other teams of
    its cohort run on now, the teams page's "lent": the engine's rule (a cohort's borrowing is
    all lent by its teams with unused guarantee, never run on GPUs beyond the guarantees), split as the
    accounting splits it (usage_tiers.idle_guarantees: in proportion to what each may lend,
    beyond a lowered lending limit in proportion to the unused guarantee above it). Two
    queries."""
    guarantees = [Guarantee(team_id=t, gpu_type_id=g, nominal_gpus=n, lending_limit=lend, cohort_id=c)
                  for t, g, n, lend, c in Quota.objects.values_list(
                      "team_id", "gpu_type_id", "nominal_gpus", "lending_limit", "team__cohort_id")]
    holdings = [Holding(team_id, gpu_type_id, n, 0, 1) for team_id, gpu_type_id, n in (
        AllocationGpu.held().order_by()
        .values_list("allocation__job__team_id", "node__gpu_type_id").annotate(n=Count("pk"))
    )]
    # One microsecond of the present: the cells' GPU-microseconds are then GPUs.
    cells = idle_guarantees(0, 1, guarantees, holdings, PriceBook())
    return {key: float(cell.lent_gpu_us) for key, cell in cells.items()}
