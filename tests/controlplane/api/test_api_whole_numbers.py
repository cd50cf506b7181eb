"""A whole number is a JSON integer or the digits 0-9 as a string (a leading `-` at most), in
every body, query parameter and text the API reads (services/whole_numbers.py). Until 7 Dec
DRF's and Django's integer fields read one with Python's int() after dropping a fraction of
zeros: `{"gpus": "٣"}` ran a 3-GPU job, `"3_0"` set a quota of 30, `"8.0"`, `8.0` and `" 4 "`
were taken, `?id=1.0` listed job 1; and two checks by isdigit() then int() answered 500 to
'²' (`jobs/priority/?job=²`, `showback/?window=²d`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.urls import get_resolver
from django.utils import timezone
from rest_framework import serializers
from rest_framework.fields import Field
from rest_framework.test import APIClient

from controlplane.models import GpuType, Job, MaintenanceWindow, Node, PriceRate, PriorityClass, Quota, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db

SUBMIT = {"team": "ml", "project": "llm", "name": "train", "gpus": 1, "command": "python train.py",
          "runtime_limit_s": 600}

#: (given, the words its refusal must hold): each was read as a number before.
NOT_WHOLE = [
    ("٣", "use the digits 0-9"),           # Arabic-Indic three
    ("３", "use the digits 0-9"),          # full-width three
    ("3_0", "as 30"),                      # int() reads '_' between digits
    (" 4 ", "no spaces"),
    ("+3", "as 3"),
    ("8.0", "give 8, without the fraction"),
    (8.0, "give 8, without the fraction"),
]


@pytest.mark.parametrize(("given", "words"), NOT_WHOLE, ids=lambda v: repr(v))
def test_a_submit_refuses_gpus_that_are_not_written_as_a_whole_number(alice: APIClient, given: Any,
                                                                      words: str) -> None:
    r = alice.post("/api/v1/jobs/", {**SUBMIT, "gpus": given}, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    [said] = r.json()["errors"]["gpus"]
    assert "is not a whole number" in said and words in said, said
    assert not Job.objects.exists()


def test_a_submit_still_takes_a_number_or_its_digits_as_a_string(alice: APIClient) -> None:
    for given in (2, "2"):
        r = alice.post("/api/v1/jobs/", {**SUBMIT, "gpus": given}, format="json")
        assert r.status_code == 201, r.json()
        assert r.json()["gpus"] == 2


@pytest.mark.parametrize("given", ["٣", "2.0"])
def test_a_dependency_and_a_role_refuse_numbers_not_written_as_whole_numbers(alice: APIClient, fleet: Fleet,
                                                                             given: str) -> None:
    before = f.make_job(fleet.ml, fleet.research, name="before")
    deps = alice.post("/api/v1/jobs/", {**SUBMIT, "dependencies": [{"job": given}]}, format="json")
    roles = alice.post("/api/v1/jobs/", {**{k: v for k, v in SUBMIT.items() if k != "gpus"}, "roles": [
        {"name": "trainer", "count": given, "gpus_per_member": 1},
        {"name": "rollout", "count": 1, "gpus_per_member": 1}]}, format="json")

    assert deps.status_code == 400 and "is not a whole number" in str(deps.json()["errors"]), deps.json()
    assert roles.status_code == 400 and "is not a whole number" in str(roles.json()["errors"]), roles.json()
    assert list(Job.objects.values_list("pk", flat=True)) == [before.pk]


@pytest.mark.parametrize(("path", "field", "read"), [
    ("quotas/{quota}/", "nominal_gpus", lambda fleet: Quota.objects.get(team=fleet.ml).nominal_gpus),
    ("priority-classes/{research}/", "grace_period_s", lambda fleet: PriorityClass.objects.get(
        pk=fleet.research.pk).grace_period_s),
    ("gpu-types/{h100}/", "memory_gb", lambda fleet: GpuType.objects.get(pk=fleet.h100.pk).memory_gb),
    ("nodes/{node}/", "cpus", lambda fleet: Node.objects.get(pk=fleet.nodes[1].pk).cpus),
], ids=["quota", "priority-class", "gpu-type", "node"])
@pytest.mark.parametrize("given", ["٣", "3_0", "8.0", 8.0], ids=repr)
def test_an_admin_write_refuses_integers_not_written_as_whole_numbers(admin: APIClient, fleet: Fleet, path: str,
                                                                      field: str, read: Any, given: Any) -> None:
    before = read(fleet)
    url = "/api/v1/" + path.format(quota=Quota.objects.get(team=fleet.ml).pk, research=fleet.research.pk,
                                   h100=fleet.h100.pk, node=fleet.nodes[1].pk)

    r = admin.patch(url, {field: given}, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert "is not a whole number" in r.json()["errors"][field][0], r.json()
    assert read(fleet) == before


def test_a_maintenance_window_refuses_a_duration_not_written_as_a_whole_number(admin: APIClient,
                                                                               fleet: Fleet) -> None:
    start = (timezone.now() + timedelta(hours=1)).isoformat()
    r = admin.post("/api/v1/maintenance-windows/", {"nodes": ["h100-1"], "start_at": start, "duration_s": "٣٦٠٠",
                                                    "reason": "firmware"}, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert "is not a whole number" in r.json()["errors"]["duration_s"][0], r.json()
    assert not MaintenanceWindow.objects.exists()


@pytest.mark.parametrize("query", ["jobs/?id=1.0", "jobs/?id=٣", "jobs/?exit_code=٣", "gpu-types/?min_memory_gb=٣",
                                   "metrics/etas/?days=٣"])
def test_a_filter_refuses_numbers_not_written_as_whole_numbers(alice: APIClient, fleet: Fleet, query: str) -> None:
    f.make_job(fleet.ml, fleet.research, name="first")

    r = alice.get(f"/api/v1/{query}")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    [said] = next(iter(r.json()["errors"].values()))
    assert "is not a whole number" in said, said


@pytest.mark.parametrize(("query", "field"), [("jobs/priority/?job=²", "job"), ("showback/?window=²d", "window")])
def test_a_superscript_digit_in_a_query_is_a_400_naming_it_not_a_500(admin: APIClient, fleet: Fleet, query: str,
                                                                      field: str) -> None:
    r = admin.get(f"/api/v1/{query}")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert field in r.json()["errors"], r.json()


def test_showback_reads_a_window_of_other_scripts_digits_as_no_window(admin: APIClient, fleet: Fleet) -> None:
    r = admin.get("/api/v1/showback/?window=٣d")

    assert r.status_code == 400 and "is not a window" in r.json()["errors"]["window"][0], r.json()


def _serializer_classes() -> set[type[serializers.BaseSerializer]]:
    get_resolver().url_patterns  # every view (and so every serializer) of the API imported

    def below(cls: type) -> set[type]:
        return {c for sub in cls.__subclasses__() for c in {sub, *below(sub)}}
    return {c for c in below(serializers.Serializer) if c.__module__.startswith("controlplane.")}


def serializer_fields() -> Iterator[tuple[str, Field, Field]]:
    """(where, field, one) for every field of every API serializer: `one` is the field, then a
    list field's child, the ones the number rules read."""
    for cls in _serializer_classes():
        try:
            fields = cls().fields
        except (AssertionError, TypeError):  # a base without Meta, a list without its child
            continue
        for name, field in fields.items():
            for one in (field, getattr(field, "child", None)):
                if one is not None:
                    yield f"{cls.__module__}.{cls.__name__}.{name}", field, one


