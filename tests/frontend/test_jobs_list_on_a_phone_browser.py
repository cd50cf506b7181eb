"""In Chromium, on a phone (400 px wide): the Jobs list shows each job's state without scrolling
sideways. Its eight columns made a 626 px table in a 380 px box, and the State column, what a
researcher opens the list for (Pending, its reason, its place in line and ETA), sat off screen to
the right of Team and Priority, with nothing to say it was there. On a phone the list keeps the
job, its name, shape, state and age; the team, priority class and submitter stay on the job's page
(and the filters) and come back on a wider screen.

The jobs' ids are a busy fleet's seven digits (#1234567), whatever ran before on the test's
database: CI's worker had made some 100,000 jobs by then, its six-digit ids pushed the table 7 px
past its box, and run alone the test's ids were one digit and passed (7 Dec)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from controlplane.models import Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The table's scroll box, and each row's State cell's right edge against the box's.
MEASURE = """() => {
  const box = document.querySelector('[data-live-rows-table]');
  const right = box.getBoundingClientRect().right;
  const heads = [...document.querySelectorAll('table.jobs thead th')].filter(th => th.offsetParent !== null)
    .map(th => th.textContent.trim());
  const states = [...document.querySelectorAll('table.jobs tbody tr')].map(tr => {
    const cell = tr.querySelector('[data-live-html^=job-state-]');
    return cell.getBoundingClientRect().right <= right + 0.5;
  });
  return {scroll: box.scrollWidth, client: box.clientWidth, heads, states};
}"""


@pytest.mark.parametrize("width, heads", [
    (400, ["Job", "Name", "Shape", "State", "Submitted"]),
    (1280, ["Job", "Name", "Team", "Priority", "Shape", "State", "Submitted", "By"]),
])
def test_each_jobs_state_is_on_screen(session: Any, width: int, heads: list[str]) -> None:  # noqa: F811
    alice = user("alice")
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), 1234566)", [Job._meta.db_table])
    submit(alice, SubmitRequest(name="pretrain-gang-with-a-long-name", gpus=32, gpus_per_node=8, project="detector"))
    submit(alice, SubmitRequest(name="sweep", gpus=1, array="0-2"))
    tab = session("alice")
    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open("/jobs/")

    seen = tab.page.evaluate(MEASURE)

    assert seen["heads"] == heads
    assert seen["states"] == [True] * 4
    assert seen["scroll"] <= seen["client"], seen
    assert tab.errors == []
