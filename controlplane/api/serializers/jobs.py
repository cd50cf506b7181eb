"""A job as the API answers it: JobSerializer (the schema's description) and job_payload (the
same, built directly), what a page of jobs reads in one query (their dependencies, the GPUs and
nodes they hold), and the answers of a job's and an array's actions and of a job's explanation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from rest_framework import serializers

from controlplane.api.serializers.fields import NamedRecordField, WholeNumberField, one_rule_field_mapping
from controlplane.api.serializers.scheduling_loop import LoopStateSerializer
from controlplane.api.serializers.sentences import said
from controlplane.choices import LIVE_ALLOCATION_STATES, AllocationState, JobState
from controlplane.models import AllocationGpu, Job
from controlplane.services import eta_record, job_history
from controlplane.services.dependencies import of_jobs as dependencies_of_jobs
from controlplane.services.stopping import state_label


class _WhileWaiting:
    """A waiting job's place: its queue position and ETA, null once it no longer waits. A job
    cancelled while waiting keeps its last place row (its reason's numbers live there), and
    answered `"queue_position": 19, "eta": …` for a job that will never start."""

    def get_attribute(self, instance: Job) -> Any:
        return super().get_attribute(instance) if instance.state == JobState.PENDING else None  # type: ignore[misc]


class _QueuePositionField(_WhileWaiting, WholeNumberField):
    pass


class _EtaField(_WhileWaiting, serializers.DateTimeField):
    pass


class _EtaToldField(serializers.DateTimeField):
    """The first ETA of the wait that ended in its latest start: null once it is queued again
    (a requeue), until its next start."""

    def get_attribute(self, instance: Job) -> Any:
        return super().get_attribute(instance) if instance.started_at is not None else None


class _GpusHeldField(WholeNumberField):
    """The job's annotation when read with it, otherwise counted (see gpus_held)."""

    def get_attribute(self, instance: Any) -> int:
        return gpus_held(instance)


class _NodesField(serializers.ListField):
    """The job's page-wide read when read with it, otherwise one query (see nodes_held)."""

    def get_attribute(self, instance: Any) -> list[str]:
        return nodes_held(instance)


def _when(value: Any) -> str | None:
    if value is None:
        return None
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def attach_dependencies(jobs: Sequence[Job]) -> None:
    """Set each job's `dependencies` and `dependents` for the API, in one query whatever the
    page's length (services/dependencies.of_jobs)."""
    deps, dependents = dependencies_of_jobs([job.pk for job in jobs])
    for job in jobs:
        job.dependency_list = [  # type: ignore[attr-defined]
            {"job": d["job"], "condition": d["condition"], "satisfied_at": _when(d["satisfied_at"]), "state": d["state"]}
            for d in deps[job.pk]
        ]
        job.dependent_ids = dependents[job.pk]  # type: ignore[attr-defined]


def job_dependencies(job: Job) -> list[dict[str, Any]]:
    """The job's dependencies as the API says them: read with the page, otherwise one query."""
    if getattr(job, "dependency_list", None) is None:
        attach_dependencies([job])
    return list(job.dependency_list)  # type: ignore[attr-defined]


def job_dependents(job: Job) -> list[int]:
    if getattr(job, "dependent_ids", None) is None:
        attach_dependencies([job])
    return list(job.dependent_ids)  # type: ignore[attr-defined]


class _DependenciesField(serializers.ListField):
    def get_attribute(self, instance: Any) -> list[dict[str, Any]]:
        return job_dependencies(instance)


class _DependentsField(serializers.ListField):
    def get_attribute(self, instance: Any) -> list[int]:
        return job_dependents(instance)


class _StateLabelField(serializers.CharField):
    def get_attribute(self, instance: Any) -> str:
        return state_label(instance)


class _HistoryField:
    """A history figure (services/job_history.py): read with the page, otherwise one query."""

    figure: Callable[[Job], Any]

    def get_attribute(self, instance: Any) -> Any:
        return type(self).figure(instance)


class _ElapsedField(WholeNumberField):
    def get_attribute(self, instance: Any) -> int | None:
        return job_history.elapsed_seconds(instance, read_at(instance))


class _GpuHoursField(_HistoryField, serializers.FloatField):
    figure = job_history.gpu_hours


class _LostGpuHoursField(_HistoryField, serializers.FloatField):
    figure = job_history.lost_gpu_hours


class _RanOnField(_HistoryField, serializers.ListField):
    figure = job_history.ran_on


class _LastRunGpusField(_HistoryField, WholeNumberField):
    figure = job_history.last_run_gpus


def read_at(job: Job) -> datetime:
    """The moment a page of jobs was read (every running job's elapsed_s counts to the same
    instant), else now."""
    return getattr(job, "read_at", None) or datetime.now(UTC)


class JobSerializer(serializers.ModelSerializer):
    serializer_field_mapping = one_rule_field_mapping(serializers.ModelSerializer.serializer_field_mapping)
    team = NamedRecordField(slug_field="name", read_only=True)
    project = NamedRecordField(slug_field="name", read_only=True, allow_null=True)
    submitter = NamedRecordField(slug_field="username", read_only=True, allow_null=True)
    priority_class = NamedRecordField(slug_field="name", read_only=True)
    gpu_types = serializers.ListField(child=serializers.CharField(), read_only=True)
    env = serializers.DictField(child=serializers.CharField(), read_only=True)
    roles = serializers.ListField(
        child=serializers.DictField(), read_only=True,
        help_text="A heterogeneous gang's roles (each: name, count, gpus_per_member, gpu_types, "
                  "min_gpu_memory_gb, cpus_per_gpu, memory_gb_per_gpu); empty for any other job.",
    )
    dependencies = _DependenciesField(
        child=serializers.DictField(), read_only=True,
        help_text="The jobs it waits on (Slurm's --dependency), each: job, condition (after, afterok, afternotok, "
                  "afterany), satisfied_at (null until met) and the job's state now; empty for none.",
    )
    dependents = _DependentsField(
        child=WholeNumberField(), read_only=True,
        help_text="The ids of the jobs that wait on this one (their `dependencies` name it).",
    )
    singleton = serializers.BooleanField(
        read_only=True,
        help_text="Slurm's --dependency=singleton: it starts only when no other job of its submitter and name "
                  "runs or waits ahead of it (given as the dependency `singleton`).",
    )
    # The reason's sentences with their numbers, the queue position and the ETA are read
    # through the job's PendingPlace (Job.pending_message and the like).
    pending_message = serializers.CharField(read_only=True)
    pending_would_start_if = serializers.CharField(read_only=True)
    queue_position = _QueuePositionField(
        read_only=True, allow_null=True,
        help_text="1-based place in the last cycle's queue among the jobs it left waiting (held jobs ranked after "
                  "every job in line); null unless pending, and null for a job waiting for a dependency, which is "
                  "not in the queue (`pending_would_start_if` says until what).")
    eta = _EtaField(read_only=True, allow_null=True,
                    help_text="The engine's estimated start, if it could give one; null unless pending, and null "
                              "for a job waiting for a dependency, which is not in line until it is met "
                              "(`pending_would_start_if` says until what: 'job 412 succeeds'; its page and qm say "
                              "'none until job 412 succeeds').")
    eta_told = _EtaToldField(
        read_only=True, allow_null=True,
        help_text="The first ETA the scheduler told it in the wait that ended in its latest start (null if that "
                  "wait had none, or it has not started since it was queued): compare with `started_at`. "
                  "GET metrics/etas/ says how far these held over the fleet.")
    eta_told_at = _EtaToldField(
        read_only=True, allow_null=True, help_text="When the scheduler first told it `eta_told`.")
    growth_code = serializers.CharField(
        read_only=True,
        help_text="A running elastic job below `max_gpus` that the last cycle did not grow: why, as a code "
                  "(GrowthOff, QueueFirst, NotWorthIt, GrowthQuota, BehindReservation, NoRoom, "
                  "MaintenanceWindow); empty otherwise.")
    growth_note = serializers.CharField(
        read_only=True, help_text="The same in a sentence with its numbers; empty otherwise.")
    held_by = NamedRecordField(
        slug_field="username", read_only=True, allow_null=True,
        help_text="Who placed the hold (`hold`: `user` or `admin`, empty when not held), since `held_at`.")
    state_label = _StateLabelField(
        read_only=True,
        help_text="What the state means now: the state itself, except for a job being stopped (state "
                  "`preempting` whatever stops it), which says why: `preempting`, `stopping: cancelled`, "
                  "`stopping: runtime limit`, `stopping: resize`, `stopping: requeue` (`stopping: requeue held`: "
                  "POST jobs/{id}/requeue/), `stopping: gang member exited`, "
                  "`stopping: gang member failed` (`stopping` when the reason is unknown).",
    )
    gpus_held = _GpusHeldField(
        read_only=True,
        help_text="GPUs the job holds now (its live allocations); 0 when it holds none. `gpus` is the size it "
                  "asked for: an elastic job runs anywhere between `min_gpus` and `max_gpus`.",
    )

    nodes = _NodesField(
        child=serializers.CharField(), read_only=True,
        help_text="The nodes the job holds GPUs on now, by name (as `scontrol show job` says NodeList); empty when "
                  "it holds none. A stopping job keeps those it has not yet given back.",
    )

    elapsed_s = _ElapsedField(
        read_only=True, allow_null=True,
        help_text="Seconds its latest run lasted, from `started_at` to `finished_at` (to now while it runs or "
                  "stops), as sacct's Elapsed; null when it is not running and has not started since it was "
                  "last queued (pending, requeued, or cancelled before it ever started).",
    )
    gpu_hours = _GpuHoursField(
        read_only=True,
        help_text="GPU-hours it held over all its runs (every allocation, bind to release, a preempted run "
                  "included): the accounting's allocated GPU-hours, as the job page's cost says them, as of the "
                  "last rollup (~15 s behind).",
    )
    lost_gpu_hours = _LostGpuHoursField(
        read_only=True,
        help_text="GPU-hours of work its preemptions and other requeues threw away (`lost_gpu_seconds` / 3600).",
    )
    ran_on = _RanOnField(
        child=serializers.CharField(), read_only=True,
        help_text="Every node it ever held GPUs on, in any run, sorted (`nodes` is where it holds GPUs now).",
    )
    last_run_gpus = _LastRunGpusField(
        read_only=True, allow_null=True,
        help_text="GPUs its latest run held (the run `elapsed_s` measures): what an elastic job really ran on, "
                  "where `gpus` is what it asked for; null when it never held any.",
    )

    class Meta:
        model = Job
        fields = [
            "id", "name", "team", "project", "submitter", "priority_class", "workload",
            "gpus", "gpus_per_node", "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu", "memory_gb_per_gpu",
            "topology", "members_on_distinct_nodes", "min_gpus", "max_gpus", "roles", "gpus_held", "nodes", "runtime_limit_s", "checkpoint_interval_s", "command",
            "env", "array_id", "array_index", "array_task_limit", "dependencies", "dependency_mode", "dependents", "singleton",
            "state", "state_label", "submitted_at", "started_at", "finished_at", "state_changed_at", "exit_code", "borrowed",
            "pending_code", "pending_message", "pending_resolvable", "pending_would_start_if",
            "queue_position", "eta", "eta_told", "eta_told_at", "growth_code", "growth_note",
            "steps", "useful_tokens", "last_checkpoint_at", "preemption_count", "requeue_count", "lost_gpu_seconds",
            "hold", "held_at", "held_by", "hold_reason",
            "elapsed_s", "gpu_hours", "lost_gpu_hours", "ran_on", "last_run_gpus",
        ]
        read_only_fields = fields


def _held_gpus() -> QuerySet[AllocationGpu]:
    """GPUs held now, counted as `metrics/queue/` counts running GPUs: the live GPU rows of live
    allocations."""
    return AllocationGpu.objects.filter(live=True, allocation__state__in=LIVE_ALLOCATION_STATES)


def gpus_held_expression() -> Coalesce:
    """The GPUs a job holds now, as an annotation (`.annotate(gpus_held=gpus_held_expression())`)
    for a query reading one job. Not for a filtered list: under the filters' SELECT DISTINCT,
    PostgreSQL evaluates it for every matching row before the LIMIT (a list of 200 of 16,666
    running jobs took 182 ms instead of 79); lists use attach_gpus_held."""
    held = (
        _held_gpus().filter(allocation__job=OuterRef("pk"))
        .order_by().values("allocation__job").annotate(n=Count("id")).values("n")
    )
    return Coalesce(Subquery(held, output_field=IntegerField()), 0)


def attach_gpus_held(jobs: Sequence[Job]) -> None:
    """Set `gpus_held` on each job of a page, and `stop_reason` on its stopping jobs (for
    `state_label`), in one query whatever the page's length."""
    if not jobs:
        return
    held: dict[int, int] = {}
    where: dict[int, set[str]] = {}
    reasons: dict[int, tuple[int, str]] = {}
    for job_id, state, generation, reason, node, n in (
        _held_gpus().filter(allocation__job_id__in=[job.pk for job in jobs]).order_by()
        .values("allocation__job_id", "allocation__state", "allocation__generation", "allocation__release_reason",
                "node__name")
        .annotate(n=Count("id"))
        .values_list("allocation__job_id", "allocation__state", "allocation__generation",
                     "allocation__release_reason", "node__name", "n")
    ):
        held[job_id] = held.get(job_id, 0) + n
        where.setdefault(job_id, set()).add(node)
        if state == AllocationState.RELEASING and generation > reasons.get(job_id, (-1, ""))[0]:
            reasons[job_id] = (generation, reason)
    for job in jobs:
        job.gpus_held = held.get(job.pk, 0)  # type: ignore[attr-defined]
        job.nodes_held = sorted(where.get(job.pk, ()))  # type: ignore[attr-defined]
        if job.pk in reasons:
            job.stop_reason = reasons[job.pk][1]  # type: ignore[attr-defined]


def gpus_held(job: Job) -> int:
    """The annotation when the job was read with it, otherwise one count."""
    held = getattr(job, "gpus_held", None)
    if held is None:
        held = _held_gpus().filter(allocation__job=job).count()
    return int(held)


def nodes_held(job: Job) -> list[str]:
    """The nodes the job holds GPUs on now, by name: read with the page (attach_gpus_held),
    otherwise one query."""
    nodes = getattr(job, "nodes_held", None)
    if nodes is None:
        nodes = list(_held_gpus().filter(allocation__job=job).order_by("node__name")
                     .values_list("node__name", flat=True).distinct())
    return list(nodes)


def job_payload(job: Job) -> dict[str, Any]:
    """JobSerializer's output, built directly: the submit path answers hundreds of times a
    second, and instantiating a 40-field ModelSerializer costs more than the rest of the
    response. JobSerializer stays the schema's description; a test keeps the two identical."""
    def when(value: Any) -> str | None:
        if value is None:
            return None
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    waiting = job.state == JobState.PENDING  # a job cancelled while waiting keeps its place row
    return {
        "id": job.pk, "name": job.name, "team": job.team.name if job.team_id else None,
        "project": job.project.name if job.project_id else None,
        "submitter": job.submitter.get_username() if job.submitter_id else None,
        "priority_class": job.priority_class.name, "workload": job.workload,
        "gpus": job.gpus, "gpus_per_node": job.gpus_per_node, "gpu_types": list(job.gpu_types),
        "min_gpu_memory_gb": job.min_gpu_memory_gb, "cpus_per_gpu": job.cpus_per_gpu,
        "memory_gb_per_gpu": job.memory_gb_per_gpu, "topology": job.topology,
        "members_on_distinct_nodes": job.members_on_distinct_nodes, "min_gpus": job.min_gpus,
        "max_gpus": job.max_gpus, "roles": [dict(role) for role in job.roles or ()], "gpus_held": gpus_held(job), "nodes": nodes_held(job), "runtime_limit_s": job.runtime_limit_s,
        "checkpoint_interval_s": job.checkpoint_interval_s, "command": job.command, "env": dict(job.env),
        "array_id": str(job.array_id) if job.array_id else None, "array_index": job.array_index,
        "array_task_limit": job.array_task_limit,
        "dependencies": job_dependencies(job), "dependency_mode": job.dependency_mode,
        "dependents": job_dependents(job), "singleton": job.singleton,
        "state": job.state, "state_label": state_label(job), "submitted_at": when(job.submitted_at), "started_at": when(job.started_at),
        "finished_at": when(job.finished_at), "state_changed_at": when(job.state_changed_at),
        "exit_code": job.exit_code, "borrowed": job.borrowed, "pending_code": job.pending_code,
        "pending_message": said(job.pending_message), "pending_resolvable": job.pending_resolvable,
        "pending_would_start_if": said(job.pending_would_start_if), "queue_position": job.queue_position if waiting else None,
        "eta": when(job.eta) if waiting else None, "eta_told": when(job.eta_told) if job.started_at else None,
        "eta_told_at": when(job.eta_told_at) if job.started_at else None,
        "growth_code": job.growth_code, "growth_note": said(job.growth_note),
        "steps": job.steps, "useful_tokens": job.useful_tokens,
        "last_checkpoint_at": when(job.last_checkpoint_at), "preemption_count": job.preemption_count,
        "requeue_count": job.requeue_count, "lost_gpu_seconds": job.lost_gpu_seconds,
        "hold": job.hold, "held_at": when(job.held_at), "held_by": job.held_by.get_username() if job.held_by_id else None,
        "hold_reason": job.hold_reason,
        "elapsed_s": job_history.elapsed_seconds(job, read_at(job)), "gpu_hours": job_history.gpu_hours(job),
        "lost_gpu_hours": job_history.lost_gpu_hours(job), "ran_on": job_history.ran_on(job),
        "last_run_gpus": job_history.last_run_gpus(job),
    }


class JobDetailSerializer(JobSerializer):
    """`GET jobs/{id}/`: the job, and the scheduling loop's state, as jobs/ pages and explain/
    carry it (its queue position, ETA and reason are the last cycle's word)."""

    loop = LoopStateSerializer(read_only=True, help_text="The scheduling loop, as /healthz says it: a waiting "
                               "job's reason, place and ETA are as of its last cycle.")

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "loop"]


