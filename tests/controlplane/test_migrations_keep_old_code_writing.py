"""A migration leaves the code still running able to write: a column it adds is nullable or
carries a database default (`db_default`), so a process on the previous release keeps inserting
rows between `migrate` and its restart (docs/operations.md, *Upgrading a running system*).

Found on the deployment drill of 2 Dec: once migration 0030 (as first written) had run, the web
processes still on the old code refused every submit with 409 "The database refused the change:
null value in column "growth_code" of relation "controlplane_job" violates not-null constraint"
until they were restarted. Django adds a column declared with `default=` with that default and
then drops it from the database, so code that does not know the column inserts NULL. The
migrations up to 0029 did so (their columns stay as they are; their windows are over once a
deployment has restarted); from 0030 on (0030 was mended before its release), a NOT NULL column
comes with `db_default`.
"""

from __future__ import annotations

from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import AddField, RemoveField, RenameField
from django.db.models import NOT_PROVIDED

# The last migration written before the rule; every later one follows it.
LAST_BEFORE_THE_RULE = "0029"


def _added_columns_old_code_cannot_insert(after: str = LAST_BEFORE_THE_RULE) -> list[str]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    found = []
    for (app, name), migration in sorted(loader.disk_migrations.items()):
        if app != "controlplane" or name[:4] <= after:
            continue
        for operation in migration.operations:
            if not isinstance(operation, AddField):
                continue
            field = operation.field
            if field.many_to_many or field.null or field.db_default is not NOT_PROVIDED:
                continue
            found.append(f"{name}: {operation.model_name}.{operation.name}")
    return found


def test_every_column_added_after_0029_is_nullable_or_has_a_database_default() -> None:
    offenders = _added_columns_old_code_cannot_insert()
    assert not offenders, (
        "These columns are added NOT NULL without a database default, so every process still on the "
        "previous release fails to insert rows between `migrate` and its restart (null value … violates "
        f"not-null constraint): {offenders}. Declare the field with db_default= its default (e.g. "
        "models.CharField(default='', db_default='', …)) or null=True, and make the migration again.")


def test_the_rule_sees_a_column_added_the_old_way() -> None:
    """The check reads the migrations Django runs: started before 0025, it names the column 0025
    added the old way (and not 0030's, which have database defaults)."""
    assert _added_columns_old_code_cannot_insert(after="0024") == ["0025_job_dependency_mode: job.dependency_mode"]


# The last migration written before the rule on dropped columns; every later one follows it.
LAST_BEFORE_THE_DROP_RULE = "0032"


def _columns_old_code_still_reads(after: str = LAST_BEFORE_THE_DROP_RULE) -> list[str]:
    """Fields a migration removes or renames in the database itself (state-only removals inside
    SeparateDatabaseAndState leave the column, so they are not counted)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return [f"{name}: {operation.model_name}.{operation.name if isinstance(operation, RemoveField) else operation.old_name}"
            for (app, name), migration in sorted(loader.disk_migrations.items())
            if app == "controlplane" and name[:4] > after
            for operation in migration.operations if isinstance(operation, RemoveField | RenameField)]


def test_no_migration_drops_or_renames_a_column_the_previous_release_still_selects() -> None:
    """Old code selects every column its model names: one dropped by `migrate` fails each of its
    reads ("column ... does not exist") until it restarts. So a release stops using a field
    (a state-only removal, as 0033 does for the quota's CPU and memory fields) and a later one
    drops the column."""
    offenders = _columns_old_code_still_reads()
    assert not offenders, (
        "These migrations drop or rename a column in the database that the previous release still "
        f"selects: {offenders}. Remove the field in the migration state only "
        "(migrations.SeparateDatabaseAndState(state_operations=[...], database_operations=[])) and drop "
        "the column in a later release.")


def test_the_drop_rule_sees_a_column_dropped_in_the_database() -> None:
    """Started before 0008, the check names the fields 0008 renamed and removed in the database
    (the last migration to do so); the state-only removals of 0033 are not counted."""
    assert _columns_old_code_still_reads(after="0007") == [
        "0008_pending_place: job.pending_message", "0008_pending_place: job.pending_would_start_if",
        "0008_pending_place: job.queue_position", "0008_pending_place: job.eta"]
