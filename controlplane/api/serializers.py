"""Serializers: the API's shapes. They type and bound the input; rules that need the database
(defaults, names, what the fleet can run) live in services/jobs.py."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils.dateparse import parse_datetime
from rest_framework import serializers
from rest_framework.fields import SkipField, get_error_detail

from controlplane.choices import (
    LIVE_ALLOCATION_STATES,
    AllocationState,
    DependencyCondition,
    DependencyMode,
    JobState,
    Topology,
    WorkloadClass,
)
from controlplane.models import (
    AllocationGpu,
    Cohort,
    Event,
    GpuType,
    Job,
    Node,
    PriceRate,
    PriorityClass,
    Project,
    Quota,
    Team,
)
from controlplane.models.fleet import GPU_MEMORY_WORDS, MAX_GPU_MEMORY_GB, MIN_GPU_MEMORY_GB
from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.services import dependency_text, eta_record, job_history, job_runs, nodes, quotas
from controlplane.services import holds as holds_service
from controlplane.services import jobs as job_service
from controlplane.services.dependencies import MAX_DEPENDENCIES
from controlplane.services.dependencies import of_jobs as dependencies_of_jobs
from controlplane.services.hold_text import reason_problem
from controlplane.services.instants import no_zone_said
from controlplane.services.jobs import MAX_ARRAY_TASKS, MAX_RUNTIME_LIMIT_ASKED, SubmitRequest
from controlplane.services.jobs import env_problem as job_env_problem
from controlplane.services.jobs import shape_errors as job_shape_errors
from controlplane.services.stopping import state_label

# PostgreSQL `integer` columns; anything above is refused as a 400, not a database error.
MAX_INT = 2**31 - 1
#: Job ids are bigints (PostgreSQL's; SQLite's integers are as wide).
MAX_JOB_ID = 2**63 - 1
# The most GPUs one job may ask for, whatever the fleet: bounds the engine's work per job.
MAX_JOB_GPUS = 65_536
MAX_GPUS_PER_NODE = 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StrictFieldsMixin:
    """Refuse fields the resource does not have, instead of silently dropping a typo like
    `gpu_per_node` and running the job with a shape nobody asked for."""

    def to_internal_value(self, data: Any) -> Any:
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            known = set(self.fields)  # type: ignore[attr-defined]
            writable = sorted(n for n, f in self.fields.items() if not f.read_only)  # type: ignore[attr-defined]
            unknown = {
                str(k): [f"Unknown field. Accepted fields: {', '.join(writable)}."]
                for k in data
                if k not in known
            }
            unknown.update(self._read_only_changes(data))
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                exc.detail.update({k: [serializers.ErrorDetail(m[0], code="unknown")] for k, m in unknown.items()})
            raise
        if unknown:
            raise serializers.ValidationError(unknown, code="unknown")
        return value

    def _read_only_changes(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        """Read-only fields whose value says what the caller wants (Meta.set_elsewhere: field →
        where it is set), given with a value they do not have: refused rather than dropped, so
        nobody believes a cohort gained a team or a node went down. The value they do have (a
        body read, changed and written back) passes."""
        elsewhere: dict[str, str] = getattr(getattr(self, "Meta", None), "set_elsewhere", {})
        refused: dict[str, list[str]] = {}
        instance = getattr(self, "instance", None)
        for name, where in elsewhere.items():
            if name not in data:
                continue
            given = data[name]
            if instance is None:
                current: Any = [] if isinstance(given, list) else None
            else:
                field = self.fields[name]  # type: ignore[attr-defined]
                attribute = field.get_attribute(instance)
                # as DRF's to_representation: a null stays null (a node in no maintenance window)
                current = None if attribute is None else field.to_representation(attribute)
            same = (sorted(map(str, given)) == sorted(map(str, current))
                    if isinstance(given, list) and isinstance(current, list) else given == current)
            if not same:
                refused[name] = [f"Read-only here: {where}."]
        return refused


class ConstraintCheckedModelSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    """Runs the model's database constraints and its own ``clean()`` rules in Python before
    writing (as the admin's forms do), so a violation is a 400 naming the rule rather than an
    IntegrityError or a record the admin would have refused."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        model = self.Meta.model
        if self.instance is not None:
            candidate = model(**{f.attname: getattr(self.instance, f.attname) for f in model._meta.concrete_fields})
            candidate._state.adding = False
        else:
            candidate = model()
        for name, value in attrs.items():
            setattr(candidate, name, value)
        try:
            # clean() first, as Django's full_clean: its words name the field (a quota's second
            # for one GPU type), where a constraint's say "… already exists." on no field.
            candidate.clean()
            candidate.validate_constraints()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(get_error_detail(exc)) from exc
        return attrs


class NamedChoiceField(serializers.ChoiceField):
    """A choice whose refusal lists the choices: DRF's "\"same_rack\" is not a valid choice."
    left a `topology`, `workload` or dependency `condition` to guess (as `?state=` did: the list
    filters say "'runing' is not a valid choice; choose one of: …" in the same words)."""

    def __init__(self, **kwargs: Any) -> None:
        given = kwargs.get("error_messages") or {}
        super().__init__(**kwargs)
        if "invalid_choice" not in given:
            listed = ", ".join(str(key) for key in self.choices).replace("{", "{{").replace("}", "}}")
            self.error_messages["invalid_choice"] = f"'{{input}}' is not a valid choice; choose one of: {listed}."


def _positive(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=MAX_INT, **kwargs)


def _count(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, max_value=MAX_INT, **kwargs)


# Control characters (C0, DEL, C1) and bidirectional overrides: a name is one line of visible
# text, never an escape sequence for whoever prints it. (NUL has DRF's own message.)
_INVISIBLE = re.compile("[\x01-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_INVISIBLE_MESSAGE = "control characters (escape sequences, new lines, tabs) are not allowed in a name"


class NamedRecordField(serializers.SlugRelatedField):
    """A related record given by its name. Text PostgreSQL cannot store (NUL) cannot name a
    record either: refused as CharField refuses it, instead of a 500 from the lookup. A name
    that is no record is refused in words ("no cohort named 'shared'"), with the names there
    are when `lists_names` (records everyone may know of: cohorts, priority classes, GPU
    types), where DRF said "Object with name=shared does not exist."."""

    def __init__(self, *, lists_names: bool = False, **kwargs: Any) -> None:
        self.lists_names = lists_names
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            raise serializers.ValidationError("Null characters are not allowed.", code="null_characters_not_allowed")
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as refused:
            queryset = self.get_queryset()
            if not isinstance(data, str | int) or getattr(refused, "get_codes", lambda: None)() != ["does_not_exist"]:
                raise
            label = str(queryset.model._meta.verbose_name).replace("gpu ", "GPU ")
            plural = str(queryset.model._meta.verbose_name_plural).replace("gpu ", "GPU ")
            said = f"no {label} named '{str(data)[:64]}'"
            if self.lists_names:
                names = list(queryset.order_by(self.slug_field).values_list(self.slug_field, flat=True)[:11])
                said += (f": {plural} are " + ", ".join(names[:10])
                         + (", …" if len(names) > 10 else "") if names else f": there is no {label} yet")
            raise serializers.ValidationError(said, code="does_not_exist") from None


class NameField(serializers.CharField):
    """A short name people read in lists and terminals."""

    def to_internal_value(self, data: Any) -> str:
        value: str = super().to_internal_value(data)
        if _INVISIBLE.search(value):
            raise serializers.ValidationError(_INVISIBLE_MESSAGE)
        return value


class HoldReasonField(serializers.CharField):
    """Why a job is held, in its holder's words: one line of visible text, a string only (a
    number or a list is not a reason), at most HOLD_REASON_MAX_LENGTH characters; the rest of
    its rules are the service's (services/hold_text.reason_problem)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("max_length", HOLD_REASON_MAX_LENGTH)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError(f"a reason is a string (one line of text), not {type(data).__name__}")
        value: str = super().to_internal_value(data)
        problem = reason_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class HoldSerializer(StrictFieldsMixin, serializers.Serializer):
    """`POST jobs/{id}/hold/` and `job-arrays/{id}/hold/`: an optional reason."""

    reason = HoldReasonField(help_text="Why it is held, in your words (one line, at most "
                                       f"{HOLD_REASON_MAX_LENGTH} characters): said in its explanation and "
                                       "the job.held event; cleared on release.")


class RequeueSerializer(StrictFieldsMixin, serializers.Serializer):
    """`POST jobs/{id}/requeue/` and `job-arrays/{id}/requeue/`: whether it comes back held, and why."""

    hold = serializers.BooleanField(required=False, default=False,
                                    help_text="Come back held (Slurm's requeuehold): out of the queue until released "
                                              "(POST jobs/{id}/release/). An admin's is an admin's hold.")
    reason = HoldReasonField(help_text="Why it is requeued, in your words (one line, at most "
                                       f"{HOLD_REASON_MAX_LENGTH} characters): said in its reason (\"Requeued by "
                                       "alice: ...\"), its events and, with hold, as the hold's reason.")


class ArrayRequeueSerializer(RequeueSerializer):
    """`POST job-arrays/{id}/requeue/`: as a job's, and which tasks: by their state."""

    states = serializers.ListField(
        child=serializers.ChoiceField(
            choices=["running", "succeeded", "failed", "cancelled", "timed_out"],
            error_messages={"invalid_choice": "\"{input}\" cannot be requeued; choose among running, succeeded, "
                                              "failed, cancelled, timed_out"}),
        required=False, allow_empty=False, default=["running"],
        help_text="The states of the tasks to requeue (default [\"running\"]): running tasks are stopped and "
                  "requeued, ended ones (succeeded, failed, cancelled, timed_out) go back to the queue at once, "
                  "e.g. [\"failed\", \"timed_out\"] reruns a sweep's failed tasks and leaves the running ones.")


class EnvField(serializers.DictField):
    """Environment variables: names as in POSIX shells, string values."""

    child = serializers.CharField(allow_blank=True, max_length=16384, trim_whitespace=False)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        value: dict[str, str] = super().to_internal_value(data)
        bad = [k for k in value if not _ENV_NAME.match(k) or len(k) > 256]
        if bad:
            raise serializers.ValidationError(
                f"{', '.join(repr(k[:40]) for k in bad[:5])}: variable names are letters, digits and _, not starting with a digit"
            )
        if len(value) > 256:
            raise serializers.ValidationError(f"{len(value)} variables; at most 256")
        problem = job_env_problem(value)  # a name Quartermaster sets itself (QM_ROLE, RANK, …)
        if problem:
            raise serializers.ValidationError(problem)
        return value


# --------------------------------------------------------------------------------------- jobs

#: The most roles one heterogeneous gang may name.
MAX_ROLES = 64


class GangRoleSerializer(StrictFieldsMixin, serializers.Serializer):
    """One role of a heterogeneous gang: `count` members of `gpus_per_member` GPUs each, every
    member on one node; what a role leaves out (GPU types, memory, CPUs) it takes from the job."""

    name = NameField(max_length=64, help_text="The role's name, e.g. `trainer`, `rollout`, `reward`.")
    count = serializers.IntegerField(min_value=1, max_value=MAX_JOB_GPUS, help_text="Members of this role.")
    gpus_per_member = serializers.IntegerField(
        min_value=1, max_value=MAX_GPUS_PER_NODE, help_text="GPUs of each member, on one node.")
    gpu_type = serializers.CharField(required=False, max_length=64, help_text="Shorthand for gpu_types=[…].")
    gpu_types = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=32,
                                      help_text="Acceptable GPU types of this role; omitted: the job's.")
    min_gpu_memory_gb = _count(required=False, default=0)
    cpus_per_gpu = _count(required=False, default=0)
    memory_gb_per_gpu = _count(required=False, default=0)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "gpu_type" in attrs and attrs.get("gpu_types"):
            raise serializers.ValidationError({"gpu_type": "give gpu_type or gpu_types, not both"})
        gpu_type = attrs.pop("gpu_type", None)
        attrs["gpu_types"] = list(dict.fromkeys(attrs.get("gpu_types") or ([gpu_type] if gpu_type else [])))
        return attrs


class DependencyListSerializer(serializers.ListSerializer):
    """A job's dependencies: the list of items, or Slurm's text for them (`afterok:12:13,afterany:14`,
    `none` for none), read by the one parser `qm -d` uses (services/dependency_text.py) into the
    same list. The jobs page's "Runs after" field sends the text as typed; a syntax error is
    refused on `dependencies`, an item's problem on its own field of the list the text makes
    (`dependencies.1.job`)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            try:
                edit = dependency_text.parse_edit(data)
                if edit is not None:
                    # `+afterok:5` / `-afterany:7`: added to or removed from a waiting job's list
                    # (a change only: the submit refuses it), its items typed as a list's.
                    return dependency_text.Edit(edit.op, super().to_internal_value(edit.items), edit.any_of)
                data = dependency_text.parse(data)
            except dependency_text.BadDependencyText as exc:
                raise serializers.ValidationError([f"{data.strip()}: {exc}"]) from None
            if isinstance(data, dependency_text.AnyOf):
                # `afterok:12?afterok:13`: any one of them (the request's dependency_mode "any")
                return dependency_text.AnyOf(super().to_internal_value(list(data)))
        return super().to_internal_value(data)


def dependency_mode_field() -> serializers.ChoiceField:
    return NamedChoiceField(
        choices=DependencyMode.choices, required=False,
        help_text="How `dependencies` combine: `all` (the default: every one met, Slurm's `,`) or `any` (any one "
                  "of them met is enough, Slurm's `?`). The text `afterok:12?afterok:13` says `any` itself.",
    )


def combine_dependency_mode(attrs: dict[str, Any], *, submit: bool) -> None:
    """`dependency_mode` folded into `dependencies`: an any-of list becomes a
    `dependency_text.AnyOf` (the text's `?` says `any` itself; a request saying `all` with it is
    refused on `dependency_mode`), and a submit keeps the mode (`SubmitRequest.dependency_mode`).
    A change gives it with the whole list only: an edit (+ or -) keeps the job's mode."""
    mode = attrs.get("dependency_mode") if submit else attrs.pop("dependency_mode", None)
    deps = attrs.get("dependencies")
    if isinstance(deps, dependency_text.Edit):
        if mode is not None:
            raise serializers.ValidationError({"dependency_mode": [
                "an edit (+ or -) keeps the job's mode; to change it, send the whole list with it"]})
        return
    if isinstance(deps, dependency_text.AnyOf):
        if mode == DependencyMode.ALL:
            raise serializers.ValidationError({"dependency_mode": [
                "the dependencies' text joins them with '?' (any one of them met); \"all\" contradicts it: join "
                "them with ',' for all, or leave dependency_mode out"]})
        mode = DependencyMode.ANY
    elif mode is None:
        return
    elif deps is None:
        if not submit:
            raise serializers.ValidationError({"dependency_mode": [
                "it says how the dependencies combine: give it with them, the whole list (or the text "
                "afterok:12?afterok:13)"]})
        return  # a submit without dependencies: nothing to combine
    elif mode == DependencyMode.ANY:
        attrs["dependencies"] = dependency_text.AnyOf(deps)
    if submit:
        attrs["dependency_mode"] = mode


class DependencySerializer(StrictFieldsMixin, serializers.Serializer):
    """One dependency of a submit (Slurm's `--dependency=afterok:12`): a job, or every task of a
    job array, and the condition it must meet before this job may start."""

    class Meta:
        list_serializer_class = DependencyListSerializer

    # A job's id is a bigint: an id past 2**31 - 1 is no job you can see, not "at most 2147483647".
    job = serializers.IntegerField(min_value=1, max_value=MAX_JOB_ID, required=False,
                                   help_text="The id of the job waited on.")
    array = serializers.UUIDField(required=False, help_text="Or a job array's id: every one of its tasks.")
    condition = NamedChoiceField(
        choices=[*DependencyCondition.choices, (dependency_text.AFTERCORR, "each task after its counterpart succeeds"),
                 (dependency_text.SINGLETON, "one of its name at a time")],
        required=False, default=DependencyCondition.AFTER_OK,
        help_text="`after` (it started), `afterok` (it succeeded; the default), `afternotok` (it failed, was "
                  "cancelled or timed out), `afterany` (it ended); `aftercorr` (a job array's submit only: each "
                  "task after the task of the same index of the array named succeeded); or `singleton`, naming no "
                  "job: it starts only "
                  "when no other job of its submitter and name runs or waits ahead of it.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("condition") == dependency_text.SINGLETON:
            if "job" in attrs or "array" in attrs:
                raise serializers.ValidationError({"condition": "singleton names no job (it waits on the earlier "
                                                                "jobs of this name and submitter): give it alone, "
                                                                "{\"condition\": \"singleton\"}"})
            return attrs
        if ("job" in attrs) == ("array" in attrs):
            raise serializers.ValidationError({"job": "give the job waited on (job: 12) or a job array (array: its id), "
                                                      "one of the two"})
        return attrs


def well_formed_values(body: serializers.Serializer, errors: Mapping[str, Any]) -> dict[str, Any] | None:
    """After `body.is_valid()` failed with `errors`: the fields it was sent that are well formed,
    each read as `validated_data` would hold it (by its source), those `errors` name left out;
    the fields it was not sent are absent. None when there is nothing to read (a body that is
    no object) or a field `errors` does not name fails (its error is said elsewhere: judge
    nothing more). What a refused submit or change asks its service about, so that one answer
    names every field at fault (`errors_with_the_rest`)."""
    if not isinstance(body.initial_data, Mapping):
        return None
    values: dict[str, Any] = {}
    for name, typed in body.fields.items():
        if typed.read_only or name in errors:
            continue
        try:
            value = typed.run_validation(typed.get_value(body.initial_data))
        except SkipField:
            continue
        except (serializers.ValidationError, DjangoValidationError):
            return None
        values[typed.source] = value
    return values


class JobSubmitSerializer(StrictFieldsMixin, serializers.Serializer):
    """A job submission. Only `name` and `gpus` are required."""

    name = NameField(max_length=128, help_text="What the job is called (one line of visible text).")
    gpus = serializers.IntegerField(
        min_value=1, max_value=MAX_JOB_GPUS, help_text="GPUs the job needs (its preferred size if elastic)."
    )
    gpus_per_node = serializers.IntegerField(
        min_value=1, max_value=MAX_GPUS_PER_NODE, required=False, allow_null=True,
        help_text="GPUs on each node of the gang; omitted: the scheduler decides (whole nodes for jobs of a node or more).",
    )
    gpu_type = serializers.CharField(
        required=False, max_length=64, help_text="One acceptable GPU type (shorthand for gpu_types=[…])."
    )
    gpu_types = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=32,
        help_text="Acceptable GPU types; omitted or empty: any type.",
    )
    min_gpu_memory_gb = _count(required=False, default=0, help_text="Minimum device memory per GPU.")
    cpus_per_gpu = _count(required=False, default=0)
    memory_gb_per_gpu = _count(required=False, default=0)
    topology = NamedChoiceField(choices=Topology.choices, required=False, default=Topology.ANY)
    min_gpus = serializers.IntegerField(min_value=1, max_value=MAX_JOB_GPUS, required=False, allow_null=True,
                                        help_text="Elastic: the smallest size it runs at.")
    max_gpus = serializers.IntegerField(min_value=1, max_value=MAX_JOB_GPUS, required=False, allow_null=True,
                                        help_text="Elastic: the largest size it can use.")
    priority_class = serializers.CharField(
        required=False, max_length=64, help_text="Priority class name; default: the team's default class."
    )
    team = serializers.CharField(required=False, max_length=64, help_text="Team name; default: your team.")
    project = serializers.CharField(required=False, max_length=64, help_text="Project name within the team.")
    workload = NamedChoiceField(choices=WorkloadClass.choices, required=False, default=WorkloadClass.TRAINING)
    runtime_limit_s = serializers.IntegerField(
        # Up to its priority class's maximum, which the submit names in days (qm submit -t 99999d
        # was told "Ensure this value is less than or equal to 2147483647."); the bound here only
        # keeps out numbers no limit is near.
        min_value=1, max_value=MAX_RUNTIME_LIMIT_ASKED, required=False, allow_null=True,
        error_messages={"max_value": f"more than any runtime limit (at most {MAX_RUNTIME_LIMIT_ASKED // 86400 // 365:,} "
                                     "years); a priority class allows at most its max_runtime_limit_s"},
        help_text="Seconds before the job is stopped; default: the class default; at most the class's "
                  "max_runtime_limit_s.",
    )
    checkpoint_interval_s = _positive(required=False, allow_null=True)
    command = serializers.CharField(required=False, default="", allow_blank=True, max_length=65536, trim_whitespace=False)
    env = EnvField(required=False, default=dict)
    hold = serializers.BooleanField(
        required=False, default=False,
        help_text="Submit it held (sbatch -H): it waits out of the queue until released (POST jobs/{id}/release/).",
    )
    hold_reason = HoldReasonField(
        help_text="With `hold`: why it is held, in your words (one line); said in its explanation.",
    )
    roles = GangRoleSerializer(
        many=True, required=False, allow_empty=False, max_length=MAX_ROLES,
        help_text="A heterogeneous gang: roles started together or not at all (e.g. 1 learner of 8 GPUs and "
                  "4 rollout workers of 1 GPU). `gpus` is then their sum; not with gpus_per_node or an elastic "
                  "range.",
    )
    dependencies = DependencySerializer(
        many=True, required=False, max_length=MAX_DEPENDENCIES,
        help_text="Jobs it waits on (Slurm's --dependency), each `{\"job\": 12, \"condition\": \"afterok\"}` or "
                  "`{\"array\": \"<array id>\"}` for every task of an array; or Slurm's text for the same list, "
                  "`\"afterok:12:13,afterany:14\"`. Until each is met it is not in the queue "
                  "and holds nothing (reason WaitingForDependency); once one can never be met it is cancelled "
                  "(DependencyNeverSatisfied). With `dependency_mode` \"any\" (or the text joined by `?`), any "
                  "one of them met is enough, and it is cancelled only once none can be.",
    )
    dependency_mode = dependency_mode_field()
    array_task_limit = serializers.IntegerField(
        min_value=1, max_value=MAX_ARRAY_TASKS, required=False, allow_null=True,
        help_text="A job array's task limit (Slurm's `--array=0-99%10`): at most this many of its tasks hold "
                  "GPUs at once, the rest wait with reason JobArrayTaskLimit. Only for an array (POST "
                  "job-arrays/); the same as `%N` at the end of `array`, which says it too. Changed later with "
                  "PATCH job-arrays/{array_id}/.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self._gpu_types_once(attrs)
        self._a_whole_list(attrs)
        combine_dependency_mode(attrs, submit=True)
        # The shape's cross-field rules, the very ones submit() applies: the form's live check
        # (which runs this serializer) names the same fields with the same messages.
        errors = job_shape_errors(
            gpus=attrs["gpus"], gpus_per_node=attrs.get("gpus_per_node"), topology=attrs.get("topology", Topology.ANY),
            min_gpus=attrs.get("min_gpus"), max_gpus=attrs.get("max_gpus"), roles=attrs.get("roles") or (),
        )
        if errors:
            raise serializers.ValidationError({field: [message] for field, message in errors.items()})
        return attrs

    @staticmethod
    def _gpu_types_once(attrs: dict[str, Any]) -> None:
        if "gpu_type" in attrs and attrs.get("gpu_types"):
            raise serializers.ValidationError({"gpu_type": "give gpu_type or gpu_types, not both"})

    @staticmethod
    def _a_whole_list(attrs: dict[str, Any]) -> None:
        if isinstance(attrs.get("dependencies"), dependency_text.Edit):
            raise serializers.ValidationError({"dependencies": [
                f"'{attrs['dependencies'].op}' adds to or removes from a waiting job's dependencies (PATCH "
                "jobs/{id}/, qm update -d +=…); a submit gives the whole list"]})

    def to_submit_request(self) -> SubmitRequest:
        return self._submit_request(dict(self.validated_data))

    #: validate()'s refusals, and the fields each leaves unread with it.
    _REFUSED_TOGETHER = {"gpu_type": ("gpu_type", "gpu_types"), "dependencies": ("dependencies", "dependency_mode"),
                         "dependency_mode": ("dependency_mode", "dependencies")}

    def errors_with_the_rest(self, user: Any) -> dict[str, Any]:
        """After `is_valid()` failed: its errors, and with them what the submit itself would
        refuse among the fields that are well formed (services/jobs.judge: the team, class,
        project, runtime limit, array, dependencies, the fleet's capability), each under its
        field. A body with a negative CPU count and an array that ends before it starts used to
        name the CPUs alone, and the array only once they were fixed."""
        return self.judged_with_the_rest(user)[0]

    def judged_with_the_rest(self, user: Any) -> tuple[dict[str, Any], job_service.Judgement | None]:
        """`errors_with_the_rest`, and the service's judgement of the well-formed fields (None
        when it was not asked: a body that is no object). The rules that hang on a field that
        cannot be read wait for it: validate()'s own (GPU types given twice, an edit of the
        dependencies, a mode that contradicts them) leave those fields unread; the shape's rules
        and the fleet's capability wait for every field of the shape (`jobs.shape_readable`);
        the dependencies for their list and mode."""
        errors: dict[str, Any] = dict(self.errors)  # as DRF nests them (an item's field, an env name)
        values = well_formed_values(self, errors)
        if values is None:
            return errors, None
        for check in (self._gpu_types_once, self._a_whole_list,
                      lambda attrs: combine_dependency_mode(attrs, submit=True)):
            try:
                check(values)
            except serializers.ValidationError as exc:
                for name, problems in serializers.as_serializer_error(exc).items():
                    errors.setdefault(name, problems)
                    for unread in self._REFUSED_TOGETHER.get(name, (name,)):
                        values.pop(unread, None)
        shape_known = "gpus" in values and job_service.shape_readable(errors)
        values.setdefault("gpus", 1)  # a stand-in: the rules that hang on it are not judged
        values.setdefault("name", "")
        judged = job_service.judge(user, self._submit_request(values), shape_known=shape_known)
        for name, problem in judged.errors.items():
            if name.split(".")[0] not in errors:
                errors[name] = [problem]
        return errors, judged

    @staticmethod
    def _submit_request(data: dict[str, Any]) -> SubmitRequest:
        gpu_type = data.pop("gpu_type", None)
        gpu_types = tuple(dict.fromkeys(data.pop("gpu_types", None) or ([gpu_type] if gpu_type else [])))
        roles = tuple(dict(role) for role in data.pop("roles", None) or ())
        data["dependencies"] = tuple(dict(item) for item in data.pop("dependencies", None) or ())
        data["dependency_mode"] = str(data.get("dependency_mode") or DependencyMode.ALL)
        return SubmitRequest(gpu_types=gpu_types, roles=roles, **data)


#: Job fields a PATCH cannot change, and what to do instead (the rest are set by the scheduler).
_FIXED_AT_SUBMIT = "fixed at submit; to change it, cancel the job and resubmit it"
JOB_FIELDS_SET_ELSEWHERE = {
    "team": "a job stays in the team it was submitted for; cancel it and resubmit it for another team",
    "workload": _FIXED_AT_SUBMIT, "command": _FIXED_AT_SUBMIT, "env": _FIXED_AT_SUBMIT, "roles": _FIXED_AT_SUBMIT,
    "hold": "use POST jobs/{id}/hold/ and jobs/{id}/release/ (qm hold, qm release)",
    "hold_reason": "a hold's reason is given with it: POST jobs/{id}/hold/ {\"reason\": …} (qm hold --reason)",
    "state": "use POST jobs/{id}/cancel/, hold/ and release/; the scheduler sets the rest",
    "singleton": "it is a dependency: {\"dependencies\": \"+singleton\"} adds it, \"-singleton\" removes it",
    "array_task_limit": "it is the whole array's: PATCH job-arrays/{array_id}/ {\"array_task_limit\": N} "
                        "(qm update ARRAY_ID --array-limit N)",
}


class JobUpdateSerializer(StrictFieldsMixin, serializers.Serializer):
    """`PATCH jobs/{id}/`: the fields to change, each typed and bounded exactly as the submit
    types it (the submit serializer's own field definitions). While the job waits: its name,
    project, priority class, limits, shape and dependencies (the whole new list, or its text;
    `[]` or `none` for none); once it runs, its name and a lower runtime limit. The changed job
    is then judged as a submit of it would be (services/holds.update)."""

    CHANGEABLE = ("name", "project", "priority_class", "runtime_limit_s", "checkpoint_interval_s", "gpus",
                  "gpus_per_node", "gpu_type", "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu", "memory_gb_per_gpu",
                  "topology", "min_gpus", "max_gpus", "dependencies", "dependency_mode")

    def get_fields(self) -> dict[str, serializers.Field]:
        submit = JobSubmitSerializer._declared_fields
        fields: dict[str, serializers.Field] = {}
        for name in self.CHANGEABLE:
            typed = fields[name] = copy.deepcopy(submit[name])  # a fresh field of the same kind and bounds
            typed.required, typed.default = False, serializers.empty
            if name == "dependency_mode":
                typed.help_text = ("How the new `dependencies` combine (given with them, the whole list): `all` or "
                                   "`any` (any one met; the text `afterok:12?afterok:13` says it itself).")
            if name == "project":  # null: no project
                typed.allow_null = True
                typed.help_text = "Project name within the job's team; null for none."
            if name == "dependencies":
                typed.help_text = ("The jobs it waits on, the whole new list (scontrol update dependency=): items "
                                   "as the submit takes them, or Slurm's text (`afterok:12,afterany:14,singleton`); "
                                   "`[]` or `none` removes them all. The text led by `+` adds to the list, by `-` "
                                   "removes from it (scontrol's dependency+= and dependency-=): `+afterok:5`, "
                                   "`-afterany:7`, `+singleton`. Only while it waits.")
        return fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors: dict[str, list[str]] = {}
            for key in data:
                if key in JOB_FIELDS_SET_ELSEWHERE:
                    errors[str(key)] = [f"Read-only: {JOB_FIELDS_SET_ELSEWHERE[key]}."]
                elif key in JobSerializer.Meta.fields and key not in self.CHANGEABLE:
                    errors[str(key)] = ["Read-only: the scheduler and the job's agents set it."]
                elif key not in self.CHANGEABLE:
                    errors[str(key)] = [f"Unknown field. Accepted fields: {', '.join(sorted(self.CHANGEABLE))}."]
            if not data:
                raise serializers.ValidationError(
                    {"non_field_errors": [f"Nothing to change: send one or more of {', '.join(self.CHANGEABLE)}."]})
            if errors:  # named with the changeable fields' own errors, not before them
                try:
                    super().to_internal_value({k: v for k, v in data.items() if k in self.CHANGEABLE})
                except serializers.ValidationError as exc:
                    if isinstance(exc.detail, dict):
                        errors = {**exc.detail, **errors}
                raise serializers.ValidationError(errors, code="unknown")
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "gpu_type" in attrs and attrs.get("gpu_types"):
            raise serializers.ValidationError({"gpu_type": "give gpu_type or gpu_types, not both"})
        if "gpu_type" in attrs:
            attrs["gpu_types"] = [attrs.pop("gpu_type")]
        if "gpu_types" in attrs:
            attrs["gpu_types"] = list(dict.fromkeys(attrs["gpu_types"] or ()))
        combine_dependency_mode(attrs, submit=False)
        return attrs

    #: validate()'s refusals, and the fields each leaves unread with it.
    _REFUSED_TOGETHER = {"gpu_type": ("gpu_type", "gpu_types"), "dependency_mode": ("dependency_mode", "dependencies")}

    def errors_with_the_rest(self, user: Any, job_id: int) -> dict[str, Any]:
        """After `is_valid()` failed: its errors, and with them what the change itself would be
        refused for among the fields that are well formed (services/holds.refusals: the changed
        job judged as a submit, its dependencies, the fields a running job cannot change, a
        limit only an admin raises), each under its field; a field a running job cannot change
        is said to be so even when its value is malformed (its second problem). Which rules
        wait for a malformed field: holds.refusals. Raises holds.Refused for a refusal about the
        job as a whole (another team's job, an ended one): it stands alone. A change with a
        negative CPU count and a project its team lacks used to name the CPUs alone, and the
        project only once they were fixed."""
        errors: dict[str, Any] = dict(self.errors)  # as DRF nests them
        values = well_formed_values(self, errors)
        if values is None or "non_field_errors" in errors:
            return errors  # no object, or nothing to change
        try:
            changes = self.validate(dict(values))
        except serializers.ValidationError as exc:
            said = serializers.as_serializer_error(exc)
            for name, problems in said.items():
                errors.setdefault(name, problems)
                for unread in self._REFUSED_TOGETHER.get(name, (name,)):
                    values.pop(unread, None)
            changes = self.validate(dict(values))  # what it refused is out: nothing left to refuse
        unreadable = {name.split(".")[0] for name in errors} & set(self.CHANGEABLE)
        unreadable |= {unread for name in unreadable for unread in self._REFUSED_TOGETHER.get(name, ())}
        unreadable = {"gpu_types" if name == "gpu_type" else name for name in unreadable} - {"dependency_mode"}
        if not changes and not unreadable:
            return errors
        found = holds_service.refusals(user, job_id, changes, unreadable=frozenset(unreadable))
        for name, problem in {**found.invalid, **found.forbidden}.items():
            if name.split(".")[0] not in errors:
                errors[name] = [problem]
        for name, problem in found.conflicts.items():
            if name == "gpu_types" and "gpu_type" in errors:
                name = "gpu_type"  # as it was sent
            errors[name] = [*errors.get(name, ()), problem]  # the job's state refuses it whatever its value
        return errors


class JobArraySubmitSerializer(JobSubmitSerializer):
    """A job array: one submission, one task per index, each with QM_ARRAY_INDEX in its env."""

    array = serializers.CharField(
        max_length=4096,
        help_text="Task indices, Slurm style: `0-99`, `1,3,10-20`, `0-98:2` (at most 10,000 tasks); `%N` at the "
                  "end (`0-99%10`) runs at most N of them at a time, as `array_task_limit` does.",
    )


class JobArrayLimitSerializer(StrictFieldsMixin, serializers.Serializer):
    """`PATCH job-arrays/{array_id}/`: the array's task limit (`scontrol update ArrayTaskThrottle=`)."""

    array_task_limit = serializers.IntegerField(
        min_value=1, max_value=MAX_ARRAY_TASKS, allow_null=True,
        help_text="At most this many of its tasks hold GPUs at once (Slurm's ArrayTaskThrottle); null lifts the "
                  "limit. Set on every task of the array; running tasks above a lowered limit keep running.",
    )


# ------------------------------------------------------------- the submit's plain-data fast path

_SURROGATES = re.compile("[\ud800-\udfff]")
_Check = Callable[[Any], Any]
_INVALID = object()


def _string_check(field: serializers.CharField) -> _Check:
    """What `field` would return for a plain str it accepts, else _INVALID."""
    trim, blank, most = field.trim_whitespace, field.allow_blank, field.max_length
    visible_only = isinstance(field, NameField)

    def check(value: Any) -> Any:
        if type(value) is not str:
            return _INVALID
        if trim:
            value = value.strip()
        if (not value and not blank) or (most is not None and len(value) > most):
            return _INVALID
        if "\x00" in value or _SURROGATES.search(value):
            return _INVALID
        if visible_only and _INVISIBLE.search(value):
            return _INVALID
        return value

    return check


def _integer_check(field: serializers.IntegerField) -> _Check:
    low = field.min_value if field.min_value is not None else -MAX_INT - 1
    high = field.max_value if field.max_value is not None else MAX_INT

    def check(value: Any) -> Any:
        return value if type(value) is int and low <= value <= high else _INVALID

    return check


def _choice_check(field: serializers.ChoiceField) -> _Check:
    choices = dict(field.choice_strings_to_values)

    def check(value: Any) -> Any:
        return choices[value] if type(value) is str and value in choices else _INVALID

    return check


def _list_check(field: serializers.ListField) -> _Check:
    item = _field_check(field.child)
    most = field.max_length

    def check(value: Any) -> Any:
        if type(value) is not list or (most is not None and len(value) > most):
            return _INVALID
        out = [item(v) for v in value]
        return _INVALID if any(v is _INVALID for v in out) else out

    return check


def _env_check(field: EnvField) -> _Check:
    item = _field_check(field.child)

    def check(value: Any) -> Any:
        if type(value) is not dict or len(value) > 256:
            return _INVALID
        out = {}
        for k, v in value.items():
            if type(k) is not str or len(k) > 256 or not _ENV_NAME.match(k):
                return _INVALID
            out[k] = item(v)
            if out[k] is _INVALID:
                return _INVALID
        return _INVALID if job_env_problem(out) else out  # a reserved name: the serializer explains

    return check


def _boolean_check(value: Any) -> Any:
    return value if type(value) is bool else _INVALID


def _to_the_serializer(value: Any) -> Any:
    return _INVALID


def _field_check(field: serializers.Field) -> _Check:
    # Order matters: ChoiceField and EnvField before their parents' kinds.
    if isinstance(field, serializers.ListSerializer):
        return _to_the_serializer  # a heterogeneous gang's roles: the serializer types them
    if isinstance(field, serializers.BooleanField):
        return _boolean_check  # JSON true/false; anything else ("yes", 1) the serializer types
    if isinstance(field, serializers.ChoiceField):
        return _choice_check(field)
    if isinstance(field, EnvField):
        return _env_check(field)
    if isinstance(field, serializers.ListField):
        return _list_check(field)
    if isinstance(field, serializers.IntegerField):
        return _integer_check(field)
    if isinstance(field, serializers.CharField):
        return _string_check(field)
    raise TypeError(f"no plain-data check for {type(field).__name__}")


@functools.cache
def _submit_plan(serializer_class: type[JobSubmitSerializer]) -> tuple[dict[str, _Check], dict[str, Any], frozenset[str]]:
    """Per serializer class, built once from its own declared fields (so the bounds cannot
    drift from the schema's): a check per field, the defaults, and the required fields."""
    fields = serializer_class().fields
    checks = {name: _field_check(f) for name, f in fields.items()}
    defaults = {name: f.default for name, f in fields.items() if f.default is not serializers.empty}
    required = frozenset(name for name, f in fields.items() if f.required)
    return checks, defaults, required


def plain_submit_request(data: Any, serializer_class: type[JobSubmitSerializer]) -> SubmitRequest | None:
    """The SubmitRequest that `serializer_class` would produce from `data`, typed without DRF's
    field machinery, for the common body whose every field is plainly valid (a str where a
    string goes, an int in range where a number goes, no nulls, nothing unknown). Anything
    else returns None and the serializer answers, naming each field at fault. A test holds the
    two to the same result on generated bodies."""
    if type(data) is not dict:
        return None
    checks, defaults, required = _submit_plan(serializer_class)
    if not required.issubset(data):
        return None
    values = {name: default() if callable(default) else default for name, default in defaults.items()}
    for name, value in data.items():
        check = checks.get(name)
        if check is None:
            return None
        typed = check(value)
        if typed is _INVALID:
            return None
        values[name] = typed
    gpu_type = values.pop("gpu_type", None)
    gpu_types = values.pop("gpu_types", None)
    if gpu_type is not None and gpu_types:
        return None  # both: the serializer explains
    if job_shape_errors(gpus=values["gpus"], gpus_per_node=values.get("gpus_per_node"), topology=values["topology"],
                        min_gpus=values.get("min_gpus"), max_gpus=values.get("max_gpus")):
        return None  # a shape the rules fault: the serializer explains, naming each field
    return SubmitRequest(gpu_types=tuple(dict.fromkeys(gpu_types or ([gpu_type] if gpu_type else []))), **values)


# The engine counts time in seconds, which in the control plane are Unix seconds; its sentences
# say them as `t=1795989660`. Ten digits or more (from September 2001 on) is a wall time; fewer
# is a simulator's offset from its origin, left as it is. The pages say them the same way.
_ENGINE_TIME = re.compile(r"\bt=([0-9]{10,})(?:\.[0-9]+)?\b")


def _utc(match: re.Match[str]) -> str:
    try:
        return datetime.fromtimestamp(int(match.group(1)), tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return match.group(0)


def utc_second(at: datetime) -> str:
    """A stored time in a sentence, to the nearest second as the pages say it
    (`frontend.templatetags.qm.utc`): cut to the second below, `qm explain` said 23:22:05 where
    the job's page said 23:22:06."""
    return (at + timedelta(microseconds=500_000)).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def engine_times(text: str) -> str:
    """The engine's sentence with each `t=<Unix seconds>` said as a UTC time."""
    return _ENGINE_TIME.sub(_utc, text) if "t=" in text else text


class _WhileWaiting:
    """A waiting job's place: its queue position and ETA, null once it no longer waits. A job
    cancelled while waiting keeps its last place row (its reason's numbers live there), and
    answered `"queue_position": 19, "eta": …` for a job that will never start."""

    def get_attribute(self, instance: Job) -> Any:
        return super().get_attribute(instance) if instance.state == JobState.PENDING else None  # type: ignore[misc]


class _QueuePositionField(_WhileWaiting, serializers.IntegerField):
    pass


class _EtaField(_WhileWaiting, serializers.DateTimeField):
    pass


class _EtaToldField(serializers.DateTimeField):
    """The first ETA of the wait that ended in its latest start: null once it is queued again
    (a requeue), until its next start."""

    def get_attribute(self, instance: Job) -> Any:
        return super().get_attribute(instance) if instance.started_at is not None else None


class _GpusHeldField(serializers.IntegerField):
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


class _ElapsedField(serializers.IntegerField):
    def get_attribute(self, instance: Any) -> int | None:
        return job_history.elapsed_seconds(instance, read_at(instance))


class _GpuHoursField(_HistoryField, serializers.FloatField):
    figure = job_history.gpu_hours


class _LostGpuHoursField(_HistoryField, serializers.FloatField):
    figure = job_history.lost_gpu_hours


class _RanOnField(_HistoryField, serializers.ListField):
    figure = job_history.ran_on


def read_at(job: Job) -> datetime:
    """The moment a page of jobs was read (every running job's elapsed_s counts to the same
    instant), else now."""
    return getattr(job, "read_at", None) or datetime.now(UTC)


class JobSerializer(serializers.ModelSerializer):
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
        child=serializers.IntegerField(), read_only=True,
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
        read_only=True, allow_null=True, help_text="1-based place in the last cycle's queue; null unless pending.")
    eta = _EtaField(read_only=True, allow_null=True,
                    help_text="The engine's estimated start, if it could give one; null unless pending.")
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

    class Meta:
        model = Job
        fields = [
            "id", "name", "team", "project", "submitter", "priority_class", "workload",
            "gpus", "gpus_per_node", "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu", "memory_gb_per_gpu",
            "topology", "min_gpus", "max_gpus", "roles", "gpus_held", "nodes", "runtime_limit_s", "checkpoint_interval_s", "command",
            "env", "array_id", "array_index", "array_task_limit", "dependencies", "dependency_mode", "dependents", "singleton",
            "state", "state_label", "submitted_at", "started_at", "finished_at", "state_changed_at", "exit_code", "borrowed",
            "pending_code", "pending_message", "pending_resolvable", "pending_would_start_if",
            "queue_position", "eta", "eta_told", "eta_told_at", "growth_code", "growth_note",
            "steps", "useful_tokens", "last_checkpoint_at", "preemption_count", "requeue_count", "lost_gpu_seconds",
            "hold", "held_at", "held_by", "hold_reason",
            "elapsed_s", "gpu_hours", "lost_gpu_hours", "ran_on",
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
        "memory_gb_per_gpu": job.memory_gb_per_gpu, "topology": job.topology, "min_gpus": job.min_gpus,
        "max_gpus": job.max_gpus, "roles": [dict(role) for role in job.roles or ()], "gpus_held": gpus_held(job), "nodes": nodes_held(job), "runtime_limit_s": job.runtime_limit_s,
        "checkpoint_interval_s": job.checkpoint_interval_s, "command": job.command, "env": dict(job.env),
        "array_id": str(job.array_id) if job.array_id else None, "array_index": job.array_index,
        "array_task_limit": job.array_task_limit,
        "dependencies": job_dependencies(job), "dependency_mode": job.dependency_mode,
        "dependents": job_dependents(job), "singleton": job.singleton,
        "state": job.state, "state_label": state_label(job), "submitted_at": when(job.submitted_at), "started_at": when(job.started_at),
        "finished_at": when(job.finished_at), "state_changed_at": when(job.state_changed_at),
        "exit_code": job.exit_code, "borrowed": job.borrowed, "pending_code": job.pending_code,
        "pending_message": engine_times(job.pending_message), "pending_resolvable": job.pending_resolvable,
        "pending_would_start_if": engine_times(job.pending_would_start_if), "queue_position": job.queue_position if waiting else None,
        "eta": when(job.eta) if waiting else None, "eta_told": when(job.eta_told) if job.started_at else None,
        "eta_told_at": when(job.eta_told_at) if job.started_at else None,
        "growth_code": job.growth_code, "growth_note": job.growth_note,
        "steps": job.steps, "useful_tokens": job.useful_tokens,
        "last_checkpoint_at": when(job.last_checkpoint_at), "preemption_count": job.preemption_count,
        "requeue_count": job.requeue_count, "lost_gpu_seconds": job.lost_gpu_seconds,
        "hold": job.hold, "held_at": when(job.held_at), "held_by": job.held_by.get_username() if job.held_by_id else None,
        "hold_reason": job.hold_reason,
        "elapsed_s": job_history.elapsed_seconds(job, read_at(job)), "gpu_hours": job_history.gpu_hours(job),
        "lost_gpu_hours": job_history.lost_gpu_hours(job), "ran_on": job_history.ran_on(job),
    }


class JobArraySerializer(serializers.Serializer):
    array_id = serializers.UUIDField()
    name = serializers.CharField()
    team = serializers.CharField()
    count = serializers.IntegerField()
    states = serializers.DictField(child=serializers.IntegerField(), help_text="Tasks per state.")
    state_labels = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Tasks per state_label: the states, a stopping task counted by why it stops "
                  "('stopping: cancelled', 'preempting', ...).",
    )
    job_ids = serializers.ListField(child=serializers.IntegerField(), help_text="Job ids in index order.")
    indices = serializers.ListField(child=serializers.IntegerField())
    array_task_limit = serializers.IntegerField(
        allow_null=True, help_text="At most this many of its tasks hold GPUs at once (Slurm's `%N`); null: no limit.")


class JobArrayLimitResultSerializer(JobArraySerializer):
    """`PATCH job-arrays/{array_id}/`: the array after the change, and what it did."""

    changed = serializers.BooleanField(help_text="False when the array already had that limit.")
    was = serializers.IntegerField(allow_null=True, help_text="The limit before (null: none).")
    detail = serializers.CharField()


class JobArrayCancelSerializer(JobArraySerializer):
    """`POST job-arrays/{array_id}/cancel/`: the array after the cancel, and what it did."""

    cancelled = serializers.IntegerField(help_text="Tasks cancelled at once (they were waiting).")
    stopping = serializers.IntegerField(help_text="Running tasks told to stop: they end cancelled once their "
                                                  "processes exit (the class's grace period).")
    skipped = serializers.IntegerField(help_text="Tasks already stopping (a cancel, their runtime limit, a gang "
                                                 "member's exit) or that changed state meanwhile: not cancelled.")
    detail = serializers.CharField()


class LikelyStartSerializer(serializers.Serializer):
    """A waiting job's likely start by the ETA record of its size class (services/eta_record.py)."""

    at = serializers.DateTimeField(help_text="now + (ETA - now) × share_of_wait.")
    share_of_wait = serializers.FloatField(
        help_text="The median share of the wait told that the jobs of its size class judged had (metrics/etas/ "
                  "size_classes[].median_share_of_wait).")
    judged = serializers.IntegerField(help_text="Jobs of its size class that started in the last `days` after "
                                                "waiting with an ETA (at least 20, or no likely start is given).")
    on_time = serializers.FloatField(help_text="Share of them that started by the first ETA they were told.")
    days = serializers.IntegerField(help_text="The record's window, in days.")
    size_class = serializers.ChoiceField(
        choices=list(eta_record.SIZE_CLASSES),
        help_text="The record it rests on: small, fewer GPUs than the fleet's largest node; large, at least that "
                  "many (whole nodes).")
    node_gpus = serializers.IntegerField(help_text="The GPUs of the fleet's largest node, where the classes split.")


class NoLikelyStartSerializer(serializers.Serializer):
    """Why a waiting job with an ETA ahead is told no likely start (services/eta_record.py no_likely_start)."""

    code = serializers.ChoiceField(
        choices=list(eta_record.NO_LIKELY_START_CODES),
        help_text="no_record: no job waited with an ETA and started in the last `days`; no_node: the fleet has no "
                  "node to tell sizes by; too_few_of_its_size: fewer than `needed` jobs of its size class judged; "
                  "not_sooner_than_told: its class's median share of the wait told is not below one.")
    reason = serializers.CharField(
        help_text="The same in the job page's words, after its 'No likely start: ' (qm explain: 'likely start: none: ').")
    size_class = serializers.ChoiceField(choices=list(eta_record.SIZE_CLASSES), allow_null=True,
                                         help_text="Its size class; null for no_record and no_node.")
    node_gpus = serializers.IntegerField(allow_null=True, help_text="Where the classes split (the fleet's largest "
                                                                    "node's GPUs); null as size_class.")
    judged = serializers.IntegerField(help_text="Jobs of its size class judged in the last `days`.")
    needed = serializers.IntegerField(help_text="Jobs of its class it takes to tell a likely start (20).")
    share_of_wait = serializers.FloatField(
        allow_null=True, help_text="not_sooner_than_told: its class's median share of the wait told; else null.")
    days = serializers.IntegerField(help_text="The record's window, in days.")


class EtaOwnClassSerializer(serializers.Serializer):
    size_class = serializers.ChoiceField(choices=list(eta_record.SIZE_CLASSES))
    node_gpus = serializers.IntegerField(help_text="Where the classes split: the GPUs of the fleet's largest node.")
    judged = serializers.IntegerField()
    on_time = serializers.FloatField(allow_null=True)
    median_share_of_wait = serializers.FloatField(allow_null=True)


class EtaLatelySerializer(serializers.Serializer):
    """How far the ETAs told held lately, beside a waiting job's ETA: the record its page says
    (services/eta_record.py fleet_record, at most a minute old), the fleet's and its size class's."""

    days = serializers.IntegerField()
    judged = serializers.IntegerField(help_text="Jobs that started in the last `days` after waiting with an ETA.")
    on_time = serializers.FloatField(allow_null=True)
    median_share_of_wait = serializers.FloatField(allow_null=True)
    own_class = EtaOwnClassSerializer(allow_null=True, help_text="The same over the jobs of its size class; null "
                                                                 "when no job is judged or the fleet has no node.")


class ExplanationSerializer(serializers.Serializer):
    """Why a job is where it is: for a waiting job, the engine's reason code and sentence."""

    job = serializers.IntegerField()
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    state_label = serializers.CharField(
        help_text="The job's state_label: its state, or for a stopping job why it stops ('stopping: cancelled').")
    reason_code = serializers.CharField(help_text="PascalCase reason, e.g. QuotaExceeded; empty when not waiting.")
    reason = serializers.CharField(help_text="A sentence with numbers.")
    resolvable = serializers.BooleanField(help_text="False when waiting cannot help: the job can never run as asked.")
    queue_position = serializers.IntegerField(allow_null=True)
    eta = serializers.DateTimeField(allow_null=True, help_text="Earliest start the engine can promise, if any.")
    would_start_if = serializers.CharField(help_text="What would let it start.")
    eta_record = EtaLatelySerializer(
        allow_null=True, help_text="A waiting job with an ETA: how far ETAs held lately, as its page says beside it "
                                   "(the fleet's and its size class's); null otherwise.")
    likely_start = LikelyStartSerializer(
        allow_null=True, help_text="Where a waiting job's start lands at the median share of the wait told that the "
                                   "jobs of its size class judged lately had (GET metrics/etas/); null with no ETA "
                                   "ahead, fewer than 20 jobs of its class judged, or a median share not below one.")
    likely_start_missing = NoLikelyStartSerializer(
        allow_null=True, help_text="A waiting job with an ETA ahead and no likely_start: why not; null otherwise.")
    growth_code = serializers.CharField(
        help_text="A running elastic job below its maximum that the last cycle did not grow: why (the job's "
                  "growth_code); empty otherwise.")
    growth_note = serializers.CharField(help_text="The same in a sentence; empty otherwise.")


class JobArrayRequeueSerializer(JobArraySerializer):
    """`POST job-arrays/{array_id}/requeue/`: the array after it, and what it did."""

    requeued = serializers.ListField(child=serializers.IntegerField(),
                                     help_text="Ids of the running tasks now stopping to be requeued.")
    not_running = serializers.IntegerField(help_text="Tasks in none of the states asked (by default: waiting or "
                                                     "ended), or waiting again by their turn: left as they are.")
    stopping = serializers.IntegerField(help_text="Tasks already stopping (preempted, cancelled, ...), or that "
                                                  "began stopping meanwhile: left to that stop.")
    ended_meanwhile = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Ids of the running tasks (of the states asked) that ended between the read and their stop "
                  "(their exit was being settled): left as they ended, not requeued.")
    rerun = serializers.ListField(child=serializers.IntegerField(),
                                  help_text="Ids of the ended tasks (of the states asked) now back in the queue.")
    not_requeued = serializers.ListField(
        child=serializers.DictField(),
        help_text="Ended tasks of the states asked that were refused, each {job, state, detail, errors}: a dependency "
                  "that can never be met, no longer valid as a submit, still stopping.")
    detail = serializers.CharField()


