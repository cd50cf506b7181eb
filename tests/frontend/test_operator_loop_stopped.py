"""The scheduling loop stopped a few minutes ago and has not come back: the overview must say so.

Found on the operator's night drill (the loop's lease taken from it for three minutes): the
overview's charts ended at the last cycle's sample with nothing shaded, since a grey band was
drawn only between two samples, and an autoscaled time axis made the last cycle's values look
current; the tiles said "Last scheduling cycle: 01:46:45 UTC" with no age and no warning, so
"31 waiting, 9 running" read as now. The stretch from the last cycle to now is shaded like any
other stretch with no cycle, and the page says how long the loop has been silent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from frontend import figures
from tests.frontend.page_data import sample

CYCLE_CHARTS = ("queue", "stranded", "free_block", "oldest")


def _stored_until(last: datetime, minutes: int = 10) -> None:
    for i in range(minutes * 12):
        sample(last - timedelta(seconds=5 * i))


def test_operator_a_loop_silent_for_three_minutes_is_shaded_up_to_now_and_said(
    client_for: Callable[[str], Client], demo: Any,
) -> None:
    last = timezone.now() - timedelta(minutes=3)
    _stored_until(last)
    admin = client_for("admin")

    body = admin.get("/ui/overview.json?window=1h").json()

    for key in CYCLE_CHARTS:
        chart = body["charts"][key]
        shapes = chart["figure"]["layout"].get("shapes", [])
        assert [s["x0"] for s in shapes] == [figures.ts(last)], key
        assert shapes[0]["x1"] >= figures.ts(timezone.now() - timedelta(seconds=30)), key
        assert "no scheduling cycle ran" in chart["caption"], key
    assert "3 min" in body["text"]["loop"] and "has not run" in body["text"]["loop"], body["text"]
    page = admin.get("/?window=1h").content.decode()
    assert body["text"]["loop"] in page


def test_operator_a_running_loop_shades_nothing_and_says_nothing(
    client_for: Callable[[str], Client], demo: Any,
) -> None:
    _stored_until(timezone.now() - timedelta(seconds=2))

    body = client_for("admin").get("/ui/overview.json?window=1h").json()

    for key in CYCLE_CHARTS:
        assert "shapes" not in body["charts"][key]["figure"]["layout"], key
    assert body["text"]["loop"] == ""


def test_operator_a_loop_silent_for_longer_than_the_window_is_said_not_called_none_yet(
    client_for: Callable[[str], Client], demo: Any,
) -> None:
    """The loop stopped two hours ago: the last hour holds no sample, and the tile said "Last
    scheduling cycle: none yet" with no warning, as on a fleet that never ran."""
    last = timezone.now() - timedelta(hours=2)
    _stored_until(last)

    text = client_for("admin").get("/ui/overview.json?window=1h").json()["text"]

    assert text["as_of"].startswith(figures.ts(last)[:16]), text
    assert "2.0 h" in text["loop"] and "has not run" in text["loop"], text
