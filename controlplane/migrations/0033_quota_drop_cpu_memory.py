"""Quota counts GPUs per team × type. Its CPU and memory fields were stored, shown and audited
but the scheduler never enforced them: an admin who set one got no quota. The model drops them
rather than let them mislead.

State only: the two nullable columns stay in the database, because every process still on the
previous release selects them when it reads a quota (each cycle does) and would fail with
"column does not exist" between `migrate` and its restart. New code never names them, and a
NULL is what old code wrote there by default. A later release, once no process of this one
runs, may drop them (docs/operations.md, *Upgrading a running system*); past quota.changed
events keep the values they recorded."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("controlplane", "0032_job_stopping_event_kind")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="quota", name="nominal_cpus"),
                migrations.RemoveField(model_name="quota", name="nominal_memory_gb"),
            ],
            database_operations=[],
        ),
    ]