class JobArrayHoldSerializer(JobArraySerializer):
    """`POST job-arrays/{array_id}/hold/` and `release/`: the array after it, and what it did."""

    changed = serializers.ListField(child=serializers.IntegerField(), help_text="Ids of the tasks held (released).")
    unchanged = serializers.IntegerField(help_text="Waiting tasks already so: held already (not held).")
    not_waiting = serializers.IntegerField(help_text="Tasks running or ended: only a waiting task is held or released.")
    refused = serializers.IntegerField(help_text="Tasks under an admin's hold, which only an admin releases.")
    reworded = serializers.ListField(
        child=serializers.IntegerField(),
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


# ------------------------------------------------------------------------------- fleet & teams


class DeletedSerializer(serializers.Serializer):
    """The answer to a DELETE that changed more than the record deleted."""

    detail = serializers.CharField(help_text="What was deleted and what that did, in one sentence.")
    consequences = serializers.ListField(
        child=serializers.CharField(),
        help_text="One line per record the deletion changed or took with it: a cohort's teams leaving it (and what "
                  "becomes of GPUs they run above their nominal), a team's quotas, projects and memberships, a GPU "
                  "type's prices, the teams whose default class it was.")


class TeamSerializer(ConstraintCheckedModelSerializer):
    cohort = NamedRecordField(slug_field="name", queryset=Cohort.objects.all(), required=False, allow_null=True,
                              lists_names=True)
    default_priority_class = NamedRecordField(
        slug_field="name", queryset=PriorityClass.objects.all(), required=False, allow_null=True, lists_names=True
    )

    class Meta:
        model = Team
        fields = ["id", "name", "description", "cohort", "default_priority_class"]


class ProjectSerializer(ConstraintCheckedModelSerializer):
    team = NamedRecordField(slug_field="name", queryset=Team.objects.all())

    class Meta:
        model = Project
        fields = ["id", "team", "name", "description"]
        validators: list[Any] = []  # a second of one name: Project.clean() says it on the name


class CohortSerializer(ConstraintCheckedModelSerializer):
    teams = NamedRecordField(slug_field="name", many=True, read_only=True)

    class Meta:
        model = Cohort
        fields = ["id", "name", "description", "teams"]
        set_elsewhere = {"teams": "a team joins a cohort through its own cohort field (PATCH teams/{id}/ {\"cohort\": …})"}


class QuotaSerializer(ConstraintCheckedModelSerializer):
    team = NamedRecordField(slug_field="name", queryset=Team.objects.all())
    gpu_type = NamedRecordField(slug_field="name", queryset=GpuType.objects.all(), lists_names=True)
    cohort = serializers.SerializerMethodField(help_text="The team's cohort, whose members lend and borrow; null if none.")
    held_gpus = serializers.SerializerMethodField(help_text="GPUs of this type the team's running jobs hold now.")
    borrowed_gpus = serializers.SerializerMethodField(
        help_text="Of held_gpus, how many are above nominal: borrowed from the cohort, reclaimable by preemption.")
    lent_gpus = serializers.SerializerMethodField(
        help_text="GPUs of its unused nominal quota that other teams of its cohort run on now (the teams "
                  "page's and the admin's 'lent'; a share when several teams lend, hence one decimal).")

    class Meta:
        model = Quota
        fields = [
            "id", "team", "gpu_type", "nominal_gpus", "borrowing_limit", "lending_limit",
            "nominal_cpus", "nominal_memory_gb", "cohort", "held_gpus", "borrowed_gpus", "lent_gpus",
        ]
        # A second quota for one team and GPU type is refused by Quota.clean() on the field, naming
        # the quota to change (DRF's unique-together check said it on no field).
        validators: list[Any] = []

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A nominal lowered below the quota's stored lending limit is refused on `nominal_gpus`,
        the field sent (Quota.clean() names `lending_limit`, which the request did not touch)."""
        nominal, lending = attrs.get("nominal_gpus"), getattr(self.instance, "lending_limit", None)
        if (self.instance is not None and nominal is not None and "lending_limit" not in attrs
                and lending is not None and lending > nominal):
            raise serializers.ValidationError({"nominal_gpus": (
                f"{nominal} is below this quota's lending_limit ({lending}): a team lends only its unused nominal "
                f"quota; lower lending_limit in the same request, or set it to null to lend all of it")})
        return super().validate(attrs)

    def get_cohort(self, obj: Quota) -> str | None:
        return obj.team.cohort.name if obj.team.cohort_id is not None else None

    def get_held_gpus(self, obj: Quota) -> int:
        return quotas.held_gpus(obj)

    def get_borrowed_gpus(self, obj: Quota) -> int:
        return max(0, quotas.held_gpus(obj) - obj.nominal_gpus)

    def get_lent_gpus(self, obj: Quota) -> float:
        # once per response, not per quota: the split is three queries over the whole fleet
        lent = self.context.get("lent_now")
        if lent is None:
            lent = self.context["lent_now"] = quotas.lent_now()
        return round(lent.get((obj.team_id, obj.gpu_type_id), 0.0), 1)


class PriorityClassSerializer(ConstraintCheckedModelSerializer):
    class Meta:
        model = PriorityClass
        fields = [
            "id", "name", "value", "description", "preemptible", "may_preempt_lower", "grace_period_s",
            "min_runtime_s", "preemption_budget", "budget_window_s", "default_runtime_limit_s", "max_runtime_limit_s",
        ]
        extra_kwargs = {"value": {"min_value": -MAX_INT - 1, "max_value": MAX_INT}}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        default = attrs.get("default_runtime_limit_s", getattr(self.instance, "default_runtime_limit_s", 4 * 3600))
        most = attrs.get("max_runtime_limit_s", getattr(self.instance, "max_runtime_limit_s", 7 * 86400))
        if default > most:
            raise serializers.ValidationError(
                {"default_runtime_limit_s": f"{default} s is beyond max_runtime_limit_s ({most} s)"}
            )
        return super().validate(attrs)


class GpuTypeSerializer(ConstraintCheckedModelSerializer):
    relative_throughput = serializers.FloatField(min_value=0.001, max_value=1e6, required=False)
    memory_gb = serializers.IntegerField(
        min_value=MIN_GPU_MEMORY_GB, max_value=MAX_GPU_MEMORY_GB, help_text="Memory of one GPU, in GB.",
        error_messages={"min_value": GPU_MEMORY_WORDS, "max_value": GPU_MEMORY_WORDS})

    class Meta:
        model = GpuType
        fields = ["id", "name", "memory_gb", "relative_throughput"]


class ZonedDateTimeField(serializers.DateTimeField):
    """An instant given with its time zone (RFC 3339: `Z` or an offset). A naive time is refused
    on the field, as showback refuses a window's (showback._instant; the words are
    instants.no_zone_said), not read as UTC: a rate meant from midnight in New York would begin
    five hours early and reprice that GPU time. Price rates' effective_from and maintenance
    windows' start_at and end_at (api/maintenance.py)."""

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str):
            parsed = parse_datetime(value.strip())
            if parsed is not None and parsed.tzinfo is None:
                raise serializers.ValidationError(no_zone_said(value, parsed))
        return super().to_internal_value(value)


