"""After a test that commits, tests/fast_flush.py empties the database with DELETE and keeps the
content types and permissions, which ``post_migrate`` would only make again as they were."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext


def _flush_as_after_a_transactional_test() -> list[str]:
    """Django's TransactionTestCase teardown's flush; the statements it sent."""
    with CaptureQueriesContext(connection) as sent:
        call_command("flush", verbosity=0, interactive=False, reset_sequences=False, allow_cascade=False,
                     inhibit_post_migrate=False)
    return [query["sql"] for query in sent.captured_queries]


@pytest.mark.django_db(transaction=True)
def test_a_flush_empties_the_tests_rows_and_keeps_the_content_types_and_permissions_as_they_were() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("tests/fast_flush.py changes PostgreSQL's flush only")
    content_types = sorted(ContentType.objects.values_list("pk", "app_label", "model"))
    permissions = sorted(Permission.objects.values_list("pk", "content_type_id", "codename"))
    user = User.objects.create(username="alice")
    user.user_permissions.add(Permission.objects.get(codename="change_user"))

    sent = _flush_as_after_a_transactional_test()

    assert not User.objects.exists() and not User.user_permissions.through.objects.exists()
    assert not any(sql.startswith(("TRUNCATE", "INSERT")) for sql in sent), sent  # nothing made again
    assert sorted(ContentType.objects.values_list("pk", "app_label", "model")) == content_types
    assert sorted(Permission.objects.values_list("pk", "content_type_id", "codename")) == permissions
    assert len(content_types) == len(apps.get_models())  # one per model: the set post_migrate makes


@pytest.mark.django_db(transaction=True)
def test_a_flush_leaves_the_trigger_kept_singletons_their_row_and_empties_the_job_day_sums() -> None:
    """The tables the migrations keep by triggers are left as TRUNCATE's flush left them: the
    price generation (0036) and the closed history's state (0042) keep their one row (emptied,
    every later test that priced an ended job failed on a NOT NULL `prices`), and 0024's per-job
    sums, which the rollups' TRUNCATE emptied, hold no zero rows after their rollups' DELETE."""
    if connection.vendor != "postgresql":
        pytest.skip("tests/fast_flush.py changes PostgreSQL's flush only")
    from controlplane.services.closed_history import CLOSED
    from controlplane.services.job_costs import PRICE_GENERATION
    from controlplane.services.job_history import JOB_DAY_SUMS

    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {JOB_DAY_SUMS} (job_id, allocated_gpu_seconds) VALUES (424242, 0)")

    _flush_as_after_a_transactional_test()

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {PRICE_GENERATION}")
        assert cursor.fetchone() == (1,)
        cursor.execute(f"SELECT count(*) FROM {CLOSED}")
        assert cursor.fetchone() == (1,)
        cursor.execute(f"SELECT count(*) FROM {JOB_DAY_SUMS}")
        assert cursor.fetchone() == (0,)
