"""Cohort changes and their audit trail: every cohort created, changed or deleted, through the
API or the admin UI, is recorded with the cohort before and after, as quota changes are
(services/quotas.py).

A cohort is the quotas' borrowing group: its teams lend each other unused quota, and deleting
it takes them out (Team.cohort is SET_NULL), so they stop lending and borrowing. The events are
of kind `cohort.changed`, with reasons CohortCreated, CohortChanged and CohortDeleted, and
TeamCohortChanged for a team that joins, leaves or changes cohort
(`GET events/?kind=cohort.changed&reason=CohortDeleted`). Events written before migration 0009
used `quota.changed` with the same reasons; that migration moved them to this kind."""

from __future__ import annotations

from typing import Any

from controlplane.choices import EventKind
from controlplane.models import Cohort, Event, Team
from controlplane.services import config_audit, quotas
from controlplane.services.transitions import event_fields


def cohort_record(cohort: Cohort) -> dict[str, Any]:
    """The cohort as the API shows it (CohortSerializer's fields, teams by name): what an
    event's before and after hold. Read from the database, so call it before a deletion."""
    teams = sorted(cohort.teams.values_list("name", flat=True)) if cohort.pk else []
    return {"id": cohort.pk, "name": cohort.name, "description": cohort.description, "teams": teams}


def record_cohort_change(cohort: Cohort, verb: str, before: dict[str, Any] | None, actor: str) -> Event:
    """`verb`: created, changed or deleted. Call it in the transaction that writes the cohort
    (for a deletion, before deleting it, with `before` read then)."""
    after = cohort_record(cohort) if verb != "deleted" else None
    message = f"Cohort {cohort.name} {verb}"
    if verb == "deleted" and before and before["teams"]:
        message += f": {', '.join(before['teams'])} no longer lend or borrow through it"
    elif verb == "changed" and before and after:
        message = f"Cohort {before['name']} changed{config_audit.what_changed(before, after)}"
    fields = event_fields(
        EventKind.COHORT_CHANGED, actor, reason=f"Cohort{verb.title()}", message=message,
        data={"before": before, "after": after},
    )
    event = Event.objects.create(**fields)
    if verb == "deleted" and cohort.pk is not None:
        # Team.cohort is SET_NULL: each team leaves, and its own history says so.
        for team in Team.objects.filter(cohort_id=cohort.pk).order_by("name"):
            cleared = quotas.clear_limits_out_of_cohort(team, cohort.name, actor)
            record_move(team, cohort.name, None, actor, f" (cohort {cohort.name} deleted)", cleared)
    return event


def leaving_teams(cohort: Cohort) -> list[str]:
    """What deleting ``cohort`` does to its teams, one line each (the admin's confirmation page,
    the API's answer to the DELETE): each leaves it and no longer lends or borrows; a team
    running more than its nominal keeps those GPUs (deleting stops nothing), but in no cohort
    they are borrowed from whoever's guarantee they are, reclaimable by preemption
    (scheduler_core's QuotaLedger.overdrawn; services/quotas.py, held_above_nominal)."""
    lines = []
    for team in cohort.teams.order_by("name"):
        line = f"Team {team.name} leaves the cohort: it no longer lends or borrows"
        above = quotas.above_nominal(team)
        if above:
            held = ", ".join(f"{held - nominal} {name} GPUs above its nominal {nominal}"
                             for name, held, nominal in above)
            line += (f"; its running jobs keep the {held} (deleting the cohort stops nothing), but in no cohort "
                     f"it starts no more work above its nominal, and a team of any cohort owed its guarantee may "
                     f"reclaim them by preemption, after their class's minimum runtime")
        limits = quotas.limits_on_quotas(team)
        if limits:
            line += (f"; its quotas' borrowing and lending limits are cleared ({'; '.join(limits)}): in no cohort "
                     "they would never apply")
        lines.append(line)
    return lines


def cohort_of(team_id: int | None) -> str | None:
    """The name of the team's cohort as stored now (read before a change is saved)."""
    if team_id is None:
        return None
    return Team.objects.filter(pk=team_id).values_list("cohort__name", flat=True).first()


def record_team_move(team: Team, before: str | None, actor: str) -> Event | None:
    """A team that joined, left or changed cohort starts or stops lending and borrowing there:
    recorded like a cohort change (reason TeamCohortChanged). Nothing when the cohort stayed.
    Call it in the transaction that saves the team, with ``before`` from :func:`cohort_of`."""
    after = team.cohort.name if team.cohort_id is not None else None
    if before == after:
        return None
    cleared = quotas.clear_limits_out_of_cohort(team, before, actor) if after is None and before is not None else []
    return record_move(team, before, after, actor, cleared=cleared)


def record_move(team: Team, before: str | None, after: str | None, actor: str, why: str = "",
                cleared: list[str] | None = None) -> Event:
    """The TeamCohortChanged event of ``team`` going from cohort ``before`` to ``after`` (names
    or None), ``why`` appended to its words; ``cleared``: the limits leaving cleared from its
    quotas (quotas.clear_limits_out_of_cohort), said in its words and kept in its data as
    ``limits_cleared``."""
    if before is None:
        message = f"Team {team.name} joined cohort {after}"
    elif after is None:
        message = f"Team {team.name} left cohort {before}: it no longer lends or borrows"
    else:
        message = f"Team {team.name} moved from cohort {before} to {after}"
    data: dict[str, Any] = {"team": team.name, "before": {"cohort": before}, "after": {"cohort": after}}
    if cleared:
        message += f"; its quotas' limits are cleared ({'; '.join(cleared)})"
        data["limits_cleared"] = cleared
    fields = event_fields(EventKind.COHORT_CHANGED, actor, reason="TeamCohortChanged", message=message + why,
                          data=data)
    fields["team_id"] = team.pk
    return Event.objects.create(**fields)
