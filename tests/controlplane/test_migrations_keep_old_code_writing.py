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
from django.db.migrations.operations import AddField
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
