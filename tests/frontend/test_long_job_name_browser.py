"""In Chromium: a job name as long as the API takes (128 characters) and with no space or hyphen
to break at (`sweep_lr3e5_bs512_…`, as sweeps name their runs) wraps where the pages show it.
It did not: the job page's title ran 1,800 px wide, so the page scrolled sideways on a phone, a
tablet and a 1,300 px desktop, and in the jobs list and the history the name's column pushed the
state (history: the outcome and cost) out of the table's box, to be scrolled to."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.services import accounting
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)
from tests.frontend.test_history_page import _ended, _held, _node

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = ("sweep_lr3e5_bs512_warmup2000_cosine_seed42_" * 3)[:128]

FITS = """(selector) => {
  const doc = document.documentElement;
  const box = document.querySelector(selector);
  return {page: doc.scrollWidth, viewport: doc.clientWidth,
          box: box ? box.scrollWidth : null, boxVisible: box ? box.clientWidth : null};
}"""


def test_a_long_name_without_spaces_wraps_on_the_job_page_and_in_the_lists(session: Any, submit_as: Any) -> None:  # noqa: F811
    assert len(LONG) == 128
    job = submit_as("alice", name=LONG, gpus=1)
    now = timezone.now().replace(microsecond=0)
    ended = _ended("vision", LONG, now - timedelta(hours=1), 30, user="alice", gpus=1)
    _held(ended, _node("h100-01"), now - timedelta(hours=1), now - timedelta(minutes=30), gpus=1)
    accounting.catch_up(now)

    alice = session("alice")
    page = alice.page
    for width in (390, 820, 1400):
        page.set_viewport_size({"width": width, "height": 900})
        alice.open(f"/jobs/{job.pk}/")
        fits = page.evaluate(FITS, "#job-title")
        assert fits["page"] <= fits["viewport"], (width, fits)
        assert LONG in page.locator("#job-title").inner_text()

    page.set_viewport_size({"width": 1400, "height": 900})
    # On a desktop the lists' tables fit their boxes: the state and cost columns are in view.
    alice.open("/jobs/")
    fits = page.evaluate(FITS, "table.jobs")
    assert fits["page"] <= fits["viewport"], fits
    box = page.evaluate("() => { const b = document.querySelector('table.jobs').parentElement; "
                        "return [b.scrollWidth, b.clientWidth]; }")
    assert box[0] <= box[1], box
    alice.open("/history/")
    box = page.evaluate("() => { const b = document.querySelector('#history-table').parentElement; "
                        "return [b.scrollWidth, b.clientWidth]; }")
    assert box[0] <= box[1], box
    assert alice.errors == []
