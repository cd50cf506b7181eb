"""In Chromium: a user's admin page lists their roles, a team's or none's (finance and admins
read every team), and grants and takes them, each change a config.changed event; the users'
list says each one's roles.

Found on the admin's walk (5 Dec): the demo's finn is finance through a membership in no team,
which no admin page showed: memberships were edited only on a team's page, so who reads every
team's costs could be neither seen nor granted nor revoked in the admin, nor a finance role
given without putting the user in a team."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from controlplane.choices import EventKind, Role
from controlplane.models import Event, Membership
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_users_page_shows_grants_and_takes_their_roles(session: Any) -> None:  # noqa: F811
    User = get_user_model()
    finn, carla = User.objects.get(username="finn"), User.objects.create_user("carla", password="carla")
    admin = session("admin")
    page = admin.page

    page.goto(f"{admin.base}/admin/auth/user/")
    rows = {[c for c in r.split("\t") if c.strip()][0].strip(): r
            for r in page.locator("#result_list tbody tr").all_inner_texts()}
    assert "finance" in rows["finn"] and "member of vision" in rows["alice"], rows

    page.goto(f"{admin.base}/admin/auth/user/{finn.pk}/change/")
    group = page.locator("#memberships-group")
    assert group.locator("select[name$='-role']").first.input_value() == Role.FINANCE
    assert group.locator("select[name$='-team']").first.input_value() == ""  # in no team

    # grant carla finance, in no team
    page.goto(f"{admin.base}/admin/auth/user/{carla.pk}/change/")
    page.click("#memberships-group .add-row a")
    page.select_option("select[name='memberships-0-role']", Role.FINANCE)
    page.click("input[name=_save]")
    page.wait_for_url(f"{admin.base}/admin/auth/user/")
    granted = Membership.objects.get(user=carla)
    assert granted.team is None and granted.role == Role.FINANCE
    event = Event.objects.get(kind=EventKind.CONFIG_CHANGED, reason="MembershipCreated")
    assert event.message == "Membership of carla in no team created" and event.actor == "user:admin"

    # and take it back
    page.goto(f"{admin.base}/admin/auth/user/{carla.pk}/change/")
    page.check("input[name='memberships-0-DELETE']")
    page.click("input[name=_save]")
    page.wait_for_url(f"{admin.base}/admin/auth/user/")
    assert not Membership.objects.filter(user=carla).exists()
    assert Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="MembershipDeleted").count() == 1


def test_a_member_in_no_team_is_refused_on_the_team(session: Any) -> None:  # noqa: F811
    """A member reads and submits for their teams: a membership as member in no team gives
    nothing, and is refused on its team, saying who may be in none (here: finn's finance role,
    in no team, turned into member)."""
    finn = get_user_model().objects.get(username="finn")
    admin = session("admin")
    page = admin.page
    page.goto(f"{admin.base}/admin/auth/user/{finn.pk}/change/")
    page.select_option("select[name='memberships-0-role']", Role.MEMBER)
    page.click("input[name=_save]")
    page.wait_for_selector(".errornote")
    errors = page.locator("#memberships-group .errorlist").all_inner_texts()
    assert errors == ["A member belongs to a team: choose one (finance and admins may be in none)."], errors
    assert Membership.objects.get(user=finn).role == Role.FINANCE
