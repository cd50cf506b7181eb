"""The admin UI's forms refuse bad values with a message on the field at fault, in the API's
words, and change nothing.

Found by using the product (headless Chromium on /admin/): a priority class whose default
runtime limit was above its maximum, a GPU type with a relative throughput of 0 or below, a
negative price and a node with 0 GPUs were refused with "Constraint “priority_class_default_
limit_within_max” is violated." (the database constraint's name) above the form, on no field.
"""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import GpuType, Node, PriceRate, PriorityClass
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _change(browser: Any, path: str, **changes: Any) -> Any:
    return browser.post(path, f.opened_admin_form(browser, path) | changes)


def _field_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted"
    form = response.context["adminform"].form
    assert "Constraint" not in response.content.decode(), "a database constraint's name reached the page"
    return {name: list(errors) for name, errors in form.errors.items()}


def test_a_default_runtime_limit_above_the_maximum_is_refused_on_its_field(fleet, browser) -> None:
    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"
    r = _change(browser, path, default_runtime_limit_s=999999, max_runtime_limit_s=86400)

    assert _field_errors(r) == {"default_runtime_limit_s": ["999999 s is beyond Max runtime limit (s) (86400 s)"]}
    research = PriorityClass.objects.get(pk=fleet.research.pk)
    assert (research.default_runtime_limit_s, research.max_runtime_limit_s) == (4 * 3600, 7 * 86400)


@pytest.mark.parametrize("throughput", ["0", "-1", "2000000"])
def test_a_gpu_type_throughput_out_of_bounds_is_refused_on_its_field(fleet, browser, throughput) -> None:
    r = _change(browser, f"/admin/controlplane/gputype/{fleet.h100.pk}/change/", relative_throughput=throughput)

    errors = _field_errors(r)
    assert list(errors) == ["relative_throughput"]
    assert errors["relative_throughput"][0].endswith(
        "is outside 0.001–1e+06: the GPU's speed relative to the others, e.g. 1.0 for the reference type")
    assert GpuType.objects.get(pk=fleet.h100.pk).relative_throughput == 1.0


def test_a_negative_price_is_refused_on_its_field(fleet, browser) -> None:
    r = browser.post("/admin/controlplane/pricerate/add/", {
        "gpu_type": fleet.a100.pk, "capacity_tier": "on_demand", "usd_per_gpu_hour": "-1",
        "effective_from_0": "2026-01-01", "effective_from_1": "00:00:00",
    })

    assert _field_errors(r) == {"usd_per_gpu_hour": ["-1 is negative: a price is 0 or more"]}
    assert not PriceRate.objects.filter(gpu_type=fleet.a100).exists()


@pytest.mark.parametrize("gpu_count", [0, 1025])
def test_a_node_gpu_count_out_of_bounds_is_refused_on_its_field(fleet, browser, gpu_count) -> None:
    node = fleet.nodes[1]
    r = _change(browser, f"/admin/controlplane/node/{node.pk}/change/", gpu_count=gpu_count)

    assert _field_errors(r) == {"gpu_count": [f"{gpu_count} is outside 1–1024: a node has at least one GPU"]}
    assert Node.objects.get(pk=node.pk).gpu_count == 8


def test_good_values_are_still_saved(fleet, browser) -> None:
    r = _change(browser, f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/",
                default_runtime_limit_s=3600, max_runtime_limit_s=7200)
    assert r.status_code == 302
    assert PriorityClass.objects.get(pk=fleet.research.pk).max_runtime_limit_s == 7200
    r = _change(browser, f"/admin/controlplane/gputype/{fleet.h100.pk}/change/", relative_throughput="2.5")
    assert r.status_code == 302 and GpuType.objects.get(pk=fleet.h100.pk).relative_throughput == 2.5


def test_a_price_starting_beyond_the_horizon_is_refused_on_its_field(fleet, browser) -> None:
    """The API's rule (PriceRate.clean, tests/controlplane/api/test_adminapi_price_rate_horizon.py):
    until 6 Dec the add page took a start of 9999-12-31."""
    r = browser.post("/admin/controlplane/pricerate/add/", {
        "gpu_type": fleet.a100.pk, "capacity_tier": "on_demand", "usd_per_gpu_hour": "0.9",
        "effective_from_0": "9999-12-31", "effective_from_1": "00:00:00",
    })

    errors = _field_errors(r)
    assert list(errors) == ["effective_from"], errors
    assert errors["effective_from"][0].startswith("9999-12-31 00:00 UTC is more than 5 years ahead"), errors
    assert not PriceRate.objects.filter(gpu_type=fleet.a100).exists()