class JobArraySerializer(serializers.Serializer):
    array_id = serializers.UUIDField()
    name = serializers.CharField()
    team = serializers.CharField()
    count = WholeNumberField()
    states = serializers.DictField(child=WholeNumberField(), help_text="Tasks per state.")
    state_labels = serializers.DictField(
        child=WholeNumberField(),
        help_text="Tasks per state_label: the states, a stopping task counted by why it stops "
                  "('stopping: cancelled', 'preempting', ...).",
    )
    held = WholeNumberField(
        help_text="How many of its pending tasks are held (out of the queue until released); they are among "
                  "`pending` in `states` and `state_labels`.",
    )
    job_ids = serializers.ListField(child=WholeNumberField(), help_text="Job ids in index order.")
    indices = serializers.ListField(child=WholeNumberField())
    array_task_limit = WholeNumberField(
        allow_null=True, help_text="At most this many of its tasks hold GPUs at once (Slurm's `%N`); null: no limit.")


class JobArrayLimitResultSerializer(JobArraySerializer):
    """`PATCH job-arrays/{array_id}/`: the array after the change, and what it did."""

    changed = serializers.BooleanField(help_text="False when the array already had that limit.")
    was = WholeNumberField(allow_null=True, help_text="The limit before (null: none).")
    detail = serializers.CharField()


