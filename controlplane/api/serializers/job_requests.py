"""What a request about jobs sends: a submit (JobSubmitSerializer, JobArraySubmitSerializer), a
change (JobUpdateSerializer, an array's task limit), a hold, a requeue, and their parts (a
heterogeneous gang's roles, dependencies). They type and bound the input; rules that need the
database (defaults, names, what the fleet can run) live in services/jobs.py."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.fields import SkipField

from controlplane.api.serializers.fields import (
    MAX_INT,
    EnvField,
    HoldReasonField,
    NamedChoiceField,
    NameField,
    OnceEachListField,
    StrictFieldsMixin,
    TextField,
    WholeNumberField,
    YesOrNoField,
)
from controlplane.api.serializers.jobs import JobSerializer
from controlplane.choices import DependencyCondition, DependencyMode, Topology, WorkloadClass
from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.services import dependency_text
from controlplane.services import holds as holds_service
from controlplane.services import jobs as job_service
from controlplane.services.dependencies import MAX_DEPENDENCIES
from controlplane.services.jobs import MAX_ARRAY_TASKS, MAX_RUNTIME_LIMIT_ASKED, SubmitRequest
from controlplane.services.jobs import shape_errors as job_shape_errors

#: Job ids are bigints (PostgreSQL's; SQLite's integers are as wide).
MAX_JOB_ID = 2**63 - 1
# The most GPUs one job may ask for, whatever the fleet: bounds the engine's work per job.
MAX_JOB_GPUS = 65_536
MAX_GPUS_PER_NODE = 1024
ARRAY_LIMIT_LEAST = "at least 1 task holding GPUs at once"
ARRAY_LIMIT_MOST = f"at most {MAX_ARRAY_TASKS:,} tasks at once, the most an array has"


def _bounded(low: int, high: int, least: str, most: str, **kwargs: Any) -> WholeNumberField:
    """A job's whole number whose bounds are said in its unit and meaning, `least` below `low`
    and `most` above `high`: DRF's "Ensure this value is greater than or equal to 1." named
    neither (`qm submit --time 0`, `--gpus 0`). No thousands separators in a count of seconds:
    the submit form says "N s" in the field's hours or minutes (qm.js, inFieldUnit)."""
    messages = {"min_value": least, "max_value": most, **kwargs.pop("error_messages", {})}
    return WholeNumberField(min_value=low, max_value=high, error_messages=messages, **kwargs)


def _per_gpu(what: str, **kwargs: Any) -> WholeNumberField:
    """A host or device need per GPU: 0 (none said) or more."""
    return _bounded(0, MAX_INT, f"{what} per GPU: 0 (none asked for) or more",
                    f"{what} per GPU: at most {MAX_INT}", **kwargs)


class HoldSerializer(StrictFieldsMixin, serializers.Serializer):
    """`POST jobs/{id}/hold/` and `job-arrays/{id}/hold/`: an optional reason."""

    reason = HoldReasonField(help_text="Why it is held, in your words (one line, at most "
                                       f"{HOLD_REASON_MAX_LENGTH} characters): said in its explanation and "
                                       "the job.held event; cleared on release.")


class RequeueSerializer(StrictFieldsMixin, serializers.Serializer):
    """`POST jobs/{id}/requeue/` and `job-arrays/{id}/requeue/`: whether it comes back held, and why."""

    hold = YesOrNoField(required=False, default=False,
                                    help_text="Come back held (Slurm's requeuehold): out of the queue until released "
                                              "(POST jobs/{id}/release/). An admin's is an admin's hold.")
    reason = HoldReasonField(help_text="Why it is requeued, in your words (one line, at most "
                                       f"{HOLD_REASON_MAX_LENGTH} characters): said in its reason (\"Requeued by "
                                       "alice: ...\"), its events and, with hold, as the hold's reason.")


class ArrayRequeueSerializer(RequeueSerializer):
    """`POST job-arrays/{id}/requeue/`: as a job's, and which tasks: by their state."""

    states = OnceEachListField(
        each="state", child=serializers.ChoiceField(
            choices=["running", "succeeded", "failed", "cancelled", "timed_out"],
            error_messages={"invalid_choice": "\"{input}\" cannot be requeued; choose among running, succeeded, "
                                              "failed, cancelled, timed_out"}),
        required=False, allow_empty=False, default=["running"],
        help_text="The states of the tasks to requeue (default [\"running\"]): running tasks are stopped and "
                  "requeued, ended ones (succeeded, failed, cancelled, timed_out) go back to the queue at once, "
                  "e.g. [\"failed\", \"timed_out\"] reruns a sweep's failed tasks and leaves the running ones.")


