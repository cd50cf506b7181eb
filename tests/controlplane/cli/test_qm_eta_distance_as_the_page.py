"""How far off a time is (an ETA, a checkpoint, a likely start that passed, the first ETA a job is
past), qm says as the job page and the jobs page do, by one rule (services/distance_text): "42 s",
"10 min", "3.0 h", "3.5 days". Found by the researcher audits (7 Dec): of one ETA 9 min 51 s away
the jobs page said "ETA in 10 min" and `qm list` "in 9m"; of one likely start that passed 3 h ago
the job page said "(3.0 h ago)" and `qm explain` "(3h ago)"."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.template import Context, Template
from django.utils import timezone

from controlplane.cli import output
from controlplane.cli.output import human_distance
from tests.controlplane import factories as f

#: Spans either side of each unit's edge: seconds, minutes, hours and days, and the roundings in
#: each (59.7 s, 9 min 51 s, 2 h 29 min, 2 h 59 min, 2 d 23 h).
SPANS = [0, 1, 42.4, 59.7, 119, 119.6, 125, 591, 599.6, 1799, 3629, 7170, 7200, 8940, 10800 - 59, 10800, 86399,
         100000, 3 * 86400 - 3600, 3 * 86400, 10 * 86400 + 7 * 3600]


def _page(template: str, **values: Any) -> str:
    """What the pages' templates render (the `qm` template library's filters)."""
    return Template("{% load qm %}" + template).render(Context(values))


@pytest.mark.parametrize("seconds", SPANS)
def test_a_distance_is_said_by_qm_as_the_page_renders_it(seconds: float) -> None:
    assert human_distance(seconds) == _page("{{ s|duration }}", s=seconds)
    assert human_distance(seconds) == _page("{{ s|duration }}", s=timedelta(seconds=seconds))


@pytest.mark.parametrize("seconds", [42, 600, 3 * 3600, 2 * 3600 + 1800, 5 * 86400])
def test_how_long_ago_is_said_by_qm_as_the_page_renders_it(seconds: int) -> None:
    at = timezone.now() - timedelta(seconds=seconds, milliseconds=300)
    assert f"{output.ago(at.isoformat())} ago" == _page("{{ at|age }}", at=at)


def test_the_words_of_each_unit() -> None:
    assert [human_distance(s) for s in (42.4, 59.7, 591, 10800, 8940, 3 * 86400)] == [
        "42 s", "60 s", "10 min", "3.0 h", "2.5 h", "3.0 days"]


def test_a_figure_rounded_up_to_the_next_unit_is_said_in_it() -> None:
    """The page said "120 min" of an ETA 1 h 59 min 40 s away (and qm, once it said the page's
    words, "in 120 min" of an ETA 2 h away a second after it was set), "120 s" of 119.6 s."""
    assert [human_distance(s) for s in (119.4, 119.6, 7170, 7199, 3 * 86400 - 100)] == [
        "119 s", "2 min", "2.0 h", "2.0 h", "3.0 days"]


@pytest.mark.slow
def test_qm_list_and_explain_say_the_minutes_the_page_says(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="soon", pending_code="QuotaExceeded", queue_position=1,
                     eta=timezone.now() + timedelta(minutes=9, seconds=51))

    listed = alice_qm("list").out
    row = next(line for line in listed.splitlines() if re.match(rf"^\s*{job.pk}\s", line))
    assert " in 10 min " in row, listed
    assert re.search(r"^  latest start:\s+\S+ \S+ UTC \(in 10 min\)$", alice_qm("explain", str(job.pk)).out, re.M)


@pytest.mark.slow
def test_qm_status_says_how_long_ago_the_last_checkpoint_was_as_the_page(alice_qm, fleet) -> None:
    """`qm status` said "(17m ago)" of a checkpoint 17 min 40 s old, its page "18 min ago"."""
    now = timezone.now()
    saved: datetime = now - timedelta(minutes=17, seconds=40)
    job = f.make_job(fleet.ml, name="saved", state="running", started_at=now - timedelta(hours=1),
                     last_checkpoint_at=saved, steps=10)

    assert re.search(r"^last checkpoint:\s+\S+ \S+ UTC \(18 min ago\)$", alice_qm("status", str(job.pk)).out, re.M)
    assert _page("{{ at|age }}", at=saved) == "18 min ago"