class JobArrayCancelSerializer(JobArraySerializer):
    """`POST job-arrays/{array_id}/cancel/`: the array after the cancel, and what it did."""

    cancelled = WholeNumberField(help_text="Tasks cancelled at once (they were waiting).")
    stopping = WholeNumberField(help_text="Running tasks told to stop: they end cancelled once their "
                                                  "processes exit (the class's grace period).")
    skipped = WholeNumberField(help_text="Tasks already stopping (a cancel, their runtime limit, a gang "
                                                 "member's exit) or that changed state meanwhile: not cancelled.")
    detail = serializers.CharField()


class LikelyStartSerializer(serializers.Serializer):
    """A waiting job's likely start by the ETA record of its size class (services/eta_record.py)."""

    at = serializers.DateTimeField(
        help_text="first_eta.told_at + (first_eta.at - first_eta.told_at) × share_of_wait: counted from the first ETA "
                  "it was told in this wait, as the record judges ETAs, so it holds still while the job waits (it "
                  "moves only as the record does, and starts afresh with a new wait).")
    passed = serializers.BooleanField(
        help_text="`at` is past: the job waits longer than the median job of its size class did.")
    share_of_wait = serializers.FloatField(
        help_text="The median share of the wait first told that the jobs of its size class judged had (metrics/etas/ "
                  "size_classes[].median_share_of_wait).")
    judged = WholeNumberField(help_text="Jobs of its size class that started in the last `days` after "
                                                "waiting with an ETA (at least 20, or no likely start is given).")
    on_time = serializers.FloatField(help_text="Share of them that started by the first ETA they were told.")
    days = WholeNumberField(help_text="The record's window, in days.")
    size_class = serializers.ChoiceField(
        choices=list(eta_record.SIZE_CLASSES),
        help_text="The record it rests on: small, fewer GPUs than the fleet's largest node; large, at least that "
                  "many (whole nodes).")
    node_gpus = WholeNumberField(help_text="The GPUs of the fleet's largest node, where the classes split.")


