"""Migration 0050: a priority class stored with a grace period beyond an hour is lowered to the
hour, with its config.changed event saying what it had (actor `migration:0050`), and the classes
within it are left as they are; GPU types whose names differ only in case stop the migration
before it changes anything, naming them (they cannot be merged for the operator)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("controlplane", "0049_scheduler_policy_permission")]
AFTER = [("controlplane", "0050_grace_period_bound_and_gpu_type_name_any_case")]


@pytest.mark.django_db(transaction=True)
def test_a_grace_period_beyond_an_hour_is_lowered_to_it_and_recorded() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        PriorityClass = old.get_model("controlplane", "PriorityClass")
        PriorityClass.objects.create(name="forever", value=5, grace_period_s=99999999)
        PriorityClass.objects.create(name="hour", value=6, grace_period_s=3600)
        PriorityClass.objects.create(name="quick", value=7, grace_period_s=30)

        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)

        new = executor.loader.project_state(AFTER).apps
        graces = dict(new.get_model("controlplane", "PriorityClass").objects.values_list("name", "grace_period_s"))
        assert graces == {"forever": 3600, "hour": 3600, "quick": 30}
        [event] = new.get_model("controlplane", "Event").objects.filter(actor="migration:0050")
        assert (event.kind, event.reason) == ("config.changed", "PriorityClassChanged")
        assert event.message.startswith("Priority class forever changed: grace period 99999999 s → 1 h"), event.message
        assert event.data["before"]["grace_period_s"] == 99999999 and event.data["after"]["grace_period_s"] == 3600
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_gpu_types_apart_only_by_case_stop_it_naming_them() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        GpuType = old.get_model("controlplane", "GpuType")
        first = GpuType.objects.create(name="H100-80GB", memory_gb=80)
        second = GpuType.objects.create(name="h100-80gb", memory_gb=80)
        PriorityClass = old.get_model("controlplane", "PriorityClass")
        PriorityClass.objects.create(name="forever", value=5, grace_period_s=99999999)

        executor = MigrationExecutor(connection)
        with pytest.raises(RuntimeError) as refused:
            executor.migrate(AFTER)

        assert f"H100-80GB (id {first.pk}) and h100-80gb (id {second.pk})" in str(refused.value)
        assert "Nothing was changed" in str(refused.value)
        assert PriorityClass.objects.get(name="forever").grace_period_s == 99999999
        GpuType.objects.filter(pk=second.pk).delete()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
