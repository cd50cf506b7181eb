"""A fleet admin by membership (role admin, not a superuser, not staff) uses the admin UI for what a
Quartermaster admin may do, as the API and the pages already let them: the README sends admins
to /admin/ to tune quotas, cohorts, borrowing limits and priorities.

Until 7 Dec the admin site asked Django's own flags: `is_staff` to sign in, a model permission
per page. The fleet's "root" (fixture: a membership with role admin, nothing else) was told
"Please enter the correct username and password for a staff account" and could tune nothing.
Now `services/access.py` is the one home of the rule: whoever `access_of(user).is_admin` holds
the controlplane app's permissions (`FleetAdminPermissions`, an authentication backend) and
reaches the site (`may_use_admin_site`), read from the memberships at each request, so taking
the membership away takes the admin away at the next request. The Django accounts themselves
(passwords, staff, superuser, groups, permissions, adding and deleting users) stay with
superusers and those given Django's own permissions on them; a membership admin reads the users
and grants or takes back their roles."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from controlplane.choices import EventKind, Role
from controlplane.models import Event, Membership, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _signed_in(username: str) -> Client:
    """`username` signed in through the admin's own sign-in page, as a browser does it."""
    client = Client()
    assert client.get("/admin/login/").status_code == 200
    answer = client.post("/admin/login/", {"username": username, "password": username, "next": "/admin/"})
    assert answer.status_code == 302 and answer["Location"] == "/admin/", answer.content.decode()[:2000]
    return client


def _quota_form(quota: Quota, **changes: Any) -> dict[str, Any]:
    fields = {"team": quota.team_id, "gpu_type": quota.gpu_type_id, "nominal_gpus": quota.nominal_gpus,
              "borrowing_limit": "" if quota.borrowing_limit is None else quota.borrowing_limit,
              "lending_limit": "" if quota.lending_limit is None else quota.lending_limit}
    return {**fields, **changes}


def test_a_membership_admin_signs_in_to_the_admin_and_changes_a_borrowing_limit(fleet) -> None:
    root = fleet.users["admin"]
    assert not root.is_staff and not root.is_superuser
    quota = fleet.ml.quotas.get()
    client = _signed_in("root")

    index = client.get("/admin/")
    page = client.get(f"/admin/controlplane/quota/{quota.pk}/change/")
    saved = client.post(f"/admin/controlplane/quota/{quota.pk}/change/", _quota_form(quota, borrowing_limit=6))

    assert index.status_code == 200
    assert '<a href="/admin/controlplane/quota/">Quotas</a>' in index.content.decode()
    assert page.status_code == 200 and 'name="borrowing_limit"' in page.content.decode()
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert Quota.objects.get(pk=quota.pk).borrowing_limit == 6
    event = Event.objects.get(kind=EventKind.QUOTA_CHANGED)  # the audit trail names them
    assert event.actor == "user:root" and event.reason == "QuotaChanged"
    assert event.data["before"]["borrowing_limit"] is None and event.data["after"]["borrowing_limit"] == 6


def test_a_membership_admin_tunes_cohorts_and_priority_classes_and_reads_the_policy(fleet) -> None:
    client = _signed_in("root")

    for path in ("/admin/controlplane/cohort/add/", f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/",
                 f"/admin/controlplane/team/{fleet.ml.pk}/change/", "/admin/controlplane/event/",
                 "/admin/controlplane/schedulerlease/policy/"):
        assert client.get(path).status_code == 200, path
    made = client.post("/admin/controlplane/cohort/add/", {"name": "inference", "description": "serving teams"})
    assert made.status_code == 302, made.content.decode()[:2000]
    assert Event.objects.filter(kind=EventKind.COHORT_CHANGED, reason="CohortCreated", actor="user:root").exists()
    # What no admin edits (jobs, events, the lease) stays read-only for them as for a superuser.
    job = f.make_job(fleet.ml, fleet.research)
    assert 'name="state"' not in client.get(f"/admin/controlplane/job/{job.pk}/change/").content.decode()
    assert client.post(f"/admin/controlplane/job/{job.pk}/delete/", {"post": "yes"}).status_code == 403


