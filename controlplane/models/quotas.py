from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from controlplane.models.field_names import FieldNamed, refusal
from controlplane.models.teams import Team, name_given_is_reserved

# The largest figure a quota may hold, in GPUs: ten times the largest fleets of 2026, and small
# enough that a day of it in GPU-seconds fits the accounting's columns (models/usage.py).
MAX_QUOTA_GPUS = 1_000_000
#: What a figure past MAX_QUOTA_GPUS is told, after the figure itself (the model and the admin's
#: boxes; the API after "This figure", at any size).
PAST_QUOTA_CEILING = f"is more than {MAX_QUOTA_GPUS:,} GPUs, the most a quota may name"
# The longest grace period a priority class may give, in seconds: a stop (a preemption, a cancel,
# a requeue) signals the job, waits the grace period, then kills it, and the GPUs stay the job's
# until then. An hour is room for a large model's checkpoint to reach slow storage, several times
# the few minutes Slurm's GraceTime and Kueue users give; beyond it a preempted job keeps its GPUs
# for hours (99999999 s was taken until 7 Dec: the class was unpreemptible in effect), and the
# engine, which plans each reservation the longest grace period of all classes ahead, backfills
# nothing in front of a waiting job. A database check holds it too (migration 0050).
MAX_GRACE_PERIOD_S = 3600


