"""Membership rules the admin's user and team pages enforce (`Membership.clean`).

Found on the admin's walk (5 Dec): a finance membership added on a team's page read "finance of
vision" in the users' list while it let the user read every team's costs (finance is fleet-wide;
`services.access` ignores its team), and a user could be given the same role in no team twice."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from controlplane.choices import Role
from controlplane.models import Membership
from tests.controlplane.factories import make_team, make_user

pytestmark = pytest.mark.django_db


def test_finance_in_a_team_is_refused_on_the_team_as_finance_reads_every_team() -> None:
    vision = make_team("vision")
    carla = make_user("carla")
    with pytest.raises(ValidationError) as refused:
        Membership(user=carla, team=vision, role=Role.FINANCE).full_clean()
    assert refused.value.message_dict == {"team": [
        "Finance reads every team's costs and belongs to no team: leave the team empty "
        "(on the user's page, under Roles)."]}
    Membership(user=carla, team=None, role=Role.FINANCE).full_clean()


def test_a_role_in_no_team_is_given_once() -> None:
    carla = make_user("carla")
    Membership.objects.create(user=carla, team=None, role=Role.FINANCE)
    with pytest.raises(ValidationError) as refused:
        Membership(user=carla, team=None, role=Role.FINANCE).full_clean()
    assert refused.value.message_dict == {"role": ["carla is already finance in no team."]}
    Membership(user=carla, team=None, role=Role.ADMIN).full_clean()  # another role in no team is fine


def _second_row(client, path: str, prefix: str, **row: object) -> object:
    """`path` posted as opened, with one more row of the inline `prefix` holding `row`."""
    from tests.controlplane import factories as f

    form = f.opened_admin_form(client, path)
    n = int(form[f"{prefix}-TOTAL_FORMS"])
    form[f"{prefix}-TOTAL_FORMS"] = n + 1
    form.update({f"{prefix}-{n}-{name}": value for name, value in row.items()})
    return client.post(path, form)


def _said(answer) -> str:  # type: ignore[no-untyped-def]
    assert answer.status_code == 200, "the form was accepted"
    return answer.content.decode()


ONE_ROLE = "A user has one role in a team: change the role on the row already there instead of adding another."


def test_a_second_role_in_the_same_team_says_one_role_per_team_on_the_team_page(fleet, browser) -> None:
    """Found in the demo: making bob, a member of language, its admin by adding a row on the
    team's page was refused with Django's "Please correct the duplicate data for user." and
    "Please correct the duplicate values below.", which name no rule."""
    alice = fleet.users["owner"]
    path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"

    html = _said(_second_row(browser, path, "memberships", user=alice.pk, team=fleet.ml.pk, role=Role.ADMIN))

    assert ONE_ROLE in html and "duplicate" not in html
    assert list(Membership.objects.filter(user=alice, team=fleet.ml).values_list("role", flat=True)) == [Role.MEMBER]


def test_a_second_role_in_the_same_team_says_one_role_per_team_on_the_users_page(fleet, browser) -> None:
    alice = fleet.users["owner"]
    path = f"/admin/auth/user/{alice.pk}/change/"

    html = _said(_second_row(browser, path, "memberships", user=alice.pk, team=fleet.ml.pk, role=Role.ADMIN))

    assert ONE_ROLE in html and "duplicate" not in html
    assert list(Membership.objects.filter(user=alice, team=fleet.ml).values_list("role", flat=True)) == [Role.MEMBER]
