"""A transactional test's database is emptied with DELETE, not TRUNCATE, on PostgreSQL.

After every test that commits (``django_db(transaction=True)``, ``live_server``: the browser,
agent and loop tests, about 1,070 of them on 8 Dec) Django's ``flush`` empties every table with one
``TRUNCATE``. PostgreSQL truncates a table by giving it new, empty files, and does that for all
of the project's tables however few rows the test wrote: 0.19-0.28 s a test on this machine,
against 0.02 s for DELETE of the same few rows (measured side by side inside one test on 6 Dec).
A test writes tens or hundreds of rows, where DELETE is the cheaper way.

What stays the same as TRUNCATE's flush: the tables are emptied in one transaction (the
project's foreign keys are Django's, DEFERRABLE INITIALLY DEFERRED, so the order does not
matter); sequences are not reset (``reset_sequences`` still goes to TRUNCATE ... RESTART
IDENTITY); ``post_migrate`` still runs afterwards. The tables outside Django's models (the
migrations' trigger-kept tables) are left to their triggers, as TRUNCATE left them, with one
exception: migration 0024's per-job sums, which its TRUNCATE trigger emptied but its DELETE trigger
only brings to zero, are emptied after the models' rows. Their singletons (migration 0036's price
generation, 0042's closed-history state) keep their one row: emptied, every later test that
priced an ended job failed on a NOT NULL ``prices``. Loaded with ``-p`` (pyproject's addopts);
SQLite and the product's own code are untouched.

What differs: the content types and permissions are kept. Emptied, ``post_migrate`` made all 36
and 144 again, one transaction per app, after every such test; kept, it finds them all and writes
nothing (a flush's median 23-37 ms against 46-137 ms, four pairs side by side at loads of 4-37 on 6 Dec). No test
leaves any of its own: the one that makes one (migration 0040's, authtoken's) has the migration it
tests delete it. Their ids stay the same from test to test, as ContentType's cache assumes.
"""

from __future__ import annotations

from typing import Any

import pytest

#: The content types and permissions, which every flush's ``post_migrate`` makes again exactly as
#: they were (one per model, four per model): kept, it finds them all and writes nothing.
_REMADE_AS_THEY_WERE = frozenset({"django_content_type", "auth_permission"})


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    # Imported here, once pytest-django has set Django up: importing a backend first is circular.
    from django.db.backends.postgresql.operations import DatabaseOperations

    # Migration 0024's per-job sums of the day rollups: TRUNCATE of the rollups emptied it; their
    # DELETE leaves a zero row per job, so it is emptied after them.
    from controlplane.services.job_history import JOB_DAY_SUMS

    truncate = DatabaseOperations.sql_flush

    def delete_every_row(self: DatabaseOperations, style: Any, tables: list[str], *,
                         reset_sequences: bool = False, allow_cascade: bool = False) -> list[str]:
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        # Last: the models' DELETEs fire the triggers that write it.
        present = set(self.connection.introspection.table_names())
        after = [JOB_DAY_SUMS] if JOB_DAY_SUMS in present else []
        return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
                for table in [*tables, *after] if table not in _REMADE_AS_THEY_WERE]

    DatabaseOperations.sql_flush = delete_every_row  # type: ignore[method-assign]