class NoLikelyStartSerializer(serializers.Serializer):
    """Why a waiting job with an ETA ahead is told no likely start (services/eta_record.py no_likely_start)."""

    code = serializers.ChoiceField(
        choices=list(eta_record.NO_LIKELY_START_CODES),
        help_text="no_record: no job waited with an ETA and started in the last `days`; no_node: the fleet has no "
                  "node to tell sizes by; too_few_of_its_size: fewer than `needed` jobs of its size class judged; "
                  "not_sooner_than_told: its class's median share of the wait told is not below one; "
                  "eta_came_forward: its ETA now comes before that share of the wait it was first told; "
                  "eta_moved_back: its ETA has moved back since it was first told (by over a minute) and that share "
                  "of the first wait is still ahead, where it would read too early.")
    reason = serializers.CharField(
        help_text="The same in the job page's words, after its 'No likely start: ' (qm explain: 'likely start: none: ').")
    size_class = serializers.ChoiceField(choices=list(eta_record.SIZE_CLASSES), allow_null=True,
                                         help_text="Its size class; null for no_record and no_node.")
    node_gpus = WholeNumberField(allow_null=True, help_text="Where the classes split (the fleet's largest "
                                                                    "node's GPUs); null as size_class.")
    judged = WholeNumberField(help_text="Jobs of its size class judged in the last `days`.")
    needed = WholeNumberField(help_text="Jobs of its class it takes to tell a likely start (20).")
    share_of_wait = serializers.FloatField(
        allow_null=True, help_text="not_sooner_than_told, eta_came_forward and eta_moved_back: its class's median "
                                   "share of the wait told; else null.")
    days = WholeNumberField(help_text="The record's window, in days.")


