"""A JSON number written with an exponent, beyond an integer field's range (`"gpus": 1e30`,
`"runtime_limit_s": 1e30`, a maintenance window's `"duration_s": 1e30`), is refused as the same
number written as digits is: beyond the field's largest (or below its least) value, in the
field's words. Found by the operator audit (7 Dec): it was "1e+30 is not a whole number: give
1000000000000000019884624838656, without the fraction", which is wrong twice: 1e30 is a whole
number, and the number it said to give is refused too. A whole number within range written with
a fraction (`8.0`) is still told to drop it."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers
from rest_framework.test import APIClient

from controlplane.api.serializers.fields import WholeNumberField
from controlplane.models import Job, MaintenanceWindow
from tests.controlplane.api.test_api_whole_numbers import SUBMIT, serializer_fields
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db


def _bounded_fields() -> list[tuple[str, WholeNumberField]]:
    return [(where, one) for where, field, one in serializer_fields()
            if isinstance(one, WholeNumberField) and not field.read_only and one.max_value is not None]


def _refusal(field: WholeNumberField, given: Any) -> list[str]:
    with pytest.raises(serializers.ValidationError) as refused:
        field.run_validation(given)
    return [str(said) for said in refused.value.detail]


def test_every_bounded_integer_field_says_a_huge_float_is_beyond_its_bound_as_it_says_the_digits() -> None:
    fields = _bounded_fields()
    wrong = {}
    for where, field in fields:
        beyond = [("1e30", 1e30, 10**31), ("inf", math.inf, 10**31)]
        if field.min_value is not None:
            beyond += [("-1e30", -1e30, -(10**31)), ("-inf", -math.inf, -(10**31))]
        for shown, given, digits in beyond:
            said, as_digits = _refusal(field, given), _refusal(field, digits)
            if said != as_digits:
                wrong[f"{where} {shown}"] = said
    assert len(fields) > 40
    assert not wrong, wrong


@pytest.mark.parametrize(("field", "words"), [
    ("gpus", "a job may ask for at most 65,536 GPUs"),
    ("runtime_limit_s", "more than any runtime limit"),
    ("checkpoint_interval_s", "a checkpoint interval is at most 2147483647 s (68 years)"),
])
def test_a_submit_with_a_huge_float_is_told_the_fields_bound(alice: APIClient, fleet: Fleet, field: str,
                                                             words: str) -> None:
    r = alice.post("/api/v1/jobs/", {**SUBMIT, field: 1e30}, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    [said] = r.json()["errors"][field]
    assert words in said and "not a whole number" not in said, said
    assert not Job.objects.exists()


def test_a_json_number_past_what_a_float_holds_is_said_beyond_the_bound_too(alice: APIClient, fleet: Fleet) -> None:
    """1e400 reads as infinity: "inf is not a whole number" said nothing of the bound."""
    r = alice.generic("POST", "/api/v1/jobs/", '{"team": "ml", "name": "x", "gpus": 1e400}',
                      content_type="application/json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["errors"]["gpus"] == ["a job may ask for at most 65,536 GPUs"]


def test_an_admin_write_with_a_huge_float_is_told_the_columns_bound(admin: APIClient, fleet: Fleet) -> None:
    # A priority class's value is bounded by its column alone (a quota's figures by the quota
    # ceiling: test_quota_ceiling_said_at_any_size.py).
    r = admin.patch(f"/api/v1/priority-classes/{fleet.research.pk}/", {"value": 1e30}, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["errors"]["value"] == ["Ensure this value is less than or equal to 2147483647."]
    fleet.research.refresh_from_db()
    assert fleet.research.value == 100


def test_a_maintenance_window_of_a_huge_float_length_is_told_the_longest_window(admin: APIClient,
                                                                                 fleet: Fleet) -> None:
    start = (timezone.now() + timedelta(hours=1)).isoformat()

    r = admin.post("/api/v1/maintenance-windows/", {"nodes": ["h100-1"], "start_at": start, "duration_s": 1e30,
                                                    "reason": "firmware"}, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    [said] = r.json()["errors"]["duration_s"]
    assert "a window lasts at most" in said and "not a whole number" not in said, said
    assert not MaintenanceWindow.objects.exists()


@pytest.mark.parametrize(("given", "words"), [(8.0, "give 8, without the fraction"), (1e3, "give 1000")])
def test_a_whole_number_in_range_written_with_a_fraction_is_still_told_to_drop_it(alice: APIClient, fleet: Fleet,
                                                                                   given: float, words: str) -> None:
    r = alice.post("/api/v1/jobs/", {**SUBMIT, "gpus": given}, format="json")

    assert r.status_code == 400, r.content[:300]
    [said] = r.json()["errors"]["gpus"]
    assert "is not a whole number" in said and words in said, said
