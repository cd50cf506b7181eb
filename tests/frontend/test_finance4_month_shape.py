"""A month is YYYY-MM on every surface of showback (finance audit, 5 Dec).

/showback/?month=2026-1 showed January 2026 (the page read any two integers) while the CSV and
JSON links it offered carried `month=2026-1`, which the API refused with "This value does not
match the required pattern.": finance got a page and no download of it. The API let
"２０２６-１１" (full-width digits) through its pattern. One rule now judges a month
(services.showback.month_window): the page names the problem and shows its default, the API
answers 400 naming the month and what a month looks like.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.services import accounting

pytestmark = pytest.mark.django_db

NOT_A_MONTH = "is not a month: use YYYY-MM, such as 2026-11."


@pytest.fixture
def rolled_up() -> None:
    accounting.AccountingCursor.objects.update_or_create(
        name=accounting.CURSOR_NAME, defaults={"rolled_until": datetime(2026, 12, 1, tzinfo=UTC)})


@pytest.mark.parametrize("month", ["2026-1", "+2026-11", "２０２６-１１", "2026-11-01", "2026 -11"])
def test_the_page_names_a_month_it_cannot_read_and_offers_no_link_the_api_refuses(client_for, rolled_up, month):
    client = client_for("finn")
    response = client.get("/showback/", {"month": month})

    assert response.status_code == 200
    assert f"month: '{month}' {NOT_A_MONTH}" in response.context["errors"], response.context["errors"]
    assert response.context["month"] == ""
    # The links it offers are the period it shows, and the API answers them.
    for link in (response.context["csv_url"], response.context["json_url"]):
        assert "month=" not in link, link
        assert client.get(link).status_code == 200, link


@pytest.mark.parametrize("month", ["2026-1", "２０２６-１１", "2026-13"])
def test_the_api_refuses_a_malformed_month_in_words(client_for, month):
    response = client_for("finn").get("/api/v1/showback/", {"month": month})

    assert response.status_code == 400, response.content[:300]
    assert response.json()["errors"] == {"month": [f"'{month}' {NOT_A_MONTH}"]}


def test_a_well_formed_month_is_one_report_on_the_page_and_in_its_csv(client_for, rolled_up):
    client = client_for("finn")
    response = client.get("/showback/", {"month": "2026-11"})

    assert response.context["errors"] == []
    assert response.context["month"] == "2026-11"
    csv = client.get(response.context["csv_url"])
    assert csv.status_code == 200
    assert 'filename="showback-team-2026-11.csv"' in csv["Content-Disposition"]
