"""The admin's "Delete selected" action racing another write of the same rows, and a team page's
inline rows racing a change or deletion of one of them (two PostgreSQL connections, real row
locks: tests/controlplane/lock_waits.py).

Found by the concurrency audit (4 Dec), after single edits and the API were made to lock: the
bulk deletion read the selected rows unlocked and recorded each as it had read it, so two
deletions at once each recorded a QuotaDeleted event per quota, a deletion racing a change
recorded the quota as it was before that change, and a team that got a job between the
confirmation page and the deletion made the deletion a 500. The team page locked the team but
not its inline rows: a quota's borrowing limit set meanwhile was written back by the page's save
of its nominal, and a quota deleted meanwhile was inserted again. Now the bulk deletion locks the
selected rows (delete_selected_locked) and a change page locks its inline rows with its record
(KeepsOthersChanges.get_object)."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.test import Client

from controlplane.models import Event, Quota, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    fleet = build_fleet()
    f.make_user("boss", superuser=True)
    f.make_user("chief", superuser=True)
    return fleet


def _admin(name: str) -> Client:
    client = Client()
    assert client.login(username=name, password=name)
    return client


def _delete_selected(client: Client, model: str, pks: list[int]) -> Any:
    return client.post(f"/admin/controlplane/{model}/", {"action": "delete_selected", "_selected_action": pks,
                                                         "index": 0, "post": "yes"})


def _delete_selected_users(client: Client, pks: list[int]) -> Any:
    return client.post("/admin/auth/user/", {"action": "delete_selected", "_selected_action": pks, "index": 0,
                                             "post": "yes"})


def _messages(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_two_admins_deleting_the_same_quotas_at_once_record_one_event_each(committed_fleet: Fleet) -> None:
    quotas = list(Quota.objects.filter(gpu_type=committed_fleet.h100).order_by("pk").values_list("pk", flat=True))
    boss, chief = _admin("boss"), _admin("chief")
    with transaction.atomic():  # a third writer holds the rows: both deletions wait for them
        list(Quota.objects.select_for_update().filter(pk__in=quotas))
        first, first_out = in_thread(lambda: _delete_selected(boss, "quota", quotas))
        second, second_out = in_thread(lambda: _delete_selected(chief, "quota", quotas))
        assert blocked_on_a_lock(at_least=2)
    first.join(20)
    second.join(20)

    answers = [first_out["result"], second_out["result"]]
    assert [a.status_code for a in answers] == [302, 302], (first_out, second_out)
    assert not Quota.objects.filter(pk__in=quotas).exists()
    deleted = Event.objects.filter(reason="QuotaDeleted")
    assert sorted(e.data["before"]["id"] for e in deleted) == quotas
    said = sorted((_messages(a) for a in answers), key=len)
    assert said[0] == ["Successfully deleted 2 quotas."], said
    assert said[1][0] == "Deleted 0 quotas.", said
    assert f"2 quotas ({quotas[0]}, {quotas[1]}) had been deleted meanwhile" in said[1][1], said


def test_two_admins_deleting_the_same_users_at_once_record_each_users_deletion_once(committed_fleet: Fleet) -> None:
    """"Delete selected users" records the users' deletions together before deleting them
    (services/config_audit.users_deleting), under their rows' locks (delete_selected_locked), so
    the second of two admins deleting the same users finds them gone, records nothing and says
    so, where each user's own pre_delete had recorded them, then waited on the DELETE, in both."""
    dora, carl = f.make_user("dora", team=committed_fleet.ml), f.make_user("carl", team=committed_fleet.ml)
    f.token_for(dora)
    f.make_job(committed_fleet.ml, submitter=carl)
    users = [dora.pk, carl.pk]
    boss, chief = _admin("boss"), _admin("chief")
    delete = {"action": "delete_selected", "_selected_action": users, "index": 0, "post": "yes"}
    with transaction.atomic():  # a third writer holds the users' rows: both deletions wait for them
        list(get_user_model().objects.select_for_update().filter(pk__in=users))
        first, first_out = in_thread(lambda: boss.post("/admin/auth/user/", delete))
        second, second_out = in_thread(lambda: chief.post("/admin/auth/user/", delete))
        assert blocked_on_a_lock(at_least=2)
    first.join(20)
    second.join(20)

    assert [out["result"].status_code for out in (first_out, second_out)] == [302, 302], (first_out, second_out)
    assert not get_user_model().objects.filter(pk__in=users).exists()
    for reason, count in (("UserDeleted", 2), ("MembershipDeleted", 2), ("ApiTokenOwnerDeleted", 1),
                          ("SubmitterDeleted", 1)):
        assert Event.objects.filter(reason=reason).count() == count, reason
    assert len({e.actor for e in Event.objects.filter(reason__in=["UserDeleted", "ApiTokenOwnerDeleted"])}) == 1
    said = sorted((_messages(out["result"]) for out in (first_out, second_out)), key=len)
    assert said[0] == ["Successfully deleted 2 users."], said
    assert said[1][0] == "Deleted 0 users.", said  # not Django's "Successfully deleted 2 users."
    assert f"2 users ({dora.pk}, {carl.pk}) had been deleted meanwhile" in said[1][1], said
    assert len(said[1]) == 2, said