#: The most roles one heterogeneous gang may name.
MAX_ROLES = 64


class GangRoleSerializer(StrictFieldsMixin, serializers.Serializer):
    """One role of a heterogeneous gang: `count` members of `gpus_per_member` GPUs each, every
    member on one node; what a role leaves out (GPU types, memory, CPUs) it takes from the job."""

    name = NameField(max_length=64, help_text="The role's name, e.g. `trainer`, `rollout`, `reward`.")
    count = _bounded(1, MAX_JOB_GPUS, "a role has at least 1 member", f"a role has at most {MAX_JOB_GPUS:,} members",
                     help_text="Members of this role.")
    gpus_per_member = _bounded(
        1, MAX_GPUS_PER_NODE, "at least 1 GPU for each member",
        f"at most {MAX_GPUS_PER_NODE:,} GPUs for each member: a member is on one node",
        help_text="GPUs of each member, on one node.")
    gpu_type = TextField(required=False, max_length=64, help_text="Shorthand for gpu_types=[…].")
    gpu_types = OnceEachListField(each="type", child=TextField(max_length=64), required=False, max_length=32,
                                  help_text="Acceptable GPU types of this role, each once; omitted: the job's.")
    min_gpu_memory_gb = _per_gpu("GB of device memory", required=False, default=0)
    cpus_per_gpu = _per_gpu("host CPUs", required=False, default=0)
    memory_gb_per_gpu = _per_gpu("GB of host memory", required=False, default=0)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "gpu_type" in attrs and attrs.get("gpu_types"):
            raise serializers.ValidationError({"gpu_type": "give gpu_type or gpu_types, not both"})
        gpu_type = attrs.pop("gpu_type", None)
        attrs["gpu_types"] = list(attrs.get("gpu_types") or ([gpu_type] if gpu_type else []))
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
    job = WholeNumberField(min_value=1, max_value=MAX_JOB_ID, required=False,
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
    gpus = _bounded(
        1, MAX_JOB_GPUS, "a job needs at least 1 GPU", f"a job may ask for at most {MAX_JOB_GPUS:,} GPUs",
        help_text="GPUs the job needs (its preferred size if elastic)."
    )
    gpus_per_node = _bounded(
        1, MAX_GPUS_PER_NODE, "at least 1 GPU on each node of the gang",
        f"at most {MAX_GPUS_PER_NODE:,} GPUs on one node", required=False, allow_null=True,
        help_text="GPUs on each node of the gang; omitted: the scheduler decides (whole nodes for jobs of a node or more).",
    )
    gpu_type = TextField(
        required=False, max_length=64, help_text="One acceptable GPU type (shorthand for gpu_types=[…])."
    )
    gpu_types = OnceEachListField(
        each="type", child=TextField(max_length=64), required=False, max_length=32,
        help_text="Acceptable GPU types, each once; omitted or empty: any type.",
    )
    min_gpu_memory_gb = _per_gpu("GB of device memory", required=False, default=0,
                                 help_text="Minimum device memory per GPU.")
    cpus_per_gpu = _per_gpu("host CPUs", required=False, default=0)
    memory_gb_per_gpu = _per_gpu("GB of host memory", required=False, default=0)
    topology = NamedChoiceField(choices=Topology.choices, required=False, default=Topology.ANY)
    members_on_distinct_nodes = YesOrNoField(
        required=False, default=False,
        help_text="No two members of the gang on one node (Slurm's --ntasks-per-node=1): each member of "
                  "gpus_per_node GPUs gets a node of its own. Omitted or false: members are packed, two on a node "
                  "with room for both. Needs gpus_per_node (or roles) and at least two members; not with same_node.",
    )
    min_gpus = _bounded(1, MAX_JOB_GPUS, "an elastic job runs on at least 1 GPU",
                        f"a job may ask for at most {MAX_JOB_GPUS:,} GPUs", required=False, allow_null=True,
                        help_text="Elastic: the smallest size it runs at.")
    max_gpus = _bounded(1, MAX_JOB_GPUS, "an elastic job grows to at least 1 GPU",
                        f"a job may ask for at most {MAX_JOB_GPUS:,} GPUs", required=False, allow_null=True,
                        help_text="Elastic: the largest size it can use.")
    priority_class = TextField(
        required=False, max_length=64, help_text="Priority class name; default: the team's default class."
    )
    team = TextField(required=False, max_length=64, help_text="Team name; default: your team.")
    project = TextField(required=False, max_length=64, help_text="Project name within the team.")
    workload = NamedChoiceField(choices=WorkloadClass.choices, required=False, default=WorkloadClass.TRAINING)
    runtime_limit_s = _bounded(
        # Up to its priority class's maximum, which the submit names in days (qm submit -t 99999d
        # was told "Ensure this value is less than or equal to 2147483647."); the bound here only
        # keeps out numbers no limit is near.
        1, MAX_RUNTIME_LIMIT_ASKED, "a runtime limit is at least 1 s",
        f"more than any runtime limit (at most {MAX_RUNTIME_LIMIT_ASKED // 86400 // 365:,} "
        "years); each priority class allows at most its maximum runtime limit", required=False, allow_null=True,
        help_text="Seconds before the job is stopped; default: the class default; at most the class's "
                  "max_runtime_limit_s.",
    )
    checkpoint_interval_s = _bounded(1, MAX_INT, "a checkpoint interval is at least 1 s",
                                     f"a checkpoint interval is at most {MAX_INT} s (68 years)",
                                     required=False, allow_null=True)
    command = TextField(required=False, default="", allow_blank=True, max_length=65536, trim_whitespace=False,
                        lines=True)
    env = EnvField(required=False, default=dict)
    hold = YesOrNoField(
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
    array_task_limit = _bounded(
        1, MAX_ARRAY_TASKS, ARRAY_LIMIT_LEAST, ARRAY_LIMIT_MOST, required=False, allow_null=True,
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
            members_on_distinct_nodes=attrs.get("members_on_distinct_nodes", False),
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
        gpu_types = tuple(data.pop("gpu_types", None) or ([gpu_type] if gpu_type else []))
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
                  "topology", "members_on_distinct_nodes", "min_gpus", "max_gpus", "dependencies", "dependency_mode")

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
            attrs["gpu_types"] = list(attrs["gpu_types"] or ())
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


_GPU_TYPES_WORD = re.compile(r"(?<![\w.])gpu_types\b")


def gpu_types_as_sent(data: Any, errors: dict[str, Any], detail: str = "") -> tuple[dict[str, Any], str]:
    """Errors, and a sentence, about the GPU types under the name the body gave them: `gpu_type`
    is the shorthand of `gpu_types`, and the rules judge the list, so a body that said
    `{"gpu_type": "B200"}` was refused on a `gpu_types` it never sent (submit, array submit and
    change alike). A body that said `gpu_types`, or both, is answered as it is."""
    if not (isinstance(data, dict) and "gpu_type" in data and "gpu_types" not in data):
        return errors, detail

    def named(text: Any) -> Any:
        return _GPU_TYPES_WORD.sub("gpu_type", text) if isinstance(text, str) else text

    renamed = {named(name): [named(m) for m in problems] if isinstance(problems, list) else named(problems)
               for name, problems in errors.items()}
    return renamed, named(detail)


class JobArraySubmitSerializer(JobSubmitSerializer):
    """A job array: one submission, one task per index, each with QM_ARRAY_INDEX in its env."""

    array = TextField(
        max_length=4096,
        help_text="Task indices, Slurm style: `0-99`, `1,3,10-20`, `0-98:2` (at most 10,000 tasks); `%N` at the "
                  "end (`0-99%10`) runs at most N of them at a time, as `array_task_limit` does.",
    )


class JobArrayLimitSerializer(StrictFieldsMixin, serializers.Serializer):
    """`PATCH job-arrays/{array_id}/`: the array's task limit (`scontrol update ArrayTaskThrottle=`)."""

    array_task_limit = _bounded(
        1, MAX_ARRAY_TASKS, ARRAY_LIMIT_LEAST, ARRAY_LIMIT_MOST, allow_null=True,
        help_text="At most this many of its tasks hold GPUs at once (Slurm's ArrayTaskThrottle); null lifts the "
                  "limit. Set on every task of the array; running tasks above a lowered limit keep running.",
    )
