"""A process started on code newer than the database's schema says so at start, naming the
migrations to apply and the command (docs/operations.md, Upgrading a running system).

On the deployment drill of 2 Dec, loop workers started on new code before `migrate` failed
every cycle with `ProgrammingError: column controlplane_job.growth_code does not exist`, one
traceback per tick, and nothing said that the fix was to migrate. The check reads the
migrations on disk against PostgreSQL's django_migrations table; here a migration is made to
look unapplied by deleting its row inside the test's transaction (rolled back after).
"""

from __future__ import annotations

import logging

import pytest
from django.db.migrations.recorder import MigrationRecorder

from controlplane import tasks
from controlplane.services import schema

pytestmark = pytest.mark.django_db


def _forget(app: str, name: str) -> None:
    assert MigrationRecorder.Migration.objects.filter(app=app, name=name).delete()[0] == 1


def _newest(count: int) -> list[str]:
    """The names of controlplane's `count` newest migrations, oldest first: code ahead of its
    schema lacks the newest ones (forgetting one in the middle leaves the leaf applied, and
    `migrate`'s plan, like this check, starts from the leaf). Read off the files, so a new
    migration does not break the test (it did, when 0031 came after the 0030 it named)."""
    from django.db.migrations.loader import MigrationLoader

    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    [leaf] = [node for node in graph.leaf_nodes() if node[0] == "controlplane"]
    return [name for app, name in graph.forwards_plan(leaf) if app == "controlplane"][-count:]


def test_a_migrated_database_has_nothing_pending() -> None:
    assert schema.unapplied_migrations() == []


def test_the_migrations_not_applied_are_named_in_order() -> None:
    older, newer = _newest(2)
    _forget("controlplane", newer)
    _forget("controlplane", older)
    assert schema.unapplied_migrations() == [f"controlplane.{older}", f"controlplane.{newer}"]


def test_a_worker_starting_on_a_schema_behind_its_code_logs_what_to_apply(caplog: pytest.LogCaptureFixture) -> None:
    [newest] = _newest(1)
    _forget("controlplane", newest)
    with caplog.at_level(logging.INFO):
        tasks._say_if_the_schema_is_behind()
    said = [r for r in caplog.records if "schema is behind" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.ERROR, [r.getMessage() for r in caplog.records]
    message = said[0].getMessage()
    assert f"controlplane.{newest}" in message and "manage.py migrate" in message


def test_a_worker_on_a_migrated_schema_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        tasks._say_if_the_schema_is_behind()
    assert not [r for r in caplog.records if "schema" in r.getMessage()]
