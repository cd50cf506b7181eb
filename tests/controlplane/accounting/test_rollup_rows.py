"""services/rollup_rows.py stores exactly what `bulk_create` stored from the same values: the
accounting's COPY path on PostgreSQL and the bulk_create path other databases take (forced
here by naming the connection's vendor otherwise) write the same rows, fill omitted columns
with their defaults, round a float bound for a decimal column as Django rounds it, and an
upsert overwrites only the columns it names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection

from controlplane.models import FleetRollup, QuotaRollup
from controlplane.services.rollup_rows import insert_rows, upsert_rows
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CELL = ("bucket", "start", "gpu_type_id", "capacity_tier")


@pytest.fixture(params=["copy", "bulk_create"])
def path(request: Any, monkeypatch: Any) -> str:
    if request.param == "bulk_create":
        monkeypatch.setattr(connection, "vendor", "sqlite")
    return str(request.param)


def quota_row(team_id: int, gpu_type_id: int, minute: int, lent: Decimal, idle: Any) -> tuple[Any, ...]:
    """60 GPU-seconds of guarantee: 20.5 used, the rest lent or idle."""
    return (60, T0 + timedelta(minutes=minute), team_id, gpu_type_id, Decimal("60"), Decimal("20.5"),
            Decimal(0), lent, idle, Decimal("0.000000000000001"))


def stored_quota() -> list[tuple[Any, ...]]:
    return list(QuotaRollup.objects.order_by("start").values_list(
        "bucket", "start", "nominal_gpu_seconds", "used_gpu_seconds", "borrowed_gpu_seconds", "lent_gpu_seconds",
        "idle_gpu_seconds", "idle_cost_usd"))


def test_insert_stores_what_bulk_create_stores(path: str) -> None:
    team, gpu = f.make_team(), f.make_gpu_type()
    # 5e-07 as a float is just below half a micro-GPU-second: Django rounds it to 20 digits
    # (4.99…e-7) and the column to 0.000000; the float's text "5e-07" would round to 0.000001.
    rows = [quota_row(team.pk, gpu.pk, 0, Decimal(0), Decimal("39.5")),
            quota_row(team.pk, gpu.pk, 1, Decimal("39.5"), 5e-07)]
    columns = ("bucket", "start", "team_id", "gpu_type_id", "nominal_gpu_seconds", "used_gpu_seconds",
               "borrowed_gpu_seconds", "lent_gpu_seconds", "idle_gpu_seconds", "idle_cost_usd")
    assert insert_rows(QuotaRollup, columns, rows) == 2
    written = stored_quota()
    QuotaRollup.objects.all().delete()
    QuotaRollup.objects.bulk_create([QuotaRollup(**dict(zip(columns, row, strict=True))) for row in rows])
    assert written == stored_quota()
    assert written[1][6] == Decimal("0.000000")


def test_omitted_columns_take_their_defaults(path: str) -> None:
    gpu = f.make_gpu_type()
    insert_rows(FleetRollup, (*CELL, "capacity_gpu_seconds"), [(60, T0, gpu.pk, "spot", Decimal("480"))])
    row = FleetRollup.objects.get()
    assert (row.capacity_gpu_seconds, row.capacity_cost_usd, row.allocated_gpu_seconds, row.steps) == (
        Decimal("480"), Decimal(0), Decimal(0), 0.0)


def test_upsert_overwrites_only_the_columns_it_names(path: str) -> None:
    gpu = f.make_gpu_type()
    FleetRollup.objects.create(bucket=60, start=T0, gpu_type=gpu, capacity_tier="spot",
                               capacity_gpu_seconds=Decimal("480"), capacity_cost_usd=Decimal("0.25"),
                               allocated_gpu_seconds=Decimal("100"), active_gpu_seconds=Decimal("50"), steps=7.0)
    usage = ("allocated_gpu_seconds", "active_gpu_seconds", "steps")
    rows = [(60, T0, gpu.pk, "spot", Decimal("200"), Decimal("150"), 9.5),
            (60, T0 + timedelta(minutes=1), gpu.pk, "spot", Decimal("30"), Decimal("0"), 0.0)]
    assert upsert_rows(FleetRollup, (*CELL, *usage), rows, CELL, usage) == 2
    stored = list(FleetRollup.objects.order_by("start").values_list(
        "start", "capacity_gpu_seconds", "capacity_cost_usd", *usage))
    assert stored == [
        (T0, Decimal("480"), Decimal("0.25"), Decimal("200"), Decimal("150"), 9.5),
        (T0 + timedelta(minutes=1), Decimal(0), Decimal(0), Decimal("30"), Decimal(0), 0.0),
    ]
    # twice in one transaction: the staged table of the first call is gone before the second
    upsert_rows(FleetRollup, (*CELL, *usage), rows[:1], CELL, usage)
    assert FleetRollup.objects.count() == 2


def test_a_column_the_model_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="no column team_id"):
        insert_rows(FleetRollup, (*CELL, "team_id"), [(60, T0, 1, "spot", 1)])