def test_a_bulk_deletion_counts_only_the_users_it_deleted_beside_those_deleted_meanwhile(
        committed_fleet: Fleet) -> None:
    """Of three users selected, one deleted by another admin while this deletion waits for the
    rows: the admin is told 2 deleted and 1 deleted meanwhile, as the events record."""
    users = [f.make_user(name, team=committed_fleet.ml).pk for name in ("dora", "carl", "erin")]
    boss = _admin("boss")
    with transaction.atomic():  # another admin's deletion of carl, committed while this one waits
        list(get_user_model().objects.select_for_update().filter(pk__in=users))
        deleting, out = in_thread(lambda: _delete_selected_users(boss, users))
        assert blocked_on_a_lock()
        get_user_model().objects.filter(pk=users[1]).delete()
    deleting.join(20)

    assert out["result"].status_code == 302, out
    said = sorted(_messages(out["result"]))
    assert said[0].startswith(f"1 user ({users[1]}) had been deleted meanwhile"), said
    assert said[1:] == ["Successfully deleted 2 users."], said
    assert Event.objects.filter(reason="UserDeleted", actor="user:boss").count() == 2


def test_a_quota_changed_while_a_bulk_deletion_waits_is_recorded_as_changed(committed_fleet: Fleet) -> None:
    quota = Quota.objects.get(team=committed_fleet.ml, gpu_type=committed_fleet.h100)
    boss = _admin("boss")
    with transaction.atomic():  # the change, committed while the deletion waits for the row
        Quota.objects.select_for_update().get(pk=quota.pk)
        deleting, out = in_thread(lambda: _delete_selected(boss, "quota", [quota.pk]))
        assert blocked_on_a_lock()
        Quota.objects.filter(pk=quota.pk).update(nominal_gpus=24, borrowing_limit=4)
    deleting.join(20)

    assert out["result"].status_code == 302, out
    [event] = Event.objects.filter(reason="QuotaDeleted")
    assert (event.data["before"]["nominal_gpus"], event.data["before"]["borrowing_limit"]) == (24, 4)
    assert "was nominal 24, borrowing limit 4" in event.message


def test_a_team_given_a_job_while_its_bulk_deletion_waits_is_refused_not_a_500(committed_fleet: Fleet) -> None:
    team = f.make_team("sunset", default_priority_class=committed_fleet.research)
    boss = _admin("boss")
    with transaction.atomic():  # a job submitted for the team, committed while the deletion waits
        Team.objects.select_for_update().get(pk=team.pk)
        deleting, out = in_thread(lambda: _delete_selected(boss, "team", [team.pk]))
        assert blocked_on_a_lock()
        f.make_job(team)
    deleting.join(20)

    assert "error" not in out, out
    answer = out["result"]
    assert answer.status_code == 200, answer
    page = html.unescape(" ".join(answer.content.decode().split()))
    assert "Cannot delete team" in page and "<li>Jobs: 1</li>" in page
    assert Team.objects.filter(pk=team.pk).exists()
    assert not Event.objects.filter(reason="TeamDeleted").exists()