class PriceRateSerializer(ConstraintCheckedModelSerializer):
    gpu_type = NamedRecordField(slug_field="name", queryset=GpuType.objects.all())
    usd_per_gpu_hour = serializers.DecimalField(max_digits=10, decimal_places=4, min_value=0)
    effective_from = ZonedDateTimeField(
        help_text="From when the price holds: an RFC 3339 instant with its time zone (2026-12-01T00:00:00Z, "
                  "…-05:00); a time without one is refused.")

    class Meta:
        model = PriceRate
        fields = ["id", "gpu_type", "capacity_tier", "usd_per_gpu_hour", "effective_from"]
        validators: list[Any] = []  # a second from one start: PriceRate.clean() says it on effective_from


class NodeSerializer(ConstraintCheckedModelSerializer):
    gpu_type = NamedRecordField(slug_field="name", queryset=GpuType.objects.all(), lists_names=True)
    allocated_gpus = serializers.IntegerField(read_only=True, help_text="GPUs held by live allocations now.")
    # Read-only, no default: DRF puts a read-only field's default into the data it saves (a PUT of
    # the node as read answered 500).
    maintenance_window = serializers.IntegerField(
        read_only=True, allow_null=True,
        help_text="The maintenance window holding the node now (it takes no work until it ends); null: none.")
    maintenance_ends_at = serializers.DateTimeField(read_only=True, allow_null=True,
                                                    help_text="When that window ends; null: none.")
    cordon_reason = serializers.CharField(
        read_only=True, allow_null=True,
        help_text="While the node takes no work by an operator's cordon or drain: why, as given with it (\"\" when "
                  "none was); null while it takes work.")

    class Meta:
        model = Node
        fields = [
            "id", "name", "pool", "gpu_type", "gpu_count", "cpus", "memory_gb", "leaf_switch", "spine",
            "capacity_tier", "state", "unschedulable", "allocated_gpus", "agent_lease_expires_at", "last_heartbeat_at",
            "simulated", "retired_at", "maintenance_window", "maintenance_ends_at", "cordon_reason",
        ]
        read_only_fields = ["state", "unschedulable", "agent_lease_expires_at", "last_heartbeat_at", "retired_at"]
        extra_kwargs = {"gpu_count": {"min_value": 1, "max_value": 1024}}
        set_elsewhere = {"state": "use the node's cordon, drain and uncordon actions, retire (POST nodes/{id}/retire/) "
                                  "and return (POST nodes/{id}/return/); the control loop sets down, suspect and "
                                  "quarantined",
                         "unschedulable": "use the node's cordon, drain and uncordon actions",
                         "retired_at": "set when an admin retires the node: retire (POST nodes/{id}/retire/); "
                                       "cleared by return (POST nodes/{id}/return/)",
                         "agent_lease_expires_at": "the node's agent renews its lease with every heartbeat",
                         "last_heartbeat_at": "the node's agent reports it with every heartbeat",
                         "allocated_gpus": "counted from the node's live allocations",
                         "maintenance_window": "schedule maintenance with maintenance-windows/",
                         "maintenance_ends_at": "schedule maintenance with maintenance-windows/",
                         "cordon_reason": "give it with the cordon or drain: POST nodes/{id}/drain/ "
                                          "{\"reason\": \"…\"}"}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A node's GPU type and count do not change under its running work, nor its CPUs and
        memory below what that work holds (services/nodes.py, as the admin's node page): each
        refusal names its field and the jobs holding the GPUs."""
        refused: dict[str, str] = {}
        if self.instance is not None:
            for name, rule in (("gpu_type", nodes.gpu_type_refusal), ("gpu_count", nodes.gpu_count_refusal)):
                refusal = rule(self.instance, attrs[name]) if name in attrs else None
                if refusal:
                    refused[name] = refusal
            for name in ("cpus", "memory_gb"):
                refusal = nodes.host_refusal(self.instance, name, attrs[name]) if name in attrs else None
                if refusal:
                    refused[name] = refusal
        if refused:
            raise serializers.ValidationError(refused)
        return super().validate(attrs)


class NodeActionSerializer(StrictFieldsMixin, serializers.Serializer):
    """`POST nodes/{id}/cordon/` and `drain/`: why (optional), as Slurm's `Reason=`."""

    reason = HoldReasonField(help_text="Why the node is taken out of service, in your words (one line, at most "
                                       f"{HOLD_REASON_MAX_LENGTH} characters): in its node.state event and its "
                                       "cordon_reason until it is uncordoned.")


class NodeRunningJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    team = serializers.CharField()
    gpus = serializers.IntegerField(help_text="GPUs it holds on this node.")
    other_nodes = serializers.ListField(child=serializers.CharField(), help_text="The other nodes of its gang.")
    stopping = serializers.BooleanField(help_text="Told to stop (preempted, cancelled, requeued, timed out).")
    holds_until = serializers.DateTimeField(help_text="The latest it holds the node: its start plus its runtime "
                                                      "limit, or its stop deadline when stopping.")


def node_running_job(job: Any) -> dict[str, Any]:
    return {"id": job.job_id, "name": job.name, "team": job.team, "gpus": job.gpus_here,
            "other_nodes": list(job.other_nodes), "stopping": job.stopping,
            "holds_until": serializers.DateTimeField().to_representation(job.holds_until)}


class NodeActionResultSerializer(NodeSerializer):
    """A node action's answer: the node after it, and what it did."""

    changed = serializers.BooleanField(help_text="False when the node was already so (nothing recorded).")
    detail = serializers.CharField(help_text="What was done, in one sentence: the states before and after, and for "
                                             "a cordon or drain the jobs left running there and until when.")
    running_jobs = NodeRunningJobSerializer(many=True, help_text="After a cordon or drain: the jobs holding GPUs "
                                                                 "there now, those holding them longest last.")

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "changed", "detail", "running_jobs"]


