"""Migration 0022 adds `Job.hold_reason`: a job held before it keeps its hold and reads as
held with no reason ("Held by alice: until it is released …", as before), and the migration
reverses cleanly."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from controlplane.models import Job
from controlplane.services.cycle import run_cycle

BEFORE = [("controlplane", "0021_notification_hooks")]
AFTER = [("controlplane", "0022_job_hold_reason")]


@pytest.mark.django_db(transaction=True)
def test_migration_0022_gives_jobs_held_before_it_no_reason_and_reverses() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    now = timezone.now()
    alice = apps.get_model("auth", "User").objects.create(username="alice")
    pc = apps.get_model("controlplane", "PriorityClass").objects.create(name="research", value=500)
    team = apps.get_model("controlplane", "Team").objects.create(name="ml", default_priority_class=pc)
    old = apps.get_model("controlplane", "Job").objects.create(
        team=team, priority_class=pc, name="old-hold", gpus=1, runtime_limit_s=3600, state="pending",
        submitted_at=now, state_changed_at=now, hold="user", held_at=now, held_by=alice)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        # read with 0022's own model: today's has columns later migrations add
        after = executor.loader.project_state(AFTER).apps.get_model("controlplane", "Job").objects.get(pk=old.pk)
        assert (after.hold, after.held_by.username, after.hold_reason) == ("user", "alice", "")

        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        run_cycle("test")  # the snapshot reads the new column; the engine words the hold as before
        job = Job.objects.get(pk=old.pk)
        assert job.pending_code == "Held"
        assert job.pending_message == "Held by alice: until it is released it is not in the queue and holds nothing."

        Job.objects.filter(pk=job.pk).update(hold_reason="waiting for dataset v3")
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)  # the column goes; the hold stays
        columns = [c.name for c in connection.introspection.get_table_description(connection.cursor(), "controlplane_job")]
        assert "hold_reason" not in columns
        assert apps.get_model("controlplane", "Job").objects.get(pk=old.pk).hold == "user"
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