def test_every_integer_field_of_the_api_reads_whole_numbers_by_the_one_rule() -> None:
    from controlplane.api.serializers.fields import WholeNumberField

    plain = [where for where, _, one in serializer_fields()
             if isinstance(one, serializers.IntegerField) and not isinstance(one, WholeNumberField)]
    assert len(_serializer_classes()) > 50
    assert not plain, plain


# A number with a fraction (a GPU type's relative_throughput, a price) by the same rule: ASCII
# digits, one '.', a leading '-'. float() and Decimal() read '٣', '1_0' and ' 2 ' too.
@pytest.mark.parametrize("given", ["٣", "1_0", " 2 ", "２.5"], ids=repr)
def test_a_number_with_a_fraction_refuses_what_is_not_written_in_the_digits_0_to_9(admin: APIClient, fleet: Fleet,
                                                                                    given: str) -> None:
    price = PriceRate.objects.get()
    throughput = admin.patch(f"/api/v1/gpu-types/{fleet.h100.pk}/", {"relative_throughput": given}, format="json")
    usd = admin.patch(f"/api/v1/price-rates/{price.pk}/", {"usd_per_gpu_hour": given}, format="json")

    assert throughput.status_code == 400, throughput.content[:300]
    assert "is not a number" in throughput.json()["errors"]["relative_throughput"][0], throughput.json()
    assert usd.status_code == 400, usd.content[:300]
    assert "is not a number" in usd.json()["errors"]["usd_per_gpu_hour"][0], usd.json()
    assert GpuType.objects.get(pk=fleet.h100.pk).relative_throughput == 1.0
    assert PriceRate.objects.get().usd_per_gpu_hour == Decimal("2.5")