class EventSerializer(serializers.ModelSerializer):
    node = NamedRecordField(slug_field="name", read_only=True, allow_null=True)
    team = NamedRecordField(slug_field="name", read_only=True, allow_null=True)
    data = serializers.DictField(read_only=True)
    message = serializers.SerializerMethodField(help_text="What happened, in words (engine times said in UTC).")

    def get_message(self, event: Event) -> str:
        return engine_times(event.message)

    class Meta:
        model = Event
        fields = ["id", "created_at", "kind", "actor", "reason", "message", "job", "allocation", "node", "team",
                  "epoch", "data"]
        read_only_fields = fields


# ------------------------------------------------------------------------------ a job's runs


class RunGpusSerializer(serializers.Serializer):
    node = serializers.CharField()
    gpu_indices = serializers.ListField(child=serializers.IntegerField())
    role = serializers.CharField(help_text="The heterogeneous-gang role these GPUs served; empty for a plain gang.")


class RunAfterEndSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    by = serializers.CharField(help_text="Who put the ended job back in the queue.")
    reason = serializers.CharField(help_text="Why, in their words (may be empty).")
    held = serializers.BooleanField(help_text="It came back held (requeuehold).")


class JobRunSerializer(serializers.Serializer):
    """One run of a job (one allocation: services/job_runs.py), as `sacct --duplicates` lists a
    requeued job's runs."""

    run = serializers.IntegerField(help_text="1 for the job's first run, then in bind order.")
    generation = serializers.IntegerField(help_text="The run's generation, as its agents, events and output "
                                                    "(`logs/?generation=`) know it.")
    fenced_generation = serializers.IntegerField(allow_null=True, help_text="A fenced run's new generation "
                                                 "(past anything its old owner holds); null unless fenced.")
    epoch = serializers.IntegerField(source="allocation.epoch", help_text="The scheduler epoch that bound it.")
    state = serializers.ChoiceField(choices=AllocationState.choices, help_text="The allocation's state.")
    outcome = serializers.ChoiceField(
        choices=[(o, o) for o in job_runs.OUTCOMES],
        help_text="What became of the job when this run ended (requeued, succeeded, failed, cancelled, "
                  "timed_out), or where the run stands (starting, running, stopping).")
    reason = serializers.CharField(help_text="Why it ended, as a code: its release reason (Preempted, Resized, "
                                             "Requeued, Cancelled, RuntimeLimitExceeded, a fence's reason such "
                                             "as NodeLeaseExpired), Exited when its processes ended by "
                                             "themselves; empty while it runs.")
    ended_how = serializers.CharField(help_text="How it ended (or stands), in words.")
    exit_code = serializers.IntegerField(allow_null=True, help_text="The exit code its agents reported when it "
                                                                   "ended (143: stopped by SIGTERM); null if none.")
    notice = serializers.SerializerMethodField(help_text="The notice that stopped it (who preempted it and why, "
                                                         "a cancel, its runtime limit); empty when none did.")
    bound_at = serializers.DateTimeField(help_text="When the scheduler bound it to its GPUs.")
    started_at = serializers.DateTimeField(allow_null=True, help_text="When its agents reported it running.")
    ended_at = serializers.DateTimeField(allow_null=True, help_text="When its GPUs were released (or fenced).")
    stop_deadline = serializers.DateTimeField(allow_null=True,
                                              help_text="While being stopped: when its processes must be gone.")
    elapsed_s = serializers.IntegerField(allow_null=True, help_text="From its start to its end (or now).")
    gpus = serializers.IntegerField()
    nodes = serializers.ListField(child=serializers.CharField())
    roles = serializers.DictField(child=serializers.IntegerField(),
                                  help_text="GPUs per role, for a heterogeneous gang; empty otherwise.")
    placement = RunGpusSerializer(many=True)
    gpu_hours = serializers.FloatField(help_text="GPU-hours held, from its bind to its release (or now), as the "
                                                 "accounting counts allocated time.")
    cost_usd = serializers.FloatField(help_text="What it cost in US dollars, to the cent, as showback charges it: its "
                                                "GPU time from its bind to its release (or now), at the price of its "
                                                "nodes' GPU type and capacity tier in force at each instant. The "
                                                "job's runs add up to the list's total_cost_usd.")
    borrowed = serializers.BooleanField(help_text="It ran on capacity borrowed from the cohort.")
    lost_gpu_hours = serializers.FloatField(allow_null=True, help_text="The work its requeue threw away (GPUs × "
                                                                       "time since the last checkpoint); null "
                                                                       "when it did not end in a requeue.")
    requeued_after_end = RunAfterEndSerializer(allow_null=True, help_text="The job was put back in the queue "
                                                                          "after this run had ended; null if not.")

    def get_notice(self, run: job_runs.Run) -> str:
        return engine_times(run.notice)


