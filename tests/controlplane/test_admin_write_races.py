"""An admin's save in the admin UI racing another write of the same record (two PostgreSQL
connections, real row locks: tests/controlplane/lock_waits.py). The other write commits after
the page's POST has read the record and before its save, as a second admin's save or the
control loop's write lands in the real race.

Found by the concurrency audit (4 Dec): the change view read the record unlocked, so the page
was judged (test_admin_stale_form.py) against the row as it was then: a borrowing limit another
writer set in between was written back by the save of a page that never touched it, and a team
deleted in between made the save a 500 ("Save with update_fields did not affect any rows").
Now a POST locks the row before reading it (KeepsOthersChanges.get_object)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import transaction
from django.test import Client

from controlplane.models import Quota, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    fleet = build_fleet()
    f.make_user("boss", superuser=True)
    return fleet


def _boss() -> Client:
    client = Client()
    assert client.login(username="boss", password="boss")
    return client


def test_a_quota_saved_while_another_write_lands_keeps_that_write(committed_fleet: Fleet) -> None:
    quota = Quota.objects.get(team=committed_fleet.ml, gpu_type=committed_fleet.h100)
    path = f"/admin/controlplane/quota/{quota.pk}/change/"
    boss = _boss()
    form = f.opened_admin_form(boss, path)
    form["nominal_gpus"] = 24
    with transaction.atomic():  # the other write, committed while the save waits for the row
        Quota.objects.select_for_update().get(pk=quota.pk)
        saving, saved = in_thread(lambda: boss.post(path, form))
        assert blocked_on_a_lock()
        Quota.objects.filter(pk=quota.pk).update(borrowing_limit=4)
    saving.join(20)

    assert saved["result"].status_code == 302, saved
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.borrowing_limit) == (24, 4)


def test_saving_a_team_deleted_meanwhile_says_it_is_gone_and_does_not_bring_it_back(committed_fleet: Fleet) -> None:
    team = f.make_team("sunset", default_priority_class=committed_fleet.research)
    path = f"/admin/controlplane/team/{team.pk}/change/"
    boss = _boss()
    form = f.opened_admin_form(boss, path)
    form["description"] = "kept for a while"
    with transaction.atomic():  # the deletion, committed while the save waits for the row
        Team.objects.select_for_update().get(pk=team.pk)
        saving, saved = in_thread(lambda: boss.post(path, form))
        assert blocked_on_a_lock()
        Team.objects.filter(pk=team.pk).delete()
    saving.join(20)

    assert "error" not in saved, saved
    answer = saved["result"]
    assert answer.status_code == 302, answer
    assert any("doesn’t exist" in str(m) or "doesn't exist" in str(m) for m in get_messages(answer.wsgi_request))
    assert not Team.objects.filter(pk=team.pk).exists()
