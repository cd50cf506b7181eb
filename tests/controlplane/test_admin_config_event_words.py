"""A configuration change's event reads in words a later reader understands: the setting's name,
not its column, and its values as the pages say them (spans of time, none, yes/no).

Found on the demo's trail: "Priority class research changed: value 500 → 510, grace_period_s 30
→ 600", "Team serving changed: default_priority_class production (1000) → None", "Priority
class batch changed: preemptible True → False".
"""

from __future__ import annotations

import pytest

from controlplane.choices import EventKind
from controlplane.models import Event
from controlplane.services import config_audit
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _changed(obj, **changes) -> str:  # type: ignore[no-untyped-def]
    before = config_audit.config_record(obj)
    for name, value in changes.items():
        setattr(obj, name, value)
    obj.save()
    event = config_audit.record_config_change(obj, "changed", before, "user:boss")
    assert event is not None and event.kind == EventKind.CONFIG_CHANGED
    return event.message


def test_a_priority_class_change_reads_in_words(fleet) -> None:
    said = _changed(fleet.research, value=510, grace_period_s=600, preemptible=False, min_runtime_s=300,
                    default_runtime_limit_s=2 * 3600, max_runtime_limit_s=3 * 86400)

    assert said == ("Priority class research changed: value 100 → 510, preemptible yes → no, grace period 30 s → "
                    "10 min, min runtime none → 5 min, default runtime limit 4 h → 2 h, max runtime limit 7 d → 3 d")


def test_a_team_losing_its_default_class_reads_none(fleet) -> None:
    assert _changed(fleet.vision, default_priority_class=None) == (
        "Team vision changed: default priority class production (1000) → none")


def test_a_node_change_names_the_setting(fleet) -> None:
    node = fleet.nodes[5]
    assert _changed(node, gpu_count=4) == f"Node {node.name} changed: GPUs 8 → 4"


def test_the_data_keeps_the_columns_and_values(fleet) -> None:
    _changed(fleet.research, grace_period_s=600)
    event = f.trail().get(kind=EventKind.CONFIG_CHANGED)
    assert event.data["before"]["grace_period_s"] == 30 and event.data["after"]["grace_period_s"] == 600


def test_an_empty_text_reads_empty(fleet) -> None:
    """Found on the demo: 'Team serving changed: description  → inference'."""
    assert _changed(fleet.vision, description="inference") == "Team vision changed: description empty → inference"


def test_a_price_rate_created_or_deleted_says_its_price_and_from_when(fleet, browser) -> None:
    """Found on the demo's trail (5 Dec): "Price rate H100-80GB on_demand created" and "Price rate
    A100-40GB reserved deleted": which price, from when, only in the event's data. The admin's add
    and delete pages, and the API's, write the same line."""
    from controlplane.models import PriceRate

    r = browser.post("/admin/controlplane/pricerate/add/", {
        "gpu_type": fleet.a100.pk, "capacity_tier": "spot", "usd_per_gpu_hour": "0.8500",
        "effective_from_0": "2026-12-01", "effective_from_1": "06:30:00",
    })
    assert r.status_code == 302, r.content.decode()[:500]
    rate = PriceRate.objects.get(gpu_type=fleet.a100, capacity_tier="spot")
    created = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="PriceRateCreated").get()
    assert created.message == ("Price rate A100-40GB spot created: $0.8500 per GPU-hour from "
                               "2026-12-01T06:30:00Z")
    assert browser.post(f"/admin/controlplane/pricerate/{rate.pk}/delete/", {"post": "yes"}).status_code == 302
    deleted = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="PriceRateDeleted").get()
    assert deleted.message == ("Price rate A100-40GB spot deleted: it was $0.8500 per GPU-hour from "
                               "2026-12-01T06:30:00Z")
    # a change says what moved, as before
    rate = PriceRate.objects.create(gpu_type=fleet.a100, capacity_tier="spot", usd_per_gpu_hour="0.8500",
                                    effective_from=created.created_at)
    assert _changed(rate, usd_per_gpu_hour="0.9000") == (
        "Price rate A100-40GB spot changed: $ per GPU-hour 0.8500 → 0.9000")