class Cohort(models.Model):
    """Teams in one cohort lend each other their unused quota."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Quota(models.Model):
    """A team's guarantee on one GPU type, and how far it may borrow or lend beyond it.

    A limit left empty means unlimited (as in Kueue's ClusterQueue). Quota counts GPUs only:
    CPUs and memory are fitted per node and weigh in fair share (DRF), and a quota on them was
    never enforced, so none is kept (migration 0033).
    """

    team = models.ForeignKey("controlplane.Team", on_delete=models.CASCADE, related_name="quotas")
    gpu_type = models.ForeignKey("controlplane.GpuType", on_delete=models.PROTECT, related_name="quotas",
                                 verbose_name="GPU type")
    nominal_gpus = models.PositiveIntegerField("nominal GPUs")
    borrowing_limit = models.PositiveIntegerField(null=True, blank=True)
    lending_limit = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["team__name", "gpu_type__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "gpu_type"], name="quota_unique_team_gpu_type"),
            # PositiveIntegerField already refuses negatives on PostgreSQL; the explicit checks
            # say so on every backend and name the rule in the error.
            models.CheckConstraint(condition=Q(nominal_gpus__gte=0), name="quota_nominal_not_negative"),
            models.CheckConstraint(
                condition=Q(borrowing_limit__isnull=True) | Q(borrowing_limit__gte=0),
                name="quota_borrowing_limit_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(lending_limit__isnull=True) | Q(lending_limit__gte=0),
                name="quota_lending_limit_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team.name} × {self.gpu_type.name}: {self.nominal_gpus}"

    def clean(self) -> None:
        """A team lends only its unused nominal quota, so a lending limit above nominal would
        promise what it never has (Kueue refuses it too). No figure passes MAX_QUOTA_GPUS: the
        accounting multiplies nominal GPUs by seconds into fixed-size columns, and a fat-fingered
        quota (the demo took 99999999999999) stopped every later rollup."""
        too_big = {
            name: f"{value} {PAST_QUOTA_CEILING}"
            for name in ("nominal_gpus", "borrowing_limit", "lending_limit")
            if (value := getattr(self, name)) is not None and value > MAX_QUOTA_GPUS
        }
        if too_big:
            raise ValidationError(too_big)
        self._refuse_second_quota()
        self._refuse_limits_without_cohort()
        if self.lending_limit is not None and self.nominal_gpus is not None \
                and self.lending_limit > self.nominal_gpus:
            raise ValidationError({"lending_limit": refusal(
                "%(lending)s is more than %(nominal)s (%(value)s): a team lends only its unused nominal quota; "
                "leave it empty to lend all of it.",
                lending=self.lending_limit, nominal=FieldNamed("nominal_gpus"), value=self.nominal_gpus)})


    def _refuse_limits_without_cohort(self) -> None:
        """A team in no cohort borrows from no one and lends to no one (the engine's ledger gives
        it nothing beyond nominal), so a borrowing or lending limit set on its quota would say what
        never happens: `qm quotas` read "MAY BORROW 16" while its jobs waited "can borrow 0 more".
        Refused on the field, as Kueue refuses a borrowingLimit without a cohort; 0 or empty is
        always taken. A team leaving its cohort has its quotas' limits cleared, each recorded
        (services/quotas.clear_limits_out_of_cohort; migration 0034 cleared those left before), so
        none is stored on such a quota; a limit the quota already had passes this check only
        because the team's admin page checks its quota rows before saving the move that clears
        them. A team not saved yet (the admin's *Add team* page checks its quota rows before the
        team is written) is judged by the cohort its form gives it: until 7 Dec it was skipped, and
        a new team in no cohort was stored with the limits this refuses."""
        if self.team_id is None and not Quota.team.is_cached(self):
            return
        if self.team.cohort_id is not None:
            return
        stored = None
        if self.pk is not None:
            stored = Quota.objects.filter(pk=self.pk).values("team_id", "borrowing_limit", "lending_limit").first()
        problems = {}
        for name, words in (("borrowing_limit", "borrows from no one"), ("lending_limit", "lends to no one")):
            value = getattr(self, name)
            if not value:
                continue
            if stored is not None and stored["team_id"] == self.team_id and stored[name] == value:
                continue
            problems[name] = refusal(
                "team %(team)s is in no cohort, so it %(words)s: a %(limit)s of %(value)s would never apply; put the "
                "team in a cohort first (its cohort field), or leave %(field)s empty",
                team=self.team.name, words=words, limit=name.replace("_", " "), value=value, field=FieldNamed(name))
        if problems:
            raise ValidationError(problems)

    def _refuse_second_quota(self) -> None:
        """A team has one quota per GPU type (the unique constraint): a second is refused on the
        field that made it one, naming the quota to change instead (the constraint alone said
        "The fields team, gpu_type must make a unique set." on no field in the API)."""
        if self.team_id is None or self.gpu_type_id is None:
            return
        others = Quota.objects.filter(team_id=self.team_id, gpu_type_id=self.gpu_type_id)
        other = (others.exclude(pk=self.pk) if self.pk is not None else others).values_list("pk", flat=True).first()
        if other is None:
            return
        field = "gpu_type"
        if self.pk is not None:
            stored = Quota.objects.filter(pk=self.pk).values_list("gpu_type_id", flat=True).first()
            if stored == self.gpu_type_id:
                field = "team"  # the type stayed: moving it to this team made it a second
        raise ValidationError({field: (
            f"team {self.team.name} already has a quota for {self.gpu_type.name}: change that one (id {other})")})


class PriorityClass(models.Model):
    """How important a job is, and what preempting it may cost."""

    name = models.SlugField(max_length=64, unique=True)
    value = models.IntegerField(help_text="Higher runs first.")
    description = models.CharField(max_length=200, blank=True)
    preemptible = models.BooleanField(default=True)
    may_preempt_lower = models.BooleanField(default=True)
    grace_period_s = models.PositiveIntegerField(
        "grace period (s)", default=30,
        help_text=f"A stopped job's time from SIGTERM to SIGKILL, to save a checkpoint and exit: at most "
                  f"{MAX_GRACE_PERIOD_S} s (an hour).")
    min_runtime_s = models.PositiveIntegerField(
        "min runtime (s)", default=0, help_text="A job runs at least this long before it may be preempted."
    )
    preemption_budget = models.PositiveIntegerField(
        default=3, help_text="Most preemptions of one job within the budget window."
    )
    budget_window_s = models.PositiveIntegerField("budget window (s)", default=86400)
    default_runtime_limit_s = models.PositiveIntegerField("default runtime limit (s)", default=4 * 3600)
    max_runtime_limit_s = models.PositiveIntegerField("max runtime limit (s)", default=7 * 86400)

    class Meta:
        ordering = ["-value", "name"]
        verbose_name_plural = "priority classes"
        constraints = [
            models.CheckConstraint(
                condition=Q(default_runtime_limit_s__lte=models.F("max_runtime_limit_s")),
                name="priority_class_default_limit_within_max",
            ),
            models.CheckConstraint(condition=Q(grace_period_s__lte=MAX_GRACE_PERIOD_S),
                                   name="priority_class_grace_period_within_an_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"

    def clean(self) -> None:
        """The default runtime limit within the maximum, said on the field and in the API's words
        (the check constraint alone gave the admin form "Constraint … is violated" above the form)."""
        default, most = self.default_runtime_limit_s, self.max_runtime_limit_s
        problems: dict[str, str | ValidationError] = {}
        if reserved := name_given_is_reserved(self, PriorityClass, "priority class"):
            problems["name"] = reserved
        # A job always runs under a limit above 0 (Job, job_runtime_limit_positive), and a submit
        # naming none takes the default: a 0 here made each such submit a 409 in the database's
        # words, and a maximum of 0 refused every limit.
        meant = {"default_runtime_limit_s": "the runtime limit a job of the class gets when it names none",
                 "max_runtime_limit_s": "the longest runtime limit a job of the class may name"}
        for name, limit in (("default_runtime_limit_s", default), ("max_runtime_limit_s", most)):
            if limit == 0:
                problems[name] = f"0 s lets no job run: give {meant[name]}, in seconds (3600: an hour)"
        if default and most is not None and default > most:
            problems["default_runtime_limit_s"] = refusal("%(default)s s is beyond %(max)s (%(most)s s)",
                                                          default=default, max=FieldNamed("max_runtime_limit_s"),
                                                          most=most)
        if (grace := self.grace_period_s) is not None and grace > MAX_GRACE_PERIOD_S:
            problems["grace_period_s"] = grace_period_refusal(grace)
        # A preemptible class whose minimum runtime passes its longest run, or whose budget window
        # counts nothing, quietly changed what preemption does (a typo made the class never
        # preemptible, or preemptible without end): said on the field instead.
        least, budget, window = self.min_runtime_s, self.preemption_budget, self.budget_window_s
        if self.preemptible and least is not None and most is not None and least > most:
            problems["min_runtime_s"] = refusal(
                "%(least)s s is beyond %(max)s (%(most)s s): no job of the class would ever run long enough to be "
                "preempted; to protect its jobs from preemption, set %(preemptible)s to false",
                least=least, max=FieldNamed("max_runtime_limit_s"), most=most, preemptible=FieldNamed("preemptible"))
        if self.preemptible and window == 0 and budget:
            problems["budget_window_s"] = (
                f"0 s counts no preemption, so the budget of {budget} would never protect a job; give the window "
                "the budget counts over (86400 s: a day)")
        if problems:
            raise ValidationError(problems)

    def sharing_value(self) -> list[str]:
        """The other classes with this class's value, by name. Allowed, as Kubernetes and Slurm
        allow it: the engine reads a value as a rank, not a key (scheduler_core/preemption.py
        preempts only a strictly lower value; the queue orders by value plus waiting time), so
        such classes are peers that differ in their other settings. Said, never refused
        (`value_shared_warning`): made by mistake, two classes meant to rank quietly do not."""
        if self.value is None:
            return []
        return list(PriorityClass.objects.filter(value=self.value).exclude(pk=self.pk)
                    .order_by("name").values_list("name", flat=True))

    def retirement_advice(self, where_one: str, where_many: str) -> str:
        """How to retire a class that history keeps from being deleted, for the admin's refusal
        and the API's: only the teams whose default it is need another (`where_one`,
        `where_many`: how the reader changes one team's default, or several teams'). A class that
        was no team's default was told to "give the teams whose default it is another one" (8 Dec)."""
        teams = list(Team.objects.filter(default_priority_class_id=self.pk).order_by("name")
                     .values_list("name", flat=True))
        if not teams:
            return "It is no team's default class; it stays for the reports."
        if len(teams) == 1:
            return f"To retire it, give team {teams[0]}, whose default it is, another default class {where_one}."
        return f"To retire it, give teams {', '.join(teams)}, whose default it is, another default class {where_many}."

    def budget_warning(self) -> str | None:
        """What a preemption budget of 0 means, for the admin's page and the API; None for any
        other budget. A spent budget protects a job from every preemption, a reclaim of borrowed
        GPUs included (scheduler_core/victims.py), so 0 keeps each job of the class where it runs
        for good, borrowed GPUs too; taken (a class lenders may never reclaim from is a choice),
        but said: 0 reads as "no limit" in many schedulers, and preemptible yes then does nothing."""
        if self.preemption_budget != 0:
            return None
        said = (f"Priority class {self.name} has a preemption budget of 0: no job of it is ever preempted, not even "
                "to give back GPUs its team borrowed beyond its quota (the lending team waits for them to end)")
        if self.preemptible:
            return (f"{said}, so preemptible yes does nothing. Give a budget of 1 or more (preemptions of one job "
                    "per budget window)")
        return (f"{said}. Preemptible no already keeps higher classes off its jobs; a budget of 1 or more lets a "
                "lending team reclaim its guarantee")

    def value_shared_warning(self, peers: list[str] | None = None) -> str | None:
        """What a value shared with other classes means, for the admin's page and the API; None
        when no other class has it. ``peers``: `sharing_value()`, when read already."""
        peers = self.sharing_value() if peers is None else peers
        if not peers:
            return None
        named = ", ".join(peers)
        one = len(peers) == 1
        return (f"Priority class {self.name} has the same value ({self.value}) as {named}: no job of "
                f"{'either' if one else 'any of them'} preempts another's for priority (a team reclaiming lent quota "
                "still may), and their waiting jobs are ordered by fair share and how long they have waited, not "
                "by class. Give it another value if it should rank above or below")


def grace_period_refusal(grace: int) -> str:
    """The refusal of a grace period beyond MAX_GRACE_PERIOD_S, with the bound and what the grace does."""
    long = f" ({grace / 86400:,.0f} days)" if grace >= 2 * 86400 else ""
    return (f"{grace} s{long} is beyond {MAX_GRACE_PERIOD_S} s (an hour), the longest grace period a class may give: "
            "a stopped job of the class keeps its GPUs that long after its SIGTERM; give the seconds its jobs need to "
            "save a checkpoint and exit (the default is 30)")