class FirstEtaSerializer(serializers.Serializer):
    """The first ETA a waiting job was told in this wait (services/eta_record.py FirstEta)."""

    at = serializers.DateTimeField(help_text="The first ETA of this wait, kept as the ETA moves (a requeue, a hold or "
                                             "a change of the job starts a new wait); `eta_told` once it starts.")
    told_at = serializers.DateTimeField(help_text="When the scheduler told it (`eta_told_at` once it starts).")
    late_s = serializers.FloatField(help_text="Seconds it is now past that first ETA (0 before it).")


class EtaOwnClassSerializer(serializers.Serializer):
    size_class = serializers.ChoiceField(choices=list(eta_record.SIZE_CLASSES))
    node_gpus = WholeNumberField(help_text="Where the classes split: the GPUs of the fleet's largest node.")
    judged = WholeNumberField()
    on_time = serializers.FloatField(allow_null=True)
    median_share_of_wait = serializers.FloatField(allow_null=True)


class EtaLatelySerializer(serializers.Serializer):
    """How far the ETAs told held lately, beside a waiting job's ETA: the record its page says
    (services/eta_record.py fleet_record, at most a minute old), the fleet's and its size class's."""

    days = WholeNumberField()
    judged = WholeNumberField(help_text="Jobs that started in the last `days` after waiting with an ETA.")
    on_time = serializers.FloatField(allow_null=True)
    median_share_of_wait = serializers.FloatField(allow_null=True)
    own_class = EtaOwnClassSerializer(allow_null=True, help_text="The same over the jobs of its size class; null "
                                                                 "when no job is judged or the fleet has no node.")


