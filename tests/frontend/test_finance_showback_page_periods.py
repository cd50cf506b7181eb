"""/showback/ names a period it was given but did not show, as the API refuses it (QA round, 30 Nov):
a link with both `window` and `month` showed the month and dropped the window without a word, and
`?window=7d&window=1d` showed one day where the reader may have meant seven."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.services import accounting

pytestmark = pytest.mark.django_db


def test_window_beside_month_is_named_and_the_month_is_shown(client_for):
    # November rolled up whole: a period with nothing rolled up offers no download at all (5e748f1)
    accounting.AccountingCursor.objects.update_or_create(
        name=accounting.CURSOR_NAME, defaults={"rolled_until": datetime(2026, 12, 1, tzinfo=UTC)})
    response = client_for("finn").get("/showback/?window=7d&month=2026-11")
    assert response.status_code == 200
    assert response.context["month"] == "2026-11"
    assert any(e.startswith("window: ") and "month" in e for e in response.context["errors"]), response.context["errors"]
    assert "month=2026-11" in response.context["csv_url"]


@pytest.mark.parametrize("query, name", [("window=7d&window=1d", "window"), ("group_by=team&group_by=project", "group_by"),
                                         ("month=2026-11&month=2026-10", "month")])
def test_a_parameter_given_twice_is_named(client_for, query, name):
    response = client_for("finn").get("/showback/?" + query)
    assert response.status_code == 200
    errors = response.context["errors"]
    assert any(e.startswith(f"{name}: ") and "twice" in e for e in errors), errors
    # the report shown is the one the message names: the last value
    last = query.split("&")[-1].split("=")[1]
    assert any(f"'{last}'" in e for e in errors), errors
    shown = {"window": response.context["window_text"], "group_by": response.context["group_by"],
             "month": response.context["month"]}[name]
    assert shown == last


def test_one_period_says_nothing(client_for):
    for query in ("window=7d", "month=2026-11", "window=24h&group_by=project"):
        assert client_for("finn").get("/showback/?" + query).context["errors"] == [], query


def test_the_fully_loaded_total_is_said_to_fleet_readers_only(client_for):
    """TOTAL's $ / GPU-h read $19.67 beside rows of $2–3 on the demo, with nothing on the page to
    say it carries the idle capacity's cost; members' TOTAL has no idle capacity in it."""
    # (tokens are priced by the jobs that reported them: docs/accounting.md, "$ per useful token")
    said = "idle capacity included, by the GPU-hours the jobs used"
    assert said in client_for("finn").get("/showback/?window=24h").content.decode()
    assert said not in client_for("alice").get("/showback/?window=24h").content.decode()
