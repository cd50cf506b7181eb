"""/showback/ says when it does not show what the link asked for, instead of silently showing
something else."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("asked", ["job", "user", "teams"])
def test_a_grouping_the_page_does_not_have_is_named_and_team_is_shown(client_for, asked):
    response = client_for("finn").get("/showback/", {"group_by": asked, "window": "24h"})
    assert response.status_code == 200
    page = response.content.decode()
    assert f"group_by: &#x27;{asked}&#x27; is not a grouping here" in page
    assert response.context["group_by"] == "team"
    # the window asked for is kept: only the grouping fell back
    assert response.context["window_text"] == "24h"


def test_a_grouping_the_page_has_says_nothing(client_for):
    response = client_for("finn").get("/showback/", {"group_by": "priority_class", "window": "24h"})
    assert response.context["errors"] == []
    assert response.context["group_by"] == "priority_class"


def test_a_misspelt_parameter_is_named_not_silently_ignored(client_for):
    """?windw=30d showed the default week with nothing to say the 30 days were not read."""
    response = client_for("finn").get("/showback/", {"windw": "30d"})
    assert response.status_code == 200
    assert any(e.startswith("windw: not a parameter of this page") for e in response.context["errors"])
    assert response.context["window_text"] == "7d"


@pytest.mark.parametrize("query", ["window=%00", "month=2026-11%00", "group_by=team%01", "wind%00ow=7d"])
def test_a_control_character_in_a_parameter_is_named_not_echoed_into_the_page(client_for, query):
    """`?window=%00` answered "window: '\\x00' is not a window" with the NUL itself in the HTML
    (finance walk, 8 Dec), which a browser shows as a replacement character; the API refuses it
    as "Null characters are not allowed." The page names the parameter and shows the default."""
    response = client_for("finn").get(f"/showback/?{query}")
    assert response.status_code == 200
    html = response.content.decode()
    assert "\x00" not in html and "\x01" not in html
    name = query.split("=")[0].replace("%00", "\\x00")
    said = html[html.find('class="error"'):][:300]
    assert f"{name}: " in html, said
    # a known parameter's value is left out, the default shown; an unknown name is named, escaped
    assert ("control character" in said) == (name in ("window", "month", "group_by")), said
