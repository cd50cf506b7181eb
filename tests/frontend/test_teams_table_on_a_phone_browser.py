"""In Chromium, on a phone (360 and 400 px wide) and a laptop (1,280 px): the Teams table shows every
team's fair-share usage without scrolling sideways, and a GPU type's name never breaks.

Found walking the demo on a phone (7 Dec): the six-column table in a 380 px box read its quotas
as "A100-" / "40GB: 16 / …", and the Fair-share usage column, what `qm sshare` users look for,
sat off screen to the right of Cohort and Default class, with nothing to say it was there. On a
phone the table keeps the team, its quotas, its dominant share and its fair-share usage; the
cohort and default class come back on a wider screen (`qm quotas` names the cohort too)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)
from tests.frontend.test_times_and_nodes_break_whole_browser import LINES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The table's scroll box, the headings drawn, and each row's fair-share cell's right edge against the box's.
MEASURE = """() => {
  const box = document.querySelector('table.teams').closest('.table-scroll');
  const right = box.getBoundingClientRect().right;
  const heads = [...document.querySelectorAll('table.teams thead th')].filter(th => th.offsetParent !== null)
    .map(th => th.firstChild.textContent.trim());
  const usage = [...document.querySelectorAll('table.teams tbody tr')].map(tr =>
    tr.lastElementChild.getBoundingClientRect().right <= right + 0.5);
  return {scroll: box.scrollWidth, client: box.clientWidth, heads, usage};
}"""


@pytest.mark.parametrize("width, heads", [
    (360, ["Team", "Quota", "Dominant share", "Fair-share usage"]),
    (400, ["Team", "Quota", "Dominant share", "Fair-share usage"]),
    (1280, ["Team", "Cohort", "Default class", "Quota", "Dominant share", "Fair-share usage"]),
])
def test_fair_share_usage_is_on_screen_and_gpu_types_whole(session: Any, width: int, heads: list[str]) -> None:  # noqa: F811
    admin = session("admin")
    admin.page.set_viewport_size({"width": width, "height": 900})
    admin.open("/teams/")

    seen = admin.page.evaluate(MEASURE)
    quotas = admin.page.evaluate(LINES, "table.teams tbody tr > td:nth-child(4)")
    admin.screenshot(f"teams-table-{width}")

    assert [head.split(" (")[0] for head in seen["heads"]] == heads, seen
    assert len(seen["usage"]) >= 3 and all(seen["usage"]), seen
    assert seen["scroll"] <= seen["client"], seen
    text = ["".join(lines) for lines in quotas]
    assert any("A100-40GB:" in cell for cell in text) and any("H100-80GB:" in cell for cell in text), quotas
    # a line that ends at a hyphen has broken a type's name (A100- / 40GB)
    assert not [lines for lines in quotas if any(line.endswith("-") for line in lines[:-1])], quotas
    assert admin.errors == []