@pytest.mark.parametrize("role", ["owner", "finance"])
def test_a_member_and_finance_are_refused_the_admin(fleet, role) -> None:
    user = fleet.users[role]
    quota = fleet.ml.quotas.get()
    client = Client()

    refused = client.post("/admin/login/", {"username": user.username, "password": user.username,
                                            "next": "/admin/"})
    assert refused.status_code == 200 and "_auth_user_id" not in client.session
    assert "Please enter the correct username and password" in refused.content.decode()

    assert client.login(username=user.username, password=user.username)  # signed in on the pages
    assert client.get("/admin/")["Location"].startswith("/admin/login/")
    assert client.get(f"/admin/controlplane/quota/{quota.pk}/change/")["Location"].startswith("/admin/login/")
    client.post(f"/admin/controlplane/quota/{quota.pk}/change/", _quota_form(quota, borrowing_limit=6))
    assert Quota.objects.get(pk=quota.pk).borrowing_limit is None
    assert not user.has_perm("controlplane.change_quota") and not user.has_module_perms("controlplane")


def test_removing_the_admin_membership_removes_the_admin_at_the_next_request(fleet) -> None:
    quota = fleet.ml.quotas.get()
    client = _signed_in("root")
    assert client.get("/admin/controlplane/quota/").status_code == 200

    Membership.objects.filter(user=fleet.users["admin"], role=Role.ADMIN).delete()

    assert client.get("/admin/controlplane/quota/")["Location"].startswith("/admin/login/")
    client.post(f"/admin/controlplane/quota/{quota.pk}/change/", _quota_form(quota, borrowing_limit=6))
    assert Quota.objects.get(pk=quota.pk).borrowing_limit is None
    login = client.get("/admin/login/?next=/admin/")
    assert login.status_code == 200 and "not authorized to access this page" in login.content.decode()


def test_an_inactive_membership_admin_is_refused(fleet) -> None:
    root = fleet.users["admin"]
    root.is_active = False
    root.save()
    client = Client()
    answer = client.post("/admin/login/", {"username": "root", "password": "root", "next": "/admin/"})
    assert answer.status_code == 200 and "_auth_user_id" not in client.session
    assert not root.has_perm("controlplane.change_quota")


def test_a_membership_admin_grants_roles_on_a_users_page_but_not_the_account(fleet) -> None:
    """Roles are the fleet's (a membership: who is admin, finance, member of which team); the
    account is Django's: its password, staff and superuser flags, groups and permissions would
    let a membership admin make themself a superuser or sign in as anyone, which no role gives.
    So a membership admin's user page shows the account read-only and saves only its roles."""
    alice = fleet.users["owner"]
    client = _signed_in("root")
    path = f"/admin/auth/user/{alice.pk}/change/"

    page = client.get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="is_superuser"' not in html and 'name="is_staff"' not in html and 'name="username"' not in html
    assert "pbkdf2" not in html and "password" not in page.context["adminform"].form.fields
    form = f.opened_admin_form(client, path)
    prefix = next(k for k in form if k.endswith("-TOTAL_FORMS")).removesuffix("-TOTAL_FORMS")
    n = int(form[f"{prefix}-TOTAL_FORMS"])
    form.update({f"{prefix}-TOTAL_FORMS": n + 1, f"{prefix}-{n}-role": Role.FINANCE, f"{prefix}-{n}-team": "",
                 f"{prefix}-{n}-user": alice.pk, "is_superuser": "on", "is_staff": "on", "username": "mallory"})

    saved = client.post(path, form)

    assert saved.status_code == 302, saved.content.decode()[:3000]
    alice = get_user_model().objects.get(pk=alice.pk)
    assert alice.username == "alice" and not alice.is_superuser and not alice.is_staff
    assert Membership.objects.filter(user=alice, team=None, role=Role.FINANCE).exists()
    granted = Event.objects.get(kind=EventKind.CONFIG_CHANGED, reason="MembershipCreated")
    assert granted.actor == "user:root"
    assert not Event.objects.filter(reason="UserChanged", actor="user:root").exists()

    assert client.get(f"/admin/auth/user/{alice.pk}/password/").status_code == 403
    assert client.post(f"/admin/auth/user/{alice.pk}/password/",
                       {"password1": "Xy7!long-enough", "password2": "Xy7!long-enough"}).status_code == 403
    assert client.get("/admin/auth/user/add/").status_code == 403
    assert client.post(f"/admin/auth/user/{alice.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/auth/group/").status_code == 403
    assert client.get("/admin/auth/user/").status_code == 200
    assert get_user_model().objects.filter(pk=alice.pk).exists() and not Group.objects.exists()


def test_a_superuser_still_edits_the_whole_account(fleet, browser) -> None:
    alice = fleet.users["owner"]
    html = browser.get(f"/admin/auth/user/{alice.pk}/change/").content.decode()
    assert 'name="is_superuser"' in html and 'name="username"' in html
    assert browser.get(f"/admin/auth/user/{alice.pk}/password/").status_code == 200
