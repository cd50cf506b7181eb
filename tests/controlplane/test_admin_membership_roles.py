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
