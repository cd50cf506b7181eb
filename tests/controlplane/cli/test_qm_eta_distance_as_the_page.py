"""How far off a waiting job's ETA is, `qm list`'s START and `qm explain`'s latest start say it
as the job page and the jobs page do: to the nearest minute. Found by the researcher audit (7 Dec):
of one ETA 9 min 51 s away, at the same moment, the jobs page said "ETA in 10 min" and `qm list`
"in 9m" (qm cut the seconds off, the page rounds them)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.cli.output import human_distance
from frontend.templatetags.qm import duration
from tests.controlplane import factories as f


@pytest.mark.parametrize("seconds", [125, 591, 599.6, 1799, 3629, 7170])
def test_an_eta_minutes_away_is_the_pages_number_of_minutes(seconds: float) -> None:
    page = re.fullmatch(r"(\d+) min", duration(seconds))
    assert page, duration(seconds)
    said = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?", human_distance(seconds))
    assert said, human_distance(seconds)
    assert int(said.group(1) or 0) * 60 + int(said.group(2) or 0) == int(page.group(1)), (seconds, human_distance(seconds))


def test_under_a_minute_and_past_a_day() -> None:
    assert (human_distance(42.4), human_distance(59.7), human_distance(86400 + 3 * 3600 + 1790)) == ("42s", "1m", "1d3h")


@pytest.mark.slow
def test_qm_list_and_explain_say_the_minutes_the_page_says(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="soon", pending_code="QuotaExceeded", queue_position=1,
                     eta=timezone.now() + timedelta(minutes=9, seconds=51))

    listed = alice_qm("list").out
    row = next(line for line in listed.splitlines() if re.match(rf"^\s*{job.pk}\s", line))
    assert " in 10m " in row, listed
    assert re.search(r"^  latest start:\s+\S+ \S+ UTC \(in 10m\)$", alice_qm("explain", str(job.pk)).out, re.M)


@pytest.mark.slow
def test_qm_status_says_how_long_ago_the_last_checkpoint_was_as_the_page(alice_qm, fleet) -> None:
    """`qm status` said "(17m ago)" of a checkpoint 17 min 40 s old, its page "18 min ago"."""
    now = timezone.now()
    job = f.make_job(fleet.ml, name="saved", state="running", started_at=now - timedelta(hours=1),
                     last_checkpoint_at=now - timedelta(minutes=17, seconds=40), steps=10)

    assert re.search(r"^last checkpoint:\s+\S+ \S+ UTC \(18m ago\)$", alice_qm("status", str(job.pk)).out, re.M)
    assert duration(timedelta(minutes=17, seconds=40)) == "18 min"  # the page's words of it