class ExplanationSerializer(serializers.Serializer):
    """Why a job is where it is: for a waiting job, the engine's reason code and sentence."""

    job = WholeNumberField()
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    state_label = serializers.CharField(
        help_text="The job's state_label: its state, or for a stopping job why it stops ('stopping: cancelled').")
    reason_code = serializers.CharField(help_text="PascalCase reason, e.g. QuotaExceeded; empty when not waiting.")
    reason = serializers.CharField(help_text="A sentence with numbers.")
    resolvable = serializers.BooleanField(help_text="False when waiting cannot help: the job can never run as asked.")
    queue_position = WholeNumberField(
        allow_null=True, help_text="Its place in the last cycle's queue, as on the job: null once it no longer waits, "
                                   "and for a job waiting for a dependency (not in the queue: `would_start_if` says "
                                   "until what).")
    eta = serializers.DateTimeField(
        allow_null=True, help_text="The start the engine can promise at the latest (by runtime limits), if any; null "
                                   "for a job waiting for a dependency, not in line until it is met (`would_start_if` "
                                   "says until what: 'job 412 succeeds').")
    would_start_if = serializers.CharField(help_text="What would let it start.")
    first_eta = FirstEtaSerializer(
        allow_null=True, help_text="A waiting job with an ETA: the first ETA it was told in this wait, when, and how "
                                   "far past it the job is; null otherwise.")
    eta_record = EtaLatelySerializer(
        allow_null=True, help_text="A waiting job with an ETA: how far ETAs held lately, as its page says beside it "
                                   "(the fleet's and its size class's); null otherwise.")
    likely_start = LikelyStartSerializer(
        allow_null=True, help_text="Where a waiting job's start lands at the median share of the wait first told "
                                   "that the jobs of its size class judged lately had (GET metrics/etas/), counted "
                                   "from its first ETA; null with no ETA ahead, fewer than 20 jobs of its class "
                                   "judged, a median share not below one, or an ETA come forward before it.")
    likely_start_missing = NoLikelyStartSerializer(
        allow_null=True, help_text="A waiting job with an ETA ahead and no likely_start: why not; null otherwise.")
    growth_code = serializers.CharField(
        help_text="A running elastic job below its maximum that the last cycle did not grow: why (the job's "
                  "growth_code); empty otherwise.")
    growth_note = serializers.CharField(help_text="The same in a sentence; empty otherwise.")
    loop = LoopStateSerializer(help_text="The scheduling loop, as /healthz says it: a waiting job's reason, place "
                               "and ETA are as of its last cycle.")


