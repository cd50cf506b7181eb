"""A window is read alike on every surface that takes one, in any case (finance review, 7 Dec):
the API, the showback page and `qm showback --window` (which passes it to the API) took `7D` and
`24H` (the unit was read in any case) but refused `TODAY` and `Yesterday` (the names were not),
and the overview, teams and node pages refused `24H`. Now every one reads the names and units in
any case; a window none reads is a 400 naming `window` and listing what is taken (the pages:
said, and the default shown)."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.cli.main import build_parser
from tests.frontend.test_window_names_said import alice  # noqa: F401 (fixture: ml's member, one H100 node)

pytestmark = pytest.mark.django_db

SPELLINGS = [("today", "today"), ("TODAY", "today"), ("Today", "today"), ("YESTERDAY", "yesterday"),
             ("7D", "7d"), ("24H", "24h"), ("30M", "30m"), ("2W", "2w")]


@pytest.mark.parametrize("given, read", SPELLINGS)
def test_the_apis_read_a_window_in_any_case(alice: Client, given: str, read: str) -> None:  # noqa: F811
    showback = alice.get("/api/v1/showback/", {"window": given})
    assert showback.status_code == 200, showback.content
    assert showback.json()["requestedWindow"] == read
    utilization = alice.get("/api/v1/metrics/utilization/", {"window": given, "bucket": "hour"})
    assert utilization.status_code == 200, utilization.content


@pytest.mark.parametrize("path", ["/api/v1/showback/", "/api/v1/metrics/utilization/"])
def test_a_window_no_surface_reads_is_a_400_listing_what_is(alice: Client, path: str) -> None:  # noqa: F811
    response = alice.get(path, {"window": "tomorrow"})
    assert response.status_code == 400
    said = " ".join(response.json()["errors"]["window"])
    for taken in ("m, h, d or w", "today", "yesterday", "start,end", "any case"):
        assert taken in said, said


@pytest.mark.parametrize("given, read", [("TODAY", "today"), ("Yesterday", "yesterday"), ("7D", "last 7 days")])
def test_the_showback_page_reads_a_window_in_any_case(alice: Client, given: str, read: str) -> None:  # noqa: F811
    html = alice.get("/showback/", {"window": given}).content.decode()
    assert 'role="alert"' not in html, html
    assert f"selected>{read}</option>" in html


@pytest.mark.parametrize("path, given, read", [("/", "24H", "last 24 hours"), ("/teams/", "7D", "last 7 days"),
                                               ("/nodes/h100-01/", "6H", "last 6 hours")])
def test_the_pages_read_their_windows_in_any_case(alice: Client, path: str, given: str, read: str) -> None:  # noqa: F811
    html = alice.get(path, {"window": given}).content.decode()
    assert 'id="window-error"' not in html
    assert f"selected>{read}</option>" in html


def test_qm_showback_says_the_windows_it_takes() -> None:
    showback = build_parser()._subparsers._group_actions[0].choices["showback"]  # type: ignore[union-attr]
    window = next(a for a in showback._actions if "--window" in a.option_strings)
    assert all(word in window.help for word in ("today", "yesterday", "start,end", "any case")), window.help
