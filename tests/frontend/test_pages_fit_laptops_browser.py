"""In Chromium, on a laptop (1,280 and 1,000 px wide), signed in as an admin: every page of the
product and every Quartermaster list in the Django admin fits the screen. Neither the page nor
any box on it (a table's scroll box, the admin's list) scrolls sideways, the top bar keeps its
links on one line, and no date, clock, node, team or project name or GPU type is broken across two
lines (the admin's event messages included since 6 Dec: a node's name in one broke at its hyphen,
and on /teams/ at 1,000 px a team's read "recommendation-" / "systems").

Found walking the demo (5 Dec), and measured by this test before the fix: at 1,000 px a job's
Runs table was 1,171 px wide in a 926 px box (a gang's 1,079), the history's 1,162 in 960, the
showback's 966 in 926, the top bar put Admin on a second line, and a job's events broke
"h100-" / "03:0,1,…"; in the admin every list with filters had a 431 px box (quota 742, jobs
780, events 719, nodes 656), the priority classes' 722 in 661. At 1,280 px the quota list was
717 px in 631, the job list 729, the events' 666 and the nodes' 635, and once its cells wrapped
the quota list read "A100-" / "40GB", the allocations "2026-12-" / "05"."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import Job, Node, Project, Team
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.job_runs_story import bind_at, idle_nodes, preempted_then_succeeded
from tests.frontend.test_admin_lists_fit_browser import LISTS, _awkward_quotas
from tests.frontend.test_browser_pages import browser, fill_the_fleet, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 1000)

# Every box that scrolls sideways (the page itself, the body, and any element whose overflow-x
# lets it scroll: a table's .table-scroll, the admin's list), the top bar's links' lines, and each
# date, clock, GPU type, GPU-hours unit or one of `names` (nodes', teams', projects') in a table
# cell, a fact or a time, with the lines its characters are drawn on (their boxes' tops).
MEASURE = r"""(names) => {
  const wide = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  for (const el of [document.documentElement, document.body]) {
    if (el.scrollWidth > el.clientWidth) wide.push([name(el), el.scrollWidth, el.clientWidth]);
  }
  for (const el of document.body.querySelectorAll('*')) {
    const overflow = getComputedStyle(el).overflowX;
    if ((overflow === 'auto' || overflow === 'scroll') && el.scrollWidth > el.clientWidth) {
      const inner = el.querySelector('table');
      wide.push([name(el) + (inner ? ' > ' + name(inner) : ''), el.scrollWidth, el.clientWidth]);
    }
  }
  const tops = sel => [...new Set([...document.querySelectorAll(sel)].map(
    a => Math.round(a.getBoundingClientRect().top)))];
  const topbar = tops('.topbar nav a');
  const adminHeader = tops('#header #site-name, #header #user-tools');

  const WORDS = new RegExp(['\\d{4}-\\d{2}-\\d{2}', '\\d{1,2}:\\d{2}(:\\d{2})?', '\\b[A-Z]\\d+-\\d+GB\\b', 'GPU-h(ours)?',
                             ...names.map(n => '\\b' + n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '\\b')].join('|'), 'g');
  const broken = [];
  for (const cell of document.querySelectorAll('td, th, dd, time, .nobr, .tile .value')) {
    let text = '';
    const line = [];
    let top = null, at = -1;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const box = range.getClientRects()[0];
        if (box && box.width && (top === null || box.top > top + 2)) { at += 1; top = box.top; }
        text += node.data[i];
        line.push(box && box.width ? at : null);
      }
    }
    for (const m of text.matchAll(WORDS)) {
      const on = new Set(line.slice(m.index, m.index + m[0].length).filter(l => l !== null));
      if (on.size > 1) broken.push([name(cell), m[0], text.replace(/\s+/g, ' ').trim().slice(0, 80)]);
    }
  }
  return {wide, topbar, adminHeader, broken};
}"""


def _the_widest_rows() -> tuple[Job, Job, Job, Node]:
    """A job preempted once and run again (two runs, lost work, in the history), a gang on three
    nodes (its Runs' Where names them all), a busy fleet around them, the quota list's longest words."""
    now = timezone.now()
    twice = submit(user("alice"), SubmitRequest(name="twice-run", gpus=2)).job
    first, second, *gang_nodes = idle_nodes(4, "H100-80GB")
    preempted_then_succeeded(twice, first, second, now=now)
    gang = submit(user("alice"), SubmitRequest(name="gang-run", gpus=24, gpus_per_node=8)).job
    bind_at(gang, [(node, range(8), "") for node in (*gang_nodes, first)], at=now - timezone.timedelta(minutes=30))
    submit(user("alice"), SubmitRequest(name="sweep", gpus=1, array="0-2"))  # an array's summary page
    fill_the_fleet()  # its cycle places the other teams' jobs around them; accounting caught up
    running = Job.objects.filter(state="running", name__startswith="vision-").order_by("pk").first()
    assert running is not None
    _awkward_quotas()
    return running, twice, gang, first


def test_every_page_and_admin_list_fits_a_laptop(session: Any) -> None:  # noqa: F811
    running, twice, gang, node = _the_widest_rows()
    names = [*Node.objects.values_list("name", flat=True), *Team.objects.values_list("name", flat=True),
             *Project.objects.values_list("name", flat=True)]
    array_id = Job.objects.filter(name__startswith="sweep").exclude(array_id=None).values_list("array_id", flat=True)[0]
    pages = ("/", "/jobs/", f"/jobs/?array_id={array_id}", f"/jobs/{running.pk}/", f"/jobs/{twice.pk}/", f"/jobs/{gang.pk}/", "/history/",
             "/teams/", "/showback/?window=24h", "/showback/?window=24h&group_by=project", "/nodes/",
             f"/nodes/{node.name}/", "/what-if/", "/notifications/")
    admin = session("admin")
    page = admin.page
    misfits: dict[str, Any] = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for path in pages:
            admin.open(path)
            if path == "/what-if/":
                page.click(".quota-table summary")
            seen = page.evaluate(MEASURE, names)
            if seen["wide"] or seen["broken"] or len(seen["topbar"]) != 1:
                misfits[f"{width} {path}"] = seen
            if path == "/":  # the charts' figures as a live update writes them (qm.js writeFigures)
                page.evaluate("() => QM.poll()")
                seen = page.evaluate(MEASURE, names)
                if seen["wide"] or seen["broken"]:
                    misfits[f"{width} {path} (live)"] = seen
            shown = "jobs-array" if "array_id" in path else path.strip("/").replace("/", "-").replace("?", "-")
            admin.screenshot(f"laptop-{width}-{shown or 'overview'}")
        for name in ("", *LISTS):
            page.goto(f"{admin.base}/admin/{name}{'/' if name else ''}")
            seen = page.evaluate(MEASURE, names)
            assert seen["adminHeader"], f"/admin/{name}: no header"
            if seen["wide"] or seen["broken"]:
                misfits[f"{width} /admin/{name}"] = seen
            if name in ("controlplane/quota", "controlplane/job"):
                admin.screenshot(f"laptop-{width}-admin-{name.split('/')[1]}")
    report = {where: {k: v for k, v in seen.items() if k in ("wide", "broken") and v}
              | ({"topbar lines": seen["topbar"]} if len(seen["topbar"]) > 1 else {})
              for where, seen in misfits.items()}
    assert not report, "pages that scroll sideways or break a word at 1,280 / 1,000 px:\n" + "\n".join(
        f"{where}: {what}" for where, what in report.items())
