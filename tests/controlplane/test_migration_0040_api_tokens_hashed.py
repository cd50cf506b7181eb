"""Migration 0040 moves the user API tokens out of DRF's authtoken table, which held every key in
clear, into ApiToken, which holds their SHA-256: every token issued before keeps working with
the same key, and the clear table, with what Django recorded of the authtoken app, is gone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from rest_framework.test import APIClient

from controlplane.models import ApiToken
from tests.controlplane import factories as f

BEFORE = [("controlplane", "0039_team_priority_classes")]
AFTER = [("controlplane", "0040_api_tokens_hashed")]
ALICE_KEY = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"  # as DRF made them: 40 hex digits
BOB_KEY = "0123456789abcdef0123456789abcdef01234567"
ISSUED = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)


def _me(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/v1/auth/me/").status_code


@pytest.mark.django_db(transaction=True)
def test_tokens_issued_before_keep_working_and_only_their_digests_stay() -> None:
    alice, bob = f.make_user("alice"), f.make_user("bob")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        with connection.cursor() as cursor:  # DRF authtoken's table as its migrations left it
            cursor.execute('CREATE TABLE "authtoken_token" ("key" varchar(40) NOT NULL PRIMARY KEY, '
                           '"created" timestamp with time zone NOT NULL, '
                           '"user_id" integer NOT NULL UNIQUE REFERENCES "auth_user" ("id"))')
            cursor.execute('INSERT INTO "authtoken_token" VALUES (%s, %s, %s), (%s, %s, %s)',
                           [ALICE_KEY, ISSUED, alice.pk, BOB_KEY, ISSUED, bob.pk])
        MigrationRecorder(connection).record_applied("authtoken", "0001_initial")
        ContentType.objects.create(app_label="authtoken", model="token")

        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)

        assert "authtoken_token" not in connection.introspection.table_names()
        assert not MigrationRecorder(connection).migration_qs.filter(app="authtoken").exists()
        assert not ContentType.objects.filter(app_label="authtoken").exists()
        stored = {t.user_id: t for t in ApiToken.objects.all()}
        assert set(stored) == {alice.pk, bob.pk} and stored[alice.pk].created == ISSUED
        assert ALICE_KEY not in {t.digest for t in stored.values()}
        assert _me(ALICE_KEY) == 200 and _me(BOB_KEY) == 200  # no one lost access
        assert _me(stored[alice.pk].digest) == 401  # what the database holds opens nothing
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_a_database_that_never_had_the_clear_table_migrates_as_is() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        assert not ApiToken.objects.exists()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
