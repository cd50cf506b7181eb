"""/showback/: the accounting service's report, as finance, admins and members may read it."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from controlplane.services import accounting, showback
from tests.frontend.page_data import both_teams_ran_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_hours_of_use(submit_as):
    """vision and language each ran for the last two hours; the rollups are caught up."""
    return both_teams_ran_for(submit_as, hours=2)


def table_names(html: str) -> list[str]:
    table = html[html.index('id="showback-table"'):html.index("</table>")]
    return re.findall(r"<tr class=\"[^\"]*\">\s*<th scope=\"row\">([^<]+)</th>", table)


def test_finance_reads_every_team_the_idle_capacity_and_a_total(client_for, two_hours_of_use):
    html = client_for("finn").get("/showback/?window=24h").content.decode()
    names = table_names(html)
    assert "vision" in names and "language" in names
    assert "no job (idle capacity)" in names and names[-1] == "TOTAL"


def test_member_reads_their_own_team_only(client_for, two_hours_of_use):
    names = table_names(client_for("alice").get("/showback/?window=24h").content.decode())
    assert "vision" in names and "language" not in names
    assert "no job (idle capacity)" not in names


def test_cost_matches_the_accounting_service_to_the_cent(client_for, two_hours_of_use):
    response = client_for("finn").get("/showback/?window=24h")
    rows = {r["name"]: r for r in response.context["rows"]}
    report = showback.showback(showback.parse_window("24h", timezone.now()), "team",
                               accounting_access("finn"), timezone.now())
    money = showback.presented_money(report)
    vision = next(e for e in report.entries if e.name == "vision")
    assert rows["vision"]["cost_usd"] == money[vision.key]["cost_usd"] > Decimal(0)
    assert sum(r["cost_usd"] for r in rows.values() if not r["is_total"]) == rows["TOTAL"]["cost_usd"]


def accounting_access(username):
    from django.contrib.auth import get_user_model

    from controlplane.services.access import access_of

    return access_of(get_user_model().objects.get(username=username))


def test_cost_over_time_has_a_bar_per_team(client_for, two_hours_of_use):
    charts = {c.key: c for c in client_for("finn").get("/showback/?window=24h").context["charts"]}
    names = {trace["name"] for trace in charts["cost_over_time"].figure["data"]}
    assert names == {"vision", "language"}
    assert charts["cost_over_time"].figure["data"][0]["xperiod"] == 3600 * 1000


def test_csv_link_points_at_the_apis_csv_for_the_same_window_and_grouping(client_for, two_hours_of_use):
    client = client_for("finn")
    response = client.get("/showback/?window=24h&group_by=project")
    html, report = response.content.decode(), response.context["report"]
    href = re.search(r'href="([^"]+)" id="csv-download"', html).group(1).replace("&amp;", "&")
    # The period the page shows, by its instants (24h read later would be a later period).
    period = urlencode({"window": f"{accounting.iso(report.start)},{accounting.iso(report.end)}"})
    assert href == f"/api/v1/showback/?{period}&group_by=project&format=csv"
    csv = client.get(href)
    assert csv.status_code == 200 and csv.content.decode().splitlines()[-1].startswith("TOTAL,")


def test_a_window_that_does_not_parse_says_why_and_falls_back(client_for, two_hours_of_use):
    html = client_for("finn").get("/showback/?window=fortnight").content.decode()
    assert "window: &#x27;fortnight&#x27; is not a window" in html
    assert 'id="showback-table"' in html


def test_a_custom_start_end_window_is_kept_in_the_form(client_for, two_hours_of_use):
    start = (two_hours_of_use - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = two_hours_of_use.strftime("%Y-%m-%dT%H:%M:%SZ")
    html = client_for("finn").get(f"/showback/?window={start},{end}").content.decode()
    assert f'value="{start},{end}"' in html


def test_showback_before_any_rollup_says_what_will_appear(client_for):
    response = client_for("finn").get("/showback/")
    assert response.status_code == 200
    charts = {c.key: c for c in response.context["charts"]}
    assert "No GPU time has been charged" in charts["cost_over_time"].empty


def test_cost_per_day_reads_the_accounting_group_rows(client_for, two_hours_of_use):
    charts = {c.key: c for c in client_for("finn").get("/showback/?window=7d").context["charts"]}
    data = charts["cost_over_time"].figure["data"]
    assert {trace["name"] for trace in data} == {"vision", "language"}
    assert data[0]["xperiod"] == 86400 * 1000
    assert sum(sum(trace["y"]) for trace in data) > 0


def test_monthly_report_covers_the_calendar_month_and_its_csv(client_for, two_hours_of_use):
    month = f"{two_hours_of_use:%Y-%m}"
    client = client_for("finn")
    response = client.get(f"/showback/?month={month}&group_by=team")
    html = response.content.decode()
    assert f"Monthly report for {month}." in html
    report = response.context["report"]
    assert report.start == showback.month_window(month, timezone.now()).start
    service = showback.showback(showback.month_window(month, timezone.now()), "team",
                                accounting_access("finn"), timezone.now())
    money = showback.presented_money(service)
    vision = next(e for e in service.entries if e.name == "vision")
    rows = {r["name"]: r for r in response.context["rows"]}
    assert rows["vision"]["cost_usd"] == money[vision.key]["cost_usd"] > Decimal(0)
    href = re.search(r'href="([^"]+)" id="csv-download"', html).group(1).replace("&amp;", "&")
    # A month still running is named by the instants the page covers; a whole month by its name.
    if report.end == accounting.next_month(report.start):
        assert href == f"/api/v1/showback/?month={month}&group_by=team&format=csv"
    else:
        period = urlencode({"window": f"{accounting.iso(report.start)},{accounting.iso(report.end)}"})
        assert href == f"/api/v1/showback/?{period}&group_by=team&format=csv"
    assert client.get(href).content.decode().splitlines()[-1].startswith("TOTAL,")


def test_a_month_that_does_not_parse_names_the_field_and_falls_back(client_for, two_hours_of_use):
    html = client_for("finn").get("/showback/?month=2026-13").content.decode()
    assert "month: &#x27;2026-13&#x27; is not a month" in html
    assert "Monthly report for" not in html and 'id="showback-table"' in html