@pytest.mark.parametrize("given", ["-0", "-0.00", -0.0], ids=repr)
def test_a_price_of_negative_zero_is_stored_and_shown_as_zero(admin: APIClient, fleet: Fleet, given: Any) -> None:
    price = PriceRate.objects.get()

    r = admin.patch(f"/api/v1/price-rates/{price.pk}/", {"usd_per_gpu_hour": given}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["usd_per_gpu_hour"] == "0.0000"  # it was "-0.0000"
    assert str(PriceRate.objects.get().usd_per_gpu_hour) == "0.0000"


def test_a_number_with_a_fraction_still_takes_a_json_number_or_its_digits(admin: APIClient, fleet: Fleet) -> None:
    price = PriceRate.objects.get()
    for given, stored in (("3.25", "3.2500"), (1.5, "1.5000"), (2, "2.0000")):
        r = admin.patch(f"/api/v1/price-rates/{price.pk}/", {"usd_per_gpu_hour": given}, format="json")
        assert r.status_code == 200 and r.json()["usd_per_gpu_hour"] == stored, r.json()
    r = admin.patch(f"/api/v1/gpu-types/{fleet.h100.pk}/", {"relative_throughput": "0.75"}, format="json")
    assert r.status_code == 200 and r.json()["relative_throughput"] == 0.75, r.json()


def test_a_number_whose_exponent_no_decimal_holds_is_a_400_on_its_field(admin: APIClient, fleet: Fleet) -> None:
    price = PriceRate.objects.get()
    for field, path in (("usd_per_gpu_hour", f"price-rates/{price.pk}/"), ("relative_throughput",
                                                                            f"gpu-types/{fleet.h100.pk}/")):
        r = admin.patch(f"/api/v1/{path}", {field: "1e99999999999999999999"}, format="json")
        assert r.status_code == 400 and field in r.json()["errors"], (r.status_code, r.content[:300])


# A yes-or-no field takes true or false as the list filters take them (filtersets.StrictBooleanField):
# a JSON boolean, or true/false/1/0 (any case). DRF's BooleanField also read "yes", "on", "y", "t"
# (and "no", "off", "n", "f") and the number 1.0, which the filters refuse.
@pytest.mark.parametrize("given", ["yes", "on", "y", "t", "no", "off", 1.0], ids=repr)
def test_a_yes_or_no_field_refuses_words_other_than_true_or_false(admin: APIClient, alice: APIClient, fleet: Fleet,
                                                                   given: Any) -> None:
    pc = admin.patch(f"/api/v1/priority-classes/{fleet.research.pk}/", {"preemptible": given}, format="json")
    job = alice.post("/api/v1/jobs/", {**SUBMIT, "hold": given}, format="json")

    assert pc.status_code == 400, (pc.status_code, pc.content[:300])
    assert "is not true or false" in pc.json()["errors"]["preemptible"][0], pc.json()
    assert PriorityClass.objects.get(pk=fleet.research.pk).preemptible is True
    assert job.status_code == 400 and "is not true or false" in job.json()["errors"]["hold"][0], job.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize(("given", "read"), [(False, False), ("false", False), ("TRUE", True), ("0", False), (1, True)])
def test_a_yes_or_no_field_takes_true_false_1_and_0(admin: APIClient, fleet: Fleet, given: Any, read: bool) -> None:
    r = admin.patch(f"/api/v1/priority-classes/{fleet.research.pk}/", {"preemptible": given}, format="json")

    assert r.status_code == 200 and r.json()["preemptible"] is read, r.json()


# A record's id in its path by the same rule: Django's lookup read `jobs/٣/`, `jobs/+3/`,
# `jobs/%203/` and `jobs/0_3/` with int(), so a GET showed, a PATCH changed, a DELETE deleted
# and a cancel cancelled a record whose id nobody wrote.
def _not_written_as(pk: int) -> list[str]:
    arabic = str(pk).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    return [arabic, f"+{pk}", f"%20{pk}", f"0_{pk}"]


def test_a_record_whose_id_in_the_path_is_not_written_in_the_digits_0_to_9_is_not_found(
        admin: APIClient, alice: APIClient, fleet: Fleet) -> None:
    job = f.make_job(fleet.ml, fleet.research, name="mine")
    node, team = fleet.nodes[1], fleet.vision
    for key in _not_written_as(job.pk):
        shown = alice.get(f"/api/v1/jobs/{key}/")
        cancelled = alice.post(f"/api/v1/jobs/{key}/cancel/")
        assert (shown.status_code, cancelled.status_code) == (404, 404), (key, shown.content[:200],
                                                                          cancelled.content[:200])
    for key in _not_written_as(team.pk):
        r = admin.patch(f"/api/v1/teams/{key}/", {"description": "renamed"}, format="json")
        assert r.status_code == 404, (key, r.content[:200])
    for key in _not_written_as(node.pk):
        assert admin.delete(f"/api/v1/nodes/{key}/").status_code == 404, key

    job.refresh_from_db()
    assert job.state == "pending" and Node.objects.filter(pk=node.pk).exists()
    assert not Team.objects.get(pk=team.pk).description
    assert alice.get(f"/api/v1/jobs/{job.pk}/").status_code == 200
    assert alice.get(f"/api/v1/jobs/0{job.pk}/").status_code == 200  # its ASCII digits, a zero before them
