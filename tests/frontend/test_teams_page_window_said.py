"""The teams page says the instants its window's figures cover, as the showback page says its
period: until 6 Dec it said only "last 7 days" in the picker, so a screenshot or a printout of
the page's waits and slowdowns could not be placed in time."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db

SPAN = re.compile(r'<span id="teams-window-span">(\S+ \S+) UTC to (\S+ \S+) UTC</span>')


def _said(page: str) -> tuple[datetime, datetime]:
    found = SPAN.search(page)
    assert found, "the page does not say the window's instants"
    start, end = (datetime.fromisoformat(t + "+00:00") for t in found.groups())
    return start, end


@pytest.mark.parametrize(("window", "span"), [("", timedelta(days=7)), ("24h", timedelta(hours=24)),
                                              ("30d", timedelta(days=30))])
def test_the_page_says_the_start_and_end_of_its_window_in_utc(client_for, window: str, span: timedelta) -> None:
    before = timezone.now()
    response = client_for("finn").get("/teams/" + (f"?window={window}" if window else ""))
    after = timezone.now()
    start, end = _said(response.content.decode())
    assert end - start == span
    assert before - timedelta(seconds=1) <= end <= after + timedelta(seconds=1)
    # the figures' own window, to the second: the waits and slowdowns are read over the same instants
    assert (response.context["since"], response.context["until"]) == (response.context["until"] - span,
                                                                      response.context["until"])
    label = response.context["window"].label
    assert f"cover the {label}:" in response.content.decode()


def test_a_member_reads_the_window_too(client_for) -> None:
    start, end = _said(client_for("alice").get("/teams/?window=6h").content.decode())
    assert end - start == timedelta(hours=6)


def test_the_fair_share_column_says_its_unit_and_half_life_not_the_window(client_for, settings) -> None:
    # "34.8 GPU-h" under "last 7 days" read as the window's usage: it is past usage fading with
    # the fair-share half-life (qm sshare says it so: "decayed, halved every 7.0 days")
    settings.QM = {**settings.QM, "FAIR_SHARE_HALF_LIFE_S": 3 * 86400}
    page = client_for("finn").get("/teams/?window=24h").content.decode()
    assert ('<small class="muted" id="fair-share-unit">(GPU-h, decayed: halved every 3.0 days; not the window\'s)'
            '</small>') in page
