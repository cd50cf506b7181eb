"""Rows a module's tests share, built once instead of once per test.

Some fixtures cost seconds (the accounting catching up over days of minutes) and the tests on
them only read the rows, or change them and are rolled back. `built_once` builds such rows in a
transaction of their own, opened for the module (pytest-django runs each test in a savepoint of
it, as it runs every test in a transaction, and rolls the savepoint back after the test), and
rolls the whole back when the module's tests on them are done. It is a module-scoped fixture's
body, with an autouse check beside it:

    SHARED = Shared()

    @pytest.fixture(scope="module")
    def _history_once(django_db_setup, django_db_blocker):
        yield from built_once(django_db_blocker, build, SHARED)

    @pytest.fixture(autouse=True)
    def _shared_rows_only_on_their_tests(request):
        SHARED.only_for(request, "history")

While the rows are there every test of the module sees them, so a module keeps its tests on them
after its others. pytest-django runs a module's tests in their own transactions
(`transaction=True`) after all its others: the first of them rolls the shared rows back before
it starts; any other test that comes after the shared rows fails, saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from django.db import transaction
from django.test.utils import override_settings

T = TypeVar("T")

# A fast hasher while rows with users are built, as the suite's folders choose (the per-test
# `settings` fixture that sets theirs is not there at module scope).
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


class Shared:
    def __init__(self) -> None:
        self.there = False
        self._roll_back: Callable[[], None] | None = None

    def roll_back(self) -> None:
        if self._roll_back is not None:
            roll_back, self._roll_back = self._roll_back, None
            self.there = False
            roll_back()

    def only_for(self, request: pytest.FixtureRequest, fixture: str) -> None:
        if fixture in request.fixturenames:
            if not self.there:
                pytest.fail(f"{request.node.nodeid} needs {fixture}, rolled back already (built_once.py)")
            return
        if not self.there:
            return
        marker = request.node.get_closest_marker("django_db")
        transactional = "transactional_db" in request.fixturenames or (
            marker is not None and bool(marker.kwargs.get("transaction", marker.args[0] if marker.args else False)))
        if transactional:  # its own transactions: nothing of the test's is open inside the shared one yet
            self.roll_back()
            return
        pytest.fail(f"{request.node.nodeid} runs while the module's shared rows ({fixture}) are there: "
                    f"put it above the first test that uses {fixture} (tests/controlplane/built_once.py)")


def built_once(django_db_blocker: Any, build: Callable[[], T], shared: Shared) -> Iterator[T]:
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            with override_settings(PASSWORD_HASHERS=FAST_HASHERS):
                value = build()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            raise

    def roll_back() -> None:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)

    shared.there, shared._roll_back = True, roll_back
    try:
        yield value
    finally:
        shared.roll_back()
