from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction

from controlplane.choices import Role
from controlplane.models.usage import forget_empty_quota_rollups
from controlplane.services.showback_names import reserved_name_problem


class Team(models.Model):
    """A group of people sharing quota and a bill."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    cohort = models.ForeignKey(
        "controlplane.Cohort", null=True, blank=True, on_delete=models.SET_NULL, related_name="teams"
    )
    default_priority_class = models.ForeignKey(
        "controlplane.PriorityClass", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Which priority classes the team's members may submit in and change their jobs to (none
    # chosen: every class). Admins submit in any. A researcher could otherwise give their own
    # training run the serving class, which is never preempted and preempts everything below.
    priority_classes = models.ManyToManyField(
        "controlplane.PriorityClass", blank=True, related_name="+",
        help_text="The classes this team's members may submit in; none chosen: every class. Admins may use any.",
    )
    # Past usage decayed with the fair-share half-life, folded forward by every cycle:
    # usage(t) = usage(as_of) · 2^(-(t - as_of)/half_life) + what ran in between.
    decayed_gpu_seconds = models.FloatField(default=0.0)
    decayed_cpu_seconds = models.FloatField(default=0.0)
    decayed_memory_gb_seconds = models.FloatField(default=0.0)
    usage_as_of = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if reserved := name_given_is_reserved(self, Team, "team"):
            raise ValidationError({"name": reserved})
        if renamed := self._rename_refused():
            raise ValidationError({"name": renamed})

    def _rename_refused(self) -> str | None:
        """A team that has jobs keeps its name. Its rows point at it by id (jobs, quotas,
        rollups, events: showback and the CSVs read today's name for all of its history), but
        the fleet's samples name it (the queue-depth and dominant-share charts: renamed, its
        line split in two, the old one in no team's colour, and its queue's history before the
        rename was lost to the team filter), and submitters ask for it by name (`qm submit
        --team`, `?team=` in scripts), which would be refused from the rename on. Slurm
        accounts and Kueue queues keep their names alike. A team with no job yet is renamed
        freely (and recorded, "Team ml changed: name ml → ml-research")."""
        if self.pk is None or not self.name:
            return None
        was = Team.objects.filter(pk=self.pk).values_list("name", flat=True).first()
        if was is None or was == self.name:
            return None
        jobs = self.jobs.count()  # type: ignore[attr-defined]  # Job.team's related_name
        if not jobs:
            return None
        return (f"team {was} has {jobs:,} job{'' if jobs == 1 else 's'}, and the fleet's charts and submitters "
                f"(qm submit --team {was}) name it: renamed, its charts would split in two and those submits be "
                "refused. A team keeps its name once it has jobs; to show another name, put it in the description")

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        """Deleted with its empty quota rollups, as a GPU type is (`GpuType.delete`): a quota on a
        type with no nodes left only empty rows, which alone refused the deletion."""
        with transaction.atomic():
            forget_empty_quota_rollups(team=self)
            return super().delete(*args, **kwargs)


def name_given_is_reserved(record: Any, model: Any, kind: str) -> str | None:
    """Why `record`'s name, given new (created, or renamed), is one the showback keeps for its
    own rows (services/showback_names.py), or None. A name stored before the rule (7 Dec) is not
    judged again when the record's other fields change."""
    problem = reserved_name_problem(record.name or "", kind)
    if problem is None:
        return None
    if record.pk is not None and model.objects.filter(pk=record.pk, name=record.name).exists():
        return None
    return problem


def team_classes_problem(default: object, allowed: object) -> str | None:
    """A team's default priority class must be one it may use: a member's submit naming no
    class would otherwise be refused for the class the team gave it. The classes are a set: one
    named twice in a request (`["production", "production"]`) is said once (it was said twice,
    as if the team had two classes of that name)."""
    chosen = list(allowed or ())
    if default is None or not chosen or default in chosen:
        return None
    name = getattr(default, "name", default)
    names = sorted({str(getattr(c, "name", c)) for c in chosen})
    return (f"the team's default class {name} is not among the classes it may use "
            f"({', '.join(names)}): choose one of those, or tick {name} too")


class Membership(models.Model):
    """A user's role in a team. Finance users may belong to no team: they read every team."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team or '(no team)'} as {self.role}"

    def clean(self) -> None:
        """A member reads and submits for their teams: as member in no team a membership gives
        nothing (finance and admins read every team, and may be in none; finance is in none)."""
        if self.team_id is None and self.role == Role.MEMBER:
            raise ValidationError({"team": "A member belongs to a team: choose one (finance and admins may be in none)."})
        # finance reads every team (services.access ignores its team): "finance of vision" would mislead
        if self.team_id is not None and self.role == Role.FINANCE:
            raise ValidationError({"team": "Finance reads every team's costs and belongs to no team: leave the team "
                                           "empty (on the user's page, under Roles)."})
        # the unique constraint on (user, team) does not hold where team is NULL
        if self.team_id is None and self.user_id is not None:
            twin = Membership.objects.filter(user_id=self.user_id, team__isnull=True, role=self.role)
            if (twin.exclude(pk=self.pk) if self.pk is not None else twin).exists():
                raise ValidationError({"role": f"{self.user} is already {self.role} in no team."})


class Project(models.Model):
    """A team's project; showback groups cost by it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="projects")
    name = models.SlugField(max_length=64)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["team__name", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="project_unique_per_team")]

    def __str__(self) -> str:
        return f"{self.team.name}/{self.name}"

    def clean(self) -> None:
        """One project of a name per team (the unique constraint), said on the name and naming
        the project to change (the constraint said it on no field). A project with jobs stays its
        team's: its jobs stay that team's, and showback and the history keep its cost under it
        (moved, one project would read in two teams, its jobs in a project of another team)."""
        if reserved := name_given_is_reserved(self, Project, "project"):
            raise ValidationError({"name": reserved})
        if self.pk is not None and self.team_id is not None:
            was = Project.objects.filter(pk=self.pk).values_list("team_id", "team__name").first()
            if was is not None and was[0] != self.team_id:
                jobs = self.jobs.count()
                if jobs:
                    raise ValidationError({"team": (
                        f"project {self.name} has {jobs} job{'s' if jobs != 1 else ''} of team {was[1]}, and they "
                        f"stay {was[1]}'s: to run {self.team.name}'s work under this name, create a project "
                        f"{self.name} in team {self.team.name}")})
        if self.team_id is None or not self.name:
            return
        same = Project.objects.filter(team_id=self.team_id, name=self.name)
        other = (same.exclude(pk=self.pk) if self.pk is not None else same).values_list("pk", flat=True).first()
        if other is not None:
            raise ValidationError({"name": f"team {self.team.name} already has a project {self.name}: "
                                           f"change that one (id {other})"})
