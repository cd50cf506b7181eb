"""The fields and mixins the serializers of every resource share: a field the resource does
not have refused (StrictFieldsMixin), every writable field asked for on PUT
(PutReplacesWholeMixin), the model's own rules run before a write
(ConstraintCheckedModelSerializer), a choice or a record refused in words (NamedChoiceField,
NamedRecordField), a name, a hold's reason, environment variables, an instant with its time zone."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.backends.base.operations import BaseDatabaseOperations
from rest_framework import serializers
from rest_framework.fields import get_error_detail
from rest_framework.relations import MANY_RELATION_KWARGS

from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.models.names import nothing_visible_problem
from controlplane.services.given_once import repeated_problem
from controlplane.services.hold_text import reason_problem
from controlplane.services.instants import InstantRefused, instant_from_text
from controlplane.services.jobs import env_problem as job_env_problem
from controlplane.services.plain_text import given_kind, hidden_character_problem
from controlplane.services.whole_numbers import NotAWholeNumber, fractional_number, json_kind, whole_number
from controlplane.services.yes_or_no import NotYesOrNo, yes_or_no

# PostgreSQL `integer` columns; anything above is refused as a 400, not a database error.
MAX_INT = 2**31 - 1
# Each integer column's range in PostgreSQL (Django's own table), applied on every database.
INTEGER_COLUMN_RANGES: dict[str, tuple[int, int]] = dict(BaseDatabaseOperations.integer_field_ranges)
#: Past it a float does not hold every whole number: its digits are no longer the ones written.
FLOAT_EXACT_WHOLE = 2**53
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")  # \Z: "$" lets a trailing newline through


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


class PutReplacesWholeMixin:
    """PUT replaces the whole record: every writable field the record's GET shows must be sent,
    and one left out is a 400 naming it (all of them in one answer, with any other refusal),
    never kept as stored nor reset to a default. Until 6 Dec a PUT that left out an optional
    field kept its stored value, so PUT behaved as PATCH; which default a field left out should
    return to is not always plain (a team's `priority_classes`: [] means every class), so it is
    asked for. A PUT is a write to a record (``instance``) that is not ``partial``; PATCH
    changes only what it is given. A write-only field (a hook's `secret`) no GET shows, so a
    record read and written back has none: left out, it is unchanged."""

    def to_internal_value(self, data: Any) -> Any:
        left_out = self._left_out_on_put(data)
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if left_out and isinstance(exc.detail, dict):
                exc.detail.update(left_out)  # DRF's "This field is required." said in PUT's words
            raise
        if left_out:
            raise serializers.ValidationError(left_out, code="required")
        return value

    def _left_out_on_put(self, data: Any) -> dict[str, list[Any]]:
        if getattr(self, "instance", None) is None or getattr(self, "partial", False) or not isinstance(data, Mapping):
            return {}
        label = str(self.Meta.model._meta.verbose_name) if hasattr(self, "Meta") else "record"  # type: ignore[attr-defined]
        said = (f"Required on PUT, which replaces the whole {label}: send it as GET gives it, or use PATCH to "
                "change only some fields.")
        return {name: [serializers.ErrorDetail(said, code="required")]
                for name, field in self.fields.items()  # type: ignore[attr-defined]
                if not field.read_only and not field.write_only and name not in data}


class WholeNumberField(serializers.IntegerField):
    """A whole number as services/whole_numbers.py reads one: a JSON integer, or the digits 0-9
    as a string (with a leading -). DRF's IntegerField read it with int() after dropping a
    fraction of zeros, so `"٣"`, `"３"`, `"3_0"` (30), `" 4 "`, `"8.0"` and `8.0` were taken;
    they are a 400 on the field saying what is wrong. Every writable integer of the API is one
    (tests/controlplane/api/test_api_whole_numbers.py holds them to it).

    A JSON number with an exponent beyond the field's bounds (`1e30`, `1e400` read as infinity)
    is refused as the same number written in digits is: beyond the field's largest (or below its
    least) value, in the field's words. Until 7 Dec it was "1e+30 is not a whole number: give
    1000000000000000019884624838656, without the fraction": a whole number said not to be one, and
    told to give a number refused too. Without a bound of its own (a maintenance window's length,
    services/maintenance.py bounds), one past the whole numbers a float holds exactly (2⁵³) is
    read as the number it is, for the rule that bounds it to say so."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, float) and (data.is_integer() or math.isinf(data)):
            if self.max_value is not None and data > self.max_value:
                self.fail("max_value", max_value=self.max_value)
            if self.min_value is not None and data < self.min_value:
                self.fail("min_value", min_value=self.min_value)
            if math.isfinite(data) and abs(data) >= FLOAT_EXACT_WHOLE and (
                    self.max_value is None if data > 0 else self.min_value is None):
                return int(data)
        try:
            return whole_number(data)
        except NotAWholeNumber as refused:
            raise serializers.ValidationError(str(refused), code="invalid") from None


class FractionalNumberField(serializers.FloatField):
    """A number with a fraction as services/whole_numbers.fractional_number reads one (ASCII
    digits, one '.', a leading '-'), negative zero as zero. DRF's FloatField read it with
    float(): '٣' was 3.0, '1_0' 10.0."""

    def to_internal_value(self, data: Any) -> float:
        try:
            number = fractional_number(data)
        except NotAWholeNumber as refused:
            raise serializers.ValidationError(str(refused), code="invalid") from None
        value: float = super().to_internal_value(str(number))
        return value


class FractionalDecimalField(serializers.DecimalField):
    """A DecimalField by the same rule as FractionalNumberField (Decimal() read '٣' as 3), and
    negative zero stored as zero: "-0" was stored, and shown, as -0.0000."""

    def to_internal_value(self, data: Any) -> Any:
        try:
            number = fractional_number(data)
        except NotAWholeNumber as refused:
            raise serializers.ValidationError(str(refused), code="invalid") from None
        value = super().to_internal_value(str(number))
        return abs(value) if value.is_zero() else value


class YesOrNoField(serializers.BooleanField):
    """true or false as services/yes_or_no.py reads them (a JSON boolean; true, false, 1, 0 in
    any case), as the list filters do. DRF's BooleanField also took "yes", "on", "y", "t", "no",
    "off", "n", "f" and 1.0."""

    def to_internal_value(self, data: Any) -> bool:
        try:
            return yes_or_no(data)
        except NotYesOrNo as refused:
            raise serializers.ValidationError(f"{refused}: give true or false", code="invalid") from None


class TextField(serializers.CharField):
    """Text by the one rule for it (services/plain_text.py): a JSON string, since DRF's CharField
    turned the number 12345 into "12345", 1e20 into "1e+20" and true into "True" (`env: {"A": 1}`
    ran the job with A=1 where the client may have meant anything else); and holding no character
    that hides or disguises what it says (control characters, Unicode's line separators,
    bidirectional controls), the first one named with its code point and its place in what was
    sent. `lines=True`: text of several lines (a description, a command, an environment value),
    whose new lines and tabs are its own; otherwise one line. `any_character=True`: text the rule
    leaves to another, still given as text: a password or a signing key (never shown, so any
    character is its own), a hook's URL (services/notifications.url_problem refuses every control
    character and space in one, saying to percent-encode them)."""

    def __init__(self, *, lines: bool = False, any_character: bool = False, **kwargs: Any) -> None:
        self.lines, self.any_character = lines, any_character
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError(f"must be text, got {given_kind(data)}", code="not_text")
        if not self.any_character:
            kept = data.strip() if self.trim_whitespace else data
            problem = hidden_character_problem(kept, lines=self.lines,
                                               offset=len(data) - len(data.lstrip()) if self.trim_whitespace else 0)
            if problem:
                raise serializers.ValidationError(problem, code="hidden_character")
        value: str = super().to_internal_value(data)
        return value


class SlugTextField(TextField, serializers.SlugField):
    """A slug (a team's, a project's, a cohort's, a priority class's name), read as text first."""


def one_rule_field_mapping(mapping: dict[Any, Any]) -> dict[Any, Any]:
    """A ModelSerializer's field mapping with each model number field read by the one rule
    (services/whole_numbers.py): integers as WholeNumberField, the others as FractionalNumberField
    and FractionalDecimalField; a yes-or-no as YesOrNoField (services/yes_or_no.py); and text
    as TextField and SlugTextField (services/plain_text.py)."""
    ours = {serializers.IntegerField: WholeNumberField, serializers.FloatField: FractionalNumberField,
            serializers.DecimalField: FractionalDecimalField, serializers.BooleanField: YesOrNoField}
    text = {serializers.CharField: TextField, serializers.SlugField: SlugTextField}  # by kind: an email's stays
    return {model_field: text.get(field) or next((mine for theirs, mine in ours.items() if issubclass(field, theirs)),
                                                 field)
            for model_field, field in mapping.items()}


#: Model fields whose text may run over several lines (new lines and tabs its own): a record's
#: description. Every other text field of a model is one line: a name, a pool, a switch.
SEVERAL_LINES = frozenset({"description"})


class ConstraintCheckedModelSerializer(PutReplacesWholeMixin, StrictFieldsMixin, serializers.ModelSerializer):
    """Runs the model's database constraints and its own ``clean()`` rules in Python before
    writing (as the admin's forms do), so a violation is a 400 naming the rule rather than an
    IntegrityError or a record the admin would have refused.

    An integer column takes what PostgreSQL's would, whatever the database: DRF bounds a model's
    integer field by the connection's range, and SQLite's (the embedded demo's) is 64-bit for
    every integer column, so a priority class's `budget_window_s` of 2**63 - 1 was stored there
    and every later `now - timedelta(seconds=…)` overflowed (the scheduling loop's snapshot, a
    cancel's grace deadline, a drain's list of running jobs): 500s and a loop that never cycled
    again. PostgreSQL refused the same value as a 400 on the field."""

    serializer_field_mapping = one_rule_field_mapping(serializers.ModelSerializer.serializer_field_mapping)

    def build_standard_field(self, field_name: str, model_field: Any) -> tuple[Any, dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        if issubclass(field_class, TextField) and (field_name in SEVERAL_LINES
                                                   or model_field.get_internal_type() == "TextField"):
            kwargs["lines"] = True
        low, high = INTEGER_COLUMN_RANGES.get(model_field.get_internal_type(), (None, None))
        if high is not None and not kwargs.get("read_only") and "choices" not in kwargs:
            kwargs["max_value"] = min(kwargs.get("max_value", high), high)
            kwargs["min_value"] = max(kwargs.get("min_value", low), low)
        return field_class, kwargs

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


def no_record_named(records: Any, given: str, *, slug_field: str = "name", lists_names: bool = False,
                    scope: str = "", label: tuple[str, str] | None = None) -> str:
    """The refusal of a name that is none of `records`: "no cohort named 'shared'", then `scope`
    (" whose jobs you may read": the records are the reader's, not all), then, when
    `lists_names` (records everyone may know of: cohorts, priority classes, GPU types), the
    names there are. A body's field (NamedRecordField) and a filter (filtersets.NamedRecordFilter)
    say it alike. `label` (singular, plural): what `slug_field` names when it is not the record
    itself, as a node's pool ("no pool named 'a10': pools are a100, h100"), each name once."""
    one, plural = label or (str(records.model._meta.verbose_name), str(records.model._meta.verbose_name_plural))
    said = f"no {one} named '{given[:64]}'{scope}"
    if lists_names:
        names = list(records.order_by(slug_field).values_list(slug_field, flat=True).distinct()[:11])
        said += (f": {plural} are " + ", ".join(names[:10])
                 + (", …" if len(names) > 10 else "") if names else f": there is no {one} yet")
    return said


class OnceEachListField(serializers.ListField):
    """A list that is a set: each item given once (services/given_once.py), a repeat refused
    naming it ("'H100-80GB' is given twice: give each type once"), where DRF's ListField kept it
    and the code after it collapsed the two silently. `each`: what one item is, in those words."""

    def __init__(self, *, each: str, **kwargs: Any) -> None:
        self.each = each
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[Any]:
        items: list[Any] = super().to_internal_value(data)
        problem = repeated_problem(items, self.each)
        if problem:
            raise serializers.ValidationError(problem, code="given_twice")
        return items


class NamedRecordListField(serializers.ManyRelatedField):
    """A list of NamedRecordField names, each given once. DRF's ManyRelatedField iterates anything
    iterable but a string, so an object was read as the list of its keys: `{"priority_classes":
    {"research": 1, "batch": 0}}` gave a team both classes; and a name given twice was one
    record in the many-to-many set, the list read back shorter than it was sent."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            raise serializers.ValidationError(f"give a list of names, not {json_kind(data)}", code="not_a_list")
        records = super().to_internal_value(data)
        problem = repeated_problem((str(item) for item in data), "name") if len(set(records)) < len(records) else None
        if problem:
            raise serializers.ValidationError(problem, code="given_twice")
        return records


class NamedRecordField(serializers.SlugRelatedField):
    """A related record given by its name, read by the one rule for text (services/plain_text.py):
    a NUL (which PostgreSQL cannot compare, a 500 from the lookup until 4 Dec), an escape or a
    bidirectional control names no record, and is said as a TextField says it. A name
    that is no record is refused in words ("no cohort named 'shared'"), with the names there
    are when `lists_names` (records everyone may know of: cohorts, priority classes, GPU
    types), where DRF said "Object with name=shared does not exist."."""

    def __init__(self, *, lists_names: bool = False, **kwargs: Any) -> None:
        self.lists_names = lists_names
        super().__init__(**kwargs)

    @classmethod
    def many_init(cls, *args: Any, **kwargs: Any) -> NamedRecordListField:
        # as DRF's RelatedField.many_init, with the list field that refuses an object
        return NamedRecordListField(child_relation=cls(*args, **kwargs), **{
            key: value for key, value in kwargs.items() if key in MANY_RELATION_KWARGS})

    def to_internal_value(self, data: Any) -> Any:
        problem = hidden_character_problem(data) if isinstance(data, str) else None
        if problem:  # no record's name holds one (and PostgreSQL cannot compare text with a NUL)
            raise serializers.ValidationError(problem, code="hidden_character")
        if isinstance(data, bool) or not isinstance(data, str | int):
            # 1.5 fell to DRF's "Object with name=1.5 does not exist.", a list to "Invalid value.",
            # true was looked up as a record named 'True'; a whole number still reads as its digits
            raise serializers.ValidationError(f"a name is a string (in quotes), not {json_kind(data)}", code="invalid")
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as refused:
            queryset = self.get_queryset()
            if not isinstance(data, str | int) or getattr(refused, "get_codes", lambda: None)() != ["does_not_exist"]:
                raise
            said = no_record_named(queryset, str(data), slug_field=self.slug_field, lists_names=self.lists_names)
            raise serializers.ValidationError(said, code="does_not_exist") from None


class NameField(TextField):
    """A short name people read in lists and terminals: one line of text (TextField), with at
    least one visible character."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        problem = nothing_visible_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class HoldReasonField(TextField):
    """Why a job is held (or requeued, or a node cordoned), in its giver's words: one line of
    text (TextField), at most HOLD_REASON_MAX_LENGTH characters; the rest of its rules are the
    service's (services/hold_text.reason_problem)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("max_length", HOLD_REASON_MAX_LENGTH)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        problem = reason_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


def env_from_text(text: str) -> dict[str, str]:
    """`NAME=value` lines (a docker `--env-file`'s, `qm submit --env`'s words) as the mapping
    `env` is: the value is everything after the first `=`, as typed; blank lines and lines
    starting with `#` say nothing. A line without `=`, or a name given twice, is refused naming
    its line: the jobs page's form sends its Environment box as typed, and the submit and the
    live check judge it in one place."""
    env: dict[str, str] = {}
    first_line: dict[str, int] = {}
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name:
            problems.append(f"line {number} ({line.strip()[:40]!r}) is not NAME=value")
        elif name in first_line:
            problems.append(f"line {number} sets {name[:40]} again (line {first_line[name]} set it)")
        else:
            env[name], first_line[name] = value, number
    if problems:
        raise serializers.ValidationError(
            "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            + ": one variable a line, as WANDB_PROJECT=sweeps")
    return env


class EnvField(serializers.DictField):
    """Environment variables: names as in POSIX shells, string values; or the same as text,
    one `NAME=value` a line (`env_from_text`), as the jobs page's form sends them."""

    child = TextField(allow_blank=True, max_length=16384, trim_whitespace=False, lines=True)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        if isinstance(data, str):
            data = env_from_text(data)
        value: dict[str, str] = super().to_internal_value(data)
        bad = [k for k in value if not ENV_NAME.match(k) or len(k) > 256]
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


class ZonedDateTimeField(serializers.DateTimeField):
    """An instant given with its time zone (RFC 3339: `Z` or an offset), read by the one rule
    for instants (services/instants.instant_from_text): a naive time is refused on the field, as
    showback refuses a window's and the API's time filters theirs, not read as UTC: a rate meant
    from midnight in New York would begin five hours early and reprice that GPU time. Text that
    is no time, or one no calendar has, is refused in the same words as there. Price rates'
    effective_from and maintenance windows' start_at and end_at (api/maintenance.py)."""

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str):
            try:
                value = instant_from_text(value)
            except InstantRefused as refused:
                raise serializers.ValidationError(str(refused)) from None
        return super().to_internal_value(value)