# ------------------------------------------------------------------------------------- auth


class TokenRequestSerializer(StrictFieldsMixin, serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField()
    username = serializers.CharField()


class MembershipInfoSerializer(serializers.Serializer):
    team = serializers.CharField(allow_null=True)
    role = serializers.CharField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_admin = serializers.BooleanField()
    is_finance = serializers.BooleanField()
    may_submit = serializers.BooleanField()
    default_team = serializers.CharField(allow_null=True)
    memberships = MembershipInfoSerializer(many=True)


# ---------------------------------------------------------------------------------- metrics


class QueueMetricsSerializer(serializers.Serializer):
    pending_jobs = serializers.IntegerField()
    pending_gpus = serializers.IntegerField()
    running_jobs = serializers.IntegerField()
    running_gpus = serializers.IntegerField()
    oldest_pending_s = serializers.FloatField(allow_null=True, help_text="Wait of the longest-waiting job, seconds.")
    pending_by_reason = serializers.DictField(child=serializers.IntegerField())
    pending_by_priority_class = serializers.DictField(child=serializers.IntegerField())
    pending_by_team = serializers.DictField(child=serializers.IntegerField())
    unschedulable_jobs = serializers.IntegerField()


class JobPriorityQuerySerializer(serializers.Serializer):
    job = serializers.CharField(
        required=False, help_text="Only these jobs: ids separated by commas (`?job=12,13`), as `sprio -j`.")

    def validate_job(self, value: str) -> list[int]:
        ids = []
        for part in value.split(","):
            part = part.strip()
            if not part.isdigit() or not 1 <= int(part) <= 2**63 - 1:
                raise serializers.ValidationError(
                    f"{part!r} is not a job id: give whole numbers from 1, separated by commas (job=12,13)")
            ids.append(int(part))
        return ids


class JobPriorityRowSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    name = serializers.CharField()
    order = serializers.IntegerField(help_text="1-based place among every job in line now (the next cycle's order).")
    team = serializers.CharField()
    priority_class = serializers.CharField()
    class_value = serializers.IntegerField(help_text="The priority class's value.")
    aging_points = serializers.FloatField(help_text="What waiting added (aging_per_hour per whole hour waited).")
    effective_priority = serializers.FloatField(help_text="class_value + aging_points: higher goes first.")
    team_share = serializers.FloatField(
        help_text="The team's dominant share (DRF over GPUs, CPUs, memory, with decayed past usage): among "
                  "equal priorities the lower goes first.")
    runtime_limit_s = serializers.FloatField(allow_null=True, help_text="Among equals, the shorter goes first.")


class JobPrioritySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    queue_order = serializers.CharField(help_text="The queue-order plugin the scheduler runs.")
    in_line = serializers.IntegerField(help_text="Jobs in line in all, the ones you may not see included.")
    jobs = JobPriorityRowSerializer(many=True, help_text="The jobs in line you may see, in queue order.")
    team_shares = serializers.DictField(child=serializers.FloatField(),
                                        help_text="Each team with a job in line: its dominant share.")


class SchedulerLeaderSerializer(serializers.Serializer):
    holder = serializers.CharField(help_text="The process leading the scheduling loop (empty: none yet).")
    epoch = serializers.IntegerField(help_text="Its epoch: the fencing token every allocation carries.")
    expires_at = serializers.DateTimeField(allow_null=True)
    last_cycle_at = serializers.DateTimeField(allow_null=True)
    last_cycle_ms = serializers.FloatField(allow_null=True)
    cycles = serializers.IntegerField()


class SchedulerPolicySerializer(serializers.Serializer):
    engine = serializers.DictField(
        help_text="Every setting of the engine's SchedulerConfig as the loop builds it each cycle: queue_order, "
                  "filters, placement_by_workload, victim_chooser, locality_weights, fair_share_half_life_s, "
                  "aging_per_hour, backfill, preemption, elastic_growth, the per-cycle caps, ... "
                  "(docs/engine.md).")
    loop = serializers.DictField(help_text="The loop's timings (settings.QM, environment QM_<NAME>).")
    leader = SchedulerLeaderSerializer(allow_null=True, help_text="The scheduler lease; null before the first cycle.")


class FairShareRowSerializer(serializers.Serializer):
    team = serializers.CharField()
    dominant_share = serializers.FloatField(
        help_text="The largest of its shares: among jobs of equal priority, the team with the lower one goes first.")
    dominant_resource = serializers.CharField(
        help_text="gpus, cpus or memory: the resource whose share is the dominant one; empty for a team that holds "
                  "and used nothing.")
    shares = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Per resource (gpus, cpus, memory): (held now + decayed past usage as an average holding) ÷ the "
                  "fleet's capacity.")
    held_now = serializers.DictField(child=serializers.IntegerField(), help_text="gpus, cpus, memory_gb held now.")
    decayed_usage = serializers.DictField(
        child=serializers.FloatField(),
        help_text="gpu_hours, cpu_hours, memory_gb_hours used in the past, decayed to now by the half-life.")


class FairShareSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the fleet was read.")
    half_life_s = serializers.FloatField(help_text="How fast past usage fades (SchedulerConfig.fair_share_half_life_s).")
    teams = FairShareRowSerializer(many=True, help_text="Lowest dominant share first: the order the queue favours.")


class EtaRecordQuerySerializer(serializers.Serializer):
    days = serializers.IntegerField(min_value=1, max_value=eta_record.MAX_DAYS, default=eta_record.DEFAULT_DAYS,
                                    help_text="The jobs that started in the last this many days.")


class EtaSizeClassSerializer(serializers.Serializer):
    size_class = serializers.ChoiceField(choices=list(eta_record.SIZE_CLASSES))
    node_gpus = serializers.IntegerField(
        help_text="The GPUs of the fleet's largest node: small jobs ask fewer, large ones at least that many.")
    judged = serializers.IntegerField()
    on_time = serializers.FloatField(allow_null=True)
    median_share_of_wait = serializers.FloatField(allow_null=True)
    median_early_s = serializers.FloatField(allow_null=True)
    late_p95_s = serializers.FloatField(allow_null=True)
    late_max_s = serializers.FloatField(allow_null=True)


class EtaRecordSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    judged = serializers.IntegerField(help_text="Jobs that started in the window after waiting with an ETA.")
    on_time = serializers.FloatField(
        allow_null=True, help_text="Share of them that started no later than the first ETA they were told.")
    median_share_of_wait = serializers.FloatField(
        allow_null=True, help_text="Median of the wait they had ÷ the wait they were told, both from when the ETA "
                                   "was first told: 0.4 = the median job started after 40 % of it.")
    median_early_s = serializers.FloatField(
        allow_null=True, help_text="How many seconds before its ETA the median on-time job started.")
    late_p95_s = serializers.FloatField(
        allow_null=True, help_text="Lateness past the ETA told, 95th percentile over all of them (0 when on time).")
    late_max_s = serializers.FloatField(allow_null=True, help_text="The latest start past the ETA told, seconds.")
    size_classes = EtaSizeClassSerializer(
        many=True, help_text="The same per size class, small then large; empty when no job is judged or the fleet "
                             "has no node.")


