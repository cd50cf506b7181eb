"""Migration 0049 gives the admin's "Scheduler policy" page its own permission, "Can view the
scheduler policy": whoever could view the scheduler lease before it (a group's members, or a user
given it) may still read the policy after it, and nobody else is given it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.controlplane import factories as f

BEFORE = [("controlplane", "0048_job_borrowing_event")]
AFTER = [("controlplane", "0049_scheduler_policy_permission")]


@pytest.mark.django_db(transaction=True)
def test_the_lease_viewers_before_it_keep_the_policy_and_nobody_else_gains_it() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        # A database made before 0049 has no such permission (post_migrate made it for the tests).
        Permission.objects.filter(codename="view_scheduler_policy").delete()
        lease = Permission.objects.get(content_type__app_label="controlplane", codename="view_schedulerlease")
        operators = Group.objects.create(name="operators")
        operators.permissions.add(lease)
        watcher: Any = f.make_user("watcher")
        watcher.user_permissions.add(lease)
        clerk: Any = f.make_user("clerk")
        clerks = Group.objects.create(name="clerks")
        clerks.permissions.add(Permission.objects.get(codename="view_quota"))

        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)

        policy = Permission.objects.get(content_type__app_label="controlplane", codename="view_scheduler_policy")
        assert policy.name == "Can view the scheduler policy"
        assert set(policy.group_set.values_list("name", flat=True)) == {"operators"}
        assert set(policy.user_set.values_list("username", flat=True)) == {"watcher"}
        assert not clerk.user_permissions.filter(pk=policy.pk).exists()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_a_database_where_nobody_views_the_lease_migrates_as_is() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        Permission.objects.filter(codename="view_scheduler_policy").delete()
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        policy = Permission.objects.get(content_type__app_label="controlplane", codename="view_scheduler_policy")
        assert not policy.group_set.exists() and not policy.user_set.exists()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
