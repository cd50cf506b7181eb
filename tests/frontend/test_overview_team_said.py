"""A `?team=` the overview's queue filter cannot find is said on the page, and the queue of
all teams shown, as a window it cannot read is (test_window_names_said.py): `/?team=nope` (or a
team since renamed, in a bookmark) drew "Queue depth by priority class" of the whole fleet under
a filter that had silently dropped the team (demo walk, 7 Dec)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db: Any) -> Client:
    team = f.make_team("ml")
    f.make_team("nlp")
    f.make_node(f.make_gpu_type("H100-80GB"), name="h100-01")
    client = Client()
    client.force_login(f.make_user("alice", team=team))
    return client


def test_a_team_the_overview_cannot_find_is_said_and_all_teams_shown(alice: Client) -> None:
    html = alice.get("/", {"team": "nope"}).content.decode()
    assert ('<p class="error" role="alert" id="team-error" data-error-for="team">team: no team named '
            "&#x27;nope&#x27; (the teams are ml, nlp); showing the queue of all teams.</p>") in html
    assert "<option value=\"ml\" selected>" not in html and "<option value=\"nlp\" selected>" not in html
    assert "Queue depth by priority class" in html


@pytest.mark.parametrize("query", [{"team": "nlp"}, {"team": ""}, {}])
def test_a_team_it_finds_or_none_asked_is_not_an_error(alice: Client, query: dict[str, str]) -> None:
    html = alice.get("/", query).content.decode()
    assert 'id="team-error"' not in html
    if query.get("team"):
        assert '<option value="nlp" selected>nlp</option>' in html
        assert "Queue depth of team nlp by priority class" in html