class PoolFragmentationSerializer(serializers.Serializer):
    pool = serializers.CharField()
    gpu_type = serializers.CharField()
    nodes = serializers.IntegerField()
    total_gpus = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField(help_text="Free GPUs on ready nodes outside any maintenance window now.")
    unavailable_gpus = serializers.IntegerField(help_text="Free GPUs on nodes that are not ready, or that are "
                                                          "inside a maintenance window now (they take no work).")
    largest_free_block = serializers.IntegerField(
        help_text="Most idle GPUs on one ready node; GPUs held idle for a waiting job's reservation included.")
    whole_free_nodes = serializers.IntegerField()
    partially_used_nodes = serializers.IntegerField()
    stranded_gpus = serializers.IntegerField(
        help_text="Idle GPUs on partly used ready nodes while a job needing whole nodes of this pool waits; "
                  "GPUs held idle for a waiting job's reservation included."
    )
    waiting_whole_node_jobs = serializers.IntegerField()


class FragmentationMetricsSerializer(serializers.Serializer):
    total_gpus = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField()
    stranded_gpus = serializers.IntegerField(
        help_text="Idle GPUs on partly used ready nodes while a job that needs a whole node waits; "
                  "GPUs held idle for a waiting job's reservation included (the cycle's figure in /metrics)."
    )
    pending_for_contiguous_gpus = serializers.IntegerField(
        help_text="Jobs waiting as InsufficientContiguousGpus: enough GPUs free, not in one piece."
    )
    reserved_gpus = serializers.IntegerField(
        allow_null=True,
        help_text="Idle GPUs held for a waiting job's reservation or nomination (nodes draining for a gang), "
                  "as the last scheduling cycle counted them (quartermaster_reserved_gpus in /metrics); "
                  "null before the first cycle."
    )
    pools = PoolFragmentationSerializer(many=True)

