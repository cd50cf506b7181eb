"""Whether the database's schema is the one this code expects.

An upgrade runs `manage.py migrate` before the new code (docs/operations.md, Upgrading a running
system). New code on an older schema fails wherever it touches what the migrations add (every
cycle, on the drill of 2 Dec: `column controlplane_job.growth_code does not exist`); the
processes say so once at start instead, naming what to apply.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor


def unapplied_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations on disk the database has not applied, in the order `migrate` would apply
    them (`app.name`); empty when the schema is current. Reads the migration files (a few
    hundred ms: once per process start) and the django_migrations table."""
    executor = MigrationExecutor(connections[alias])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]
