"""In Chromium: a job's command with no space to break at for hundreds of characters (a long
config path, a sweep's joined flags) wraps in the job page's Shape facts, as its environment's
values do. It did not: the command's <code> set the facts' column to its own width, so at
1,400 px the job page was 2,525 px wide (found walking the demo, 7 Dec) and every panel below
the title scrolled sideways with it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

COMMAND = "python train.py --config " + "/datasets/imagenet22k/shards/" * 12

MEASURE = """() => {
  const doc = document.documentElement;
  const code = [...document.querySelectorAll('dl.facts dd code')].find(c => c.textContent.startsWith('python'));
  const panel = code.closest('section, .panel') || document.body;
  return {page: doc.scrollWidth, viewport: doc.clientWidth,
          codeRight: code.getBoundingClientRect().right, panelRight: panel.getBoundingClientRect().right};
}"""


@pytest.mark.parametrize("width", [390, 1400], ids=["phone", "desktop"])
def test_a_long_command_without_spaces_wraps_on_the_job_page(session: Any, submit_as: Any, width: int) -> None:  # noqa: F811
    job = submit_as("alice", name="long-command", gpus=1, command=COMMAND,
                    env={"DATA_URL": "s3://bucket/" + "shard0000/" * 20})
    alice = session("alice")
    alice.page.set_viewport_size({"width": width, "height": 900})
    alice.open(f"/jobs/{job.pk}/")
    fits = alice.page.evaluate(MEASURE)
    assert fits["page"] <= fits["viewport"], fits
    assert fits["codeRight"] <= fits["panelRight"], fits
    assert alice.page.locator("dl.facts dd code", has_text="python train.py").inner_text() == COMMAND
    assert alice.errors == []