def test_a_single_deletion_of_a_team_being_given_a_job_waits_for_it_and_is_refused(committed_fleet: Fleet) -> None:
    """A job's insert holds its team's row FOR KEY SHARE while it commits (the check of its
    foreign key, deferred to the commit). The deletion's lock FOR NO KEY UPDATE did not wait for
    it, so the page found no job, and the DELETE, which did wait, then deleted a team its new
    job refers to: a 500 at the commit."""
    team = f.make_team("sunset", default_priority_class=committed_fleet.research)
    boss = _admin("boss")
    with transaction.atomic():  # a job being submitted for the team, committed while the deletion waits
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM controlplane_team WHERE id = %s FOR KEY SHARE", [team.pk])
        f.make_job(team)
        deleting, out = in_thread(lambda: boss.post(f"/admin/controlplane/team/{team.pk}/delete/", {"post": "yes"}))
        assert blocked_on_a_lock()
    deleting.join(20)

    assert "error" not in out, out
    assert out["result"].status_code == 200 and b"Cannot delete team" in out["result"].content
    assert Team.objects.filter(pk=team.pk).exists()
    assert not Event.objects.filter(reason="TeamDeleted").exists()


def _team_page_with_quota_nominal(client: Client, team: Team, nominal: int) -> tuple[str, dict[str, Any]]:
    path = f"/admin/controlplane/team/{team.pk}/change/"
    form = f.opened_admin_form(client, path)
    [row] = [k for k, v in form.items() if k.startswith("quotas-") and k.endswith("-nominal_gpus")]
    form[row] = nominal
    return path, form


def test_a_quota_limit_set_meanwhile_survives_the_team_page_saving_its_nominal(committed_fleet: Fleet) -> None:
    quota = Quota.objects.get(team=committed_fleet.ml, gpu_type=committed_fleet.h100)
    boss = _admin("boss")
    path, form = _team_page_with_quota_nominal(boss, committed_fleet.ml, 24)
    with transaction.atomic():  # another admin's (or the API's) change of the inline row
        Quota.objects.select_for_update().get(pk=quota.pk)
        saving, out = in_thread(lambda: boss.post(path, form))
        assert blocked_on_a_lock()
        Quota.objects.filter(pk=quota.pk).update(borrowing_limit=4)
    saving.join(20)

    assert "error" not in out and out["result"].status_code == 302, out
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.borrowing_limit) == (24, 4)
    [event] = Event.objects.filter(reason="QuotaChanged")
    assert (event.data["before"]["borrowing_limit"], event.data["after"]["borrowing_limit"]) == (4, 4)


def test_a_quota_deleted_meanwhile_is_not_brought_back_by_the_team_page(committed_fleet: Fleet) -> None:
    quota = Quota.objects.get(team=committed_fleet.ml, gpu_type=committed_fleet.h100)
    boss = _admin("boss")
    path, form = _team_page_with_quota_nominal(boss, committed_fleet.ml, 24)
    with transaction.atomic():  # the quota deleted while the team page's save waits
        Quota.objects.select_for_update().get(pk=quota.pk)
        saving, out = in_thread(lambda: boss.post(path, form))
        assert blocked_on_a_lock()
        Quota.objects.filter(pk=quota.pk).delete()
    saving.join(20)

    assert "error" not in out and out["result"].status_code == 302, out
    assert not Quota.objects.filter(team=committed_fleet.ml).exists()
    assert not Event.objects.filter(reason__in=("QuotaChanged", "QuotaCreated")).exists()
    assert any("was deleted by" in m and "nothing of it saved" in m for m in _messages(out["result"])), \
        _messages(out["result"])
