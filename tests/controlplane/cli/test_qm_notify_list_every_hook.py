"""`qm notify list` asked the API for one page of hooks (at most 1,000) and printed it as the whole
list: an admin's list, or a user's with a hook per run of a sweep, lost its latest hooks from the
table without a word, where `qm maint list`, `qm nodes` and `qm quotas` read every page. It now
reads every page too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.models import NotificationHook

pytestmark = pytest.mark.slow


def test_notify_list_lists_every_hook_past_the_apis_page(alice_qm: Callable[..., Any]) -> None:
    alice = get_user_model().objects.get(username="alice")
    now = timezone.now()
    hooks = NotificationHook.objects.bulk_create([
        NotificationHook(user=alice, url=f"https://hooks.example.org/sweep-{i}", events=["failed"], secret="s" * 32,
                         created_at=now) for i in range(1005)])

    table = alice_qm("notify", "list")
    as_json = alice_qm("notify", "list", "--json")

    assert table.code == 0, table.err
    ids = [int(line.split()[0]) for line in table.out.splitlines()[1:] if line.split() and line.split()[0].isdigit()]
    assert sorted(ids) == sorted(h.pk for h in hooks), f"{len(ids)} of 1005 hooks listed"
    assert as_json.code == 0, as_json.err
    answer = as_json.json()
    assert len(answer["results"]) == 1005 and answer["count"] == 1005 and answer["next"] is None
