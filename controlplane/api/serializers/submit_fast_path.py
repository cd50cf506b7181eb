"""The submit's plain-data fast path: the common, plainly valid body typed without DRF's field
machinery (plain_submit_request), by checks built from the serializer's own fields; anything
else goes through the serializer, which names each field at fault."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from rest_framework import serializers

from controlplane.api.serializers.fields import (
    ENV_NAME,
    MAX_INT,
    EnvField,
    NameField,
    OnceEachListField,
    TextField,
)
from controlplane.api.serializers.job_requests import JobSubmitSerializer
from controlplane.models.names import name_problem
from controlplane.services.given_once import repeated_problem
from controlplane.services.jobs import SubmitRequest
from controlplane.services.jobs import env_problem as job_env_problem
from controlplane.services.jobs import shape_errors as job_shape_errors
from controlplane.services.plain_text import LINES_REFUSED, ONE_LINE_REFUSED

_SURROGATES = re.compile("[\ud800-\udfff]")
_Check = Callable[[Any], Any]
_INVALID = object()


def _string_check(field: serializers.CharField) -> _Check:
    """What `field` would return for a plain str it accepts, else _INVALID."""
    trim, blank, most = field.trim_whitespace, field.allow_blank, field.max_length
    visible_only = isinstance(field, NameField)
    # the one rule for text (services/plain_text.py), as TextField reads it
    hiding = None if not isinstance(field, TextField) or field.any_character else (LINES_REFUSED if field.lines
                                                                          else ONE_LINE_REFUSED)

    def check(value: Any) -> Any:
        if type(value) is not str:
            return _INVALID
        if trim:
            value = value.strip()
        if (not value and not blank) or (most is not None and len(value) > most):
            return _INVALID
        if "\x00" in value or _SURROGATES.search(value) or (hiding is not None and hiding.search(value)):
            return _INVALID
        if visible_only and name_problem(value):
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
    once_each = isinstance(field, OnceEachListField)

    def check(value: Any) -> Any:
        if type(value) is not list or (most is not None and len(value) > most):
            return _INVALID
        out = [item(v) for v in value]
        if once_each and repeated_problem(out, field.each):
            return _INVALID  # a value given twice: the serializer names it
        return _INVALID if any(v is _INVALID for v in out) else out

    return check


def _env_check(field: EnvField) -> _Check:
    item = _field_check(field.child)

    def check(value: Any) -> Any:
        if type(value) is not dict or len(value) > 256:
            return _INVALID
        out = {}
        for k, v in value.items():
            if type(k) is not str or len(k) > 256 or not ENV_NAME.match(k):
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
                        min_gpus=values.get("min_gpus"), max_gpus=values.get("max_gpus"),
                        members_on_distinct_nodes=values["members_on_distinct_nodes"]):
        return None  # a shape the rules fault: the serializer explains, naming each field
    return SubmitRequest(gpu_types=tuple(gpu_types or ([gpu_type] if gpu_type else [])), **values)
