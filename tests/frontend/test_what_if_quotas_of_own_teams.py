"""The what-if page's quota table shows a member only their own teams' quotas, as the API
(`quotas/`: another team's is a 404) and the teams page do; finance and admins see every team's.

Found by the security audit (6 Dec): alice of vision read language's and serving's nominal GPUs
per type in the what-if form's cells, quotas the rest of the product keeps from her. The replay
still runs on the whole real quota table; a member's form changes only their own teams' cells,
and a cell of another team sent in the query is refused, naming it, and nothing runs.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_a_member_sees_and_changes_only_their_own_teams_quotas(client_for) -> None:
    page = client_for("alice").get("/what-if/")

    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="quota:vision:H100-80GB"' in html
    assert "quota:language:" not in html and "quota:serving:" not in html


@pytest.mark.parametrize("username", ["finn", "admin"])
def test_finance_and_admins_see_every_teams_quotas(client_for, username) -> None:
    html = client_for(username).get("/what-if/").content.decode()

    assert all(f'name="quota:{team}:H100-80GB"' in html for team in ("vision", "language", "serving"))


def test_a_member_sending_another_teams_quota_is_refused_naming_it(client_for) -> None:
    page = client_for("alice").post("/what-if/", {"quota:language:H100-80GB": "0"})

    assert page.status_code == 400
    said = page.content.decode()
    assert ("quota:language:H100-80GB: language is not a team of yours: the replay keeps its live quota" in said)
    assert "32" not in said.split("quota:language:H100-80GB", 1)[1][:200]  # its live quota not said back


def test_a_members_cells_carry_their_limits_and_another_teams_limit_is_refused(client_for) -> None:
    html = client_for("alice").get("/what-if/").content.decode()
    assert 'name="borrowing:vision:H100-80GB"' in html and 'name="lending:vision:H100-80GB"' in html
    assert "borrowing:language:" not in html

    page = client_for("alice").post("/what-if/", {"lending:language:H100-80GB": "0"})

    assert page.status_code == 400
    assert ("lending:language:H100-80GB: language is not a team of yours: the replay keeps its live quota"
            in page.content.decode())