class JobArrayRequeueSerializer(JobArraySerializer):
    """`POST job-arrays/{array_id}/requeue/`: the array after it, and what it did."""

    requeued = serializers.ListField(child=WholeNumberField(),
                                     help_text="Ids of the running tasks now stopping to be requeued.")
    not_running = WholeNumberField(help_text="Tasks in none of the states asked (by default: waiting or "
                                                     "ended), or waiting again by their turn: left as they are.")
    stopping = WholeNumberField(help_text="Tasks already stopping (preempted, cancelled, ...), or that "
                                                  "began stopping meanwhile: left to that stop.")
    ended_meanwhile = serializers.ListField(
        child=WholeNumberField(),
        help_text="Ids of the running tasks (of the states asked) that ended between the read and their stop "
                  "(their exit was being settled): left as they ended, not requeued.")
    rerun = serializers.ListField(child=WholeNumberField(),
                                  help_text="Ids of the ended tasks (of the states asked) now back in the queue.")
    not_requeued = serializers.ListField(
        child=serializers.DictField(),
        help_text="Ended tasks of the states asked that were refused, each {job, state, detail, errors}: a dependency "
                  "that can never be met, no longer valid as a submit, still stopping.")
    detail = serializers.CharField()


class JobArrayHoldSerializer(JobArraySerializer):
    """`POST job-arrays/{array_id}/hold/` and `release/`: the array after it, and what it did."""

    changed = serializers.ListField(child=WholeNumberField(), help_text="Ids of the tasks held (released).")
    unchanged = WholeNumberField(help_text="Waiting tasks already so: held already (not held).")
    not_waiting = WholeNumberField(help_text="Tasks running or ended: only a waiting task is held or released.")
    refused = WholeNumberField(help_text="Tasks under an admin's hold, which only an admin releases.")
    reworded = serializers.ListField(
        child=WholeNumberField(),
        help_text="Ids of the tasks among `changed` already held by the same kind of holder whose reason alone "
                  "changed (a hold with another reason; who holds them and since when stay). Empty for a release.")
    detail = serializers.CharField()


class CancelResultSerializer(serializers.Serializer):
    job = JobSerializer()
    detail = serializers.CharField()


class JobChangeSerializer(serializers.Serializer):
    """The answer to a hold, release or change of a job: the job as it is now, and what was done."""

    job = JobSerializer()
    changed = serializers.BooleanField(help_text="False when the job already was as asked (held, not held, ...).")
    changes = serializers.DictField(
        child=serializers.ListField(), required=False,
        help_text="PATCH only: each field changed, [old, new] (a project or class by name).")
    detail = serializers.CharField(help_text="What was done, in one sentence.")
