"""In Chromium, every page the navigation reaches, walked as an admin and as a member (alice): the
top bar's links, the user's own settings, and from the Jobs and Nodes pages their first job and
node. Each page keeps the rules a screen reader and a keyboard need, checked in the page itself:

- `<html lang>`;
- one `<h1>` (Playwright's role query, the accessibility tree's headings of level 1);
- one `main` landmark and a `navigation` landmark (role queries too);
- every form control (input, select, textarea, button) named by a label, `aria-label` or
  `aria-labelledby` (a button by its words too), never by its placeholder or title alone;
- every image named (`alt`, `aria-label`), an SVG outside a chart named or hidden from the
  tree, and every drawn chart an image named by its title and described by an element whose
  words say its numbers;
- every table's header cells `th` with a scope, and every table with one;
- every control and link, given the keyboard's focus, drawn with a visible ring (an outline or
  a box shadow).

tests/frontend/test_pages_accessible_browser.py checks more (contrast, Tab order, live regions)
on a fixed list of pages; this one walks what the navigation offers each role, so a page added
to the nav is checked without being listed. The Admin link leads to Django's own admin, checked
by tests/frontend/test_admin_accessible_browser.py with the markup Django keeps its way
(docs/dashboards.md, Accessibility, The admin); its index has a navigation landmark since 7 Dec.

Run on 7 Dec before its fixes, it found on every page with a chart (overview, teams, nodes, a
job, a node) plotly's text-measuring SVG (`#js-plotly-tester`, off screen) and the icon inside
each of the chart's mode bar buttons: unnamed images in Chromium's accessibility tree, neither
named nor hidden (the mode bar's buttons themselves are named by their titles)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_pages_accessible_browser import keyboard_findings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: The rules, checked in the page: each names what breaks it.
RULES = r"""() => {
  const shown = el => {
    if (el.closest('[hidden], template')) return false;
    const s = getComputedStyle(el);
    if (s.display === 'none' || s.visibility === 'hidden') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 || r.height > 0 || el.closest('details:not([open])');
  };
  const say = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (el.name ? `[name=${el.name}]` : '') + (el.dataset && el.dataset.field ? `[data-field=${el.dataset.field}]` : '')
    + ' "' + (el.innerText || el.value || '').replace(/\s+/g, ' ').trim().slice(0, 30) + '"';
  const words = el => (el ? (el.innerText || el.textContent || '') : '').replace(/\s+/g, ' ').trim();
  const labelledBy = el => (el.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean)
    .map(id => words(document.getElementById(id))).join(' ').trim();
  const named = el => Boolean((el.getAttribute('aria-label') || '').trim() || labelledBy(el)
    || [...(el.labels || [])].some(l => words(l)));
  const out = {lang: document.documentElement.getAttribute('lang') || '', unnamed: [], images: [], charts: [],
               headers: [], headless: []};

  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea, button')) {
    if (el.closest('.js-plotly-plot, template')) continue;  // (inside a chart: the chart's image, named as one below)
    const button = el.tagName === 'BUTTON' || ['submit', 'button', 'reset'].includes(el.type);
    if (!(named(el) || (button && (words(el) || el.value)))) out.unnamed.push(say(el));
  }
  for (const img of document.querySelectorAll('img, [role=img]:not(.js-plotly-plot)')) {
    if (img.getAttribute('aria-hidden') === 'true') continue;
    if (!((img.getAttribute('alt') || '').trim() || (img.getAttribute('aria-label') || '').trim() || labelledBy(img))) out.images.push(say(img));
  }
  for (const svg of document.querySelectorAll('svg')) {
    // (a chart's own SVG is its image's inside: named by the chart; its mode bar's icons are not)
    if (svg.closest('[aria-hidden=true]') || !shown(svg) || (svg.closest('.js-plotly-plot') && !svg.closest('.modebar'))) continue;
    if (!(svg.getAttribute('aria-label') || svg.querySelector(':scope > title') || labelledBy(svg))) out.images.push('svg ' + svg.outerHTML.slice(0, 60));
  }
  for (const box of document.querySelectorAll('[data-chart]')) {
    if (box.dataset.rendered !== 'plot') continue;
    const plot = box.querySelector('.js-plotly-plot');
    const title = plot.layout && plot.layout.title && plot.layout.title.text;
    if (plot.getAttribute('role') !== 'img' || !(plot.getAttribute('aria-label') || '').includes(title)) out.charts.push(`${box.dataset.chart}: not an image named by its title`);
    const described = (plot.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean).map(id => document.getElementById(id)).filter(Boolean);
    // (a chart that draws no number, a series with no value yet, says so in words: "—")
    const drawsNumbers = plot.data.some(t => ['x', 'y', 'z'].some(k => Array.isArray(t[k]) && t[k].flat().some(v => typeof v === 'number')));
    if (!described.some(d => (drawsNumbers ? /\d/ : /\S/).test(d.textContent))) out.charts.push(`${box.dataset.chart}: described by nothing that says its numbers`);
    // (plotly's own SVG and mode bar are not what a screen reader reads: the image's name and description are)
    if (plot.querySelector('svg.main-svg') && !plot.querySelector('svg.main-svg').closest('[aria-hidden=true], [role=img]')) out.charts.push(`${box.dataset.chart}: plotly's SVG in the tree`);
  }
  for (const th of document.querySelectorAll('th')) {
    if (!['col', 'row', 'colgroup', 'rowgroup'].includes(th.getAttribute('scope'))) out.headers.push(say(th));
  }
  for (const table of document.querySelectorAll('table')) {
    if (!table.closest('template, [hidden]') && !table.querySelector('th')) out.headless.push(say(table));
  }
  out.unnamed = out.unnamed.slice(0, 8); out.headers = out.headers.slice(0, 5); out.images = out.images.slice(0, 5);
  return out;
}"""

#: Each control and link the keyboard can reach, focused in turn (after a Tab, so the browser is
#: in the keyboard's mode): those drawn with no ring.
RINGLESS = r"""() => {
  const ringless = [];
  const all = [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]:not([tabindex="-1"])')]
    .filter(el => !el.disabled && !el.closest('[hidden], template, .js-plotly-plot') && el.getClientRects().length
                  && getComputedStyle(el).visibility !== 'hidden'
                  && !(el.closest('details:not([open])') && !el.closest('details:not([open])').querySelector(':scope > summary').contains(el)));
  for (const el of all) {
    el.focus({preventScroll: true});
    if (document.activeElement !== el) continue;
    const s = getComputedStyle(el);
    const ring = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || (s.boxShadow && s.boxShadow !== 'none');
    if (!ring) ringless.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' "' + (el.innerText || el.value || el.getAttribute('aria-label') || '').replace(/\s+/g, ' ').trim().slice(0, 30) + '"');
  }
  document.activeElement && document.activeElement.blur();
  return {count: all.length, ringless: ringless.slice(0, 6)};
}"""


def _findings(page: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    h1 = page.get_by_role("heading", level=1).count()
    if h1 != 1:
        found["h1"] = page.get_by_role("heading", level=1).all_inner_texts()
    if page.get_by_role("main").count() != 1:
        found["main landmarks"] = page.get_by_role("main").count()
    if page.get_by_role("navigation").count() < 1:
        found["navigation landmarks"] = 0
    seen = page.evaluate(RULES)
    if not seen["lang"]:
        found["lang"] = "no lang on <html>"
    for key in ("unnamed", "images", "charts", "headers", "headless"):
        if seen[key]:
            found[key] = seen[key]
    page.keyboard.press("Tab")
    focus = page.evaluate(RINGLESS)
    if focus["ringless"]:
        found["no focus ring"] = focus["ringless"]
    return found


#: The what-if page's replay as it stands: its region's name (the region role Chromium gives a
#: section only when it is named), the progress bar's name while it runs, and what the page's
#: polite status said as the replay's state changed under the live updates.
REPLAY_REGION = r"""() => {
  const area = document.getElementById('what-if-result');
  const named = el => {
    const by = (el.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean)
      .map(id => document.getElementById(id)).filter(Boolean).map(e => e.textContent.trim()).join(' ');
    return ((el.getAttribute('aria-label') || '').trim() || by);
  };
  return {state: area && area.dataset.replay, name: area ? named(area) : '',
          progress: [...document.querySelectorAll('#what-if-area progress')].map(named),
          said: (window.__replaySaid || []).filter(Boolean), updates: Number(document.body.dataset.liveUpdates || '0')};
}"""

#: Everything the polite status says from now on (a MutationObserver on #live-said).
HEAR_STATUS = r"""() => {
  window.__replaySaid = [];
  const status = document.getElementById('live-said');
  new MutationObserver(() => window.__replaySaid.push(status.textContent.trim()))
    .observe(status, {childList: true, characterData: true, subtree: true});
}"""


def _replay_findings(tab: Any) -> dict[str, Any]:
    """Replay pressed on the what-if page (a POST, then the page that follows it to its
    comparison): the page's rules again with the comparison and its charts in it, the results a
    region named by its heading, its running state's progress named, its arrival said in the
    page's polite status (when it arrived by a live update), and every control of it reached by Tab."""
    page = tab.page
    with page.expect_navigation(url=lambda url: "key=" in url):
        page.click("#what-if-form button[type=submit]")
    page.evaluate(HEAR_STATUS)
    first = page.evaluate(REPLAY_REGION)
    found: dict[str, Any] = {}
    if first["state"] == "running" and (not first["progress"] or not all(first["progress"])):
        found["progress unnamed"] = first["progress"]
    page.wait_for_selector("[data-replay=done]", timeout=90_000)
    page.wait_for_function("[...document.querySelectorAll('[data-chart]')].every(b => b.dataset.rendered)", timeout=10_000)
    found.update(_findings(page))
    done = page.evaluate(REPLAY_REGION)
    if not done["name"] or page.get_by_role("region", name=done["name"]).count() != 1:
        found["results region unnamed"] = done["name"]
    if first["state"] == "running" and not any("done" in said for said in done["said"]):
        found["results arrived unsaid"] = done["said"]
    keyboard, tabbed = keyboard_findings(page)
    found.update(keyboard)
    results_tabbable = page.evaluate("""() => [...document.querySelectorAll(['a[href]', 'button', 'input', 'select', 'summary',
        '[tabindex]:not([tabindex="-1"])'].map(s => '#what-if-area ' + s).join(', '))]
        .filter(el => !el.closest('[hidden], .chart') && el.getClientRects().length).length""")
    if not results_tabbable:
        found["results: nothing to reach by Tab"] = 0
    found["(seen)"] = {"first state": first["state"], "reached by Tab": tabbed["count"]}
    return found


def _nav_paths(page: Any) -> list[str]:
    """The top bar's links and the user's own (their settings), in order, each once."""
    hrefs = page.eval_on_selector_all("header.topbar nav a[href], header.topbar a.user[href]", "as => as.map(a => a.href)")
    return list(dict.fromkeys(urlsplit(h).path + (f"?{urlsplit(h).query}" if urlsplit(h).query else "") for h in hrefs))


def _first_detail(page: Any, selector: str) -> str | None:
    href = page.eval_on_selector_all(selector, "as => as.length ? as[0].getAttribute('href') : null")
    return str(href) if href else None


def test_every_page_the_nav_reaches_has_lang_one_h1_landmarks_named_controls_text_alternatives_scoped_headers_and_a_focus_ring(
        session: Any) -> None:  # noqa: F811
    for name, gpus in [("runs-now", 8), ("waits-for-room", 96)]:
        submit(user("alice"), SubmitRequest(name=name, gpus=gpus, gpus_per_node=8))
    run_cycle("test")
    report: dict[str, Any] = {}
    seen: list[dict[str, Any]] = []
    for who in ("admin", "alice"):
        tab = session(who)
        tab.open("/")
        to_visit = _nav_paths(tab.page)
        assert "/" in to_visit and "/nodes/" in to_visit, to_visit
        visited: list[str] = []
        while to_visit:
            path = to_visit.pop(0)
            if path in visited:
                continue
            visited.append(path)
            if path.startswith("/admin/"):
                continue  # Django's own pages: tests/frontend/test_admin_accessible_browser.py, with what Django does its way
            tab.open(path)
            found = _findings(tab.page)
            if found:
                report[f"{who} {path}"] = found
            if path.startswith("/what-if/") and who == "admin":  # (one replay: it takes seconds)
                replayed = _replay_findings(tab)
                seen.append(replayed.pop("(seen)"))
                if replayed:
                    report[f"{who} {path} after Replay"] = replayed
            if path == "/jobs/":
                to_visit.append(_first_detail(tab.page, "table.jobs tbody a[href^='/jobs/']") or "")
            if path == "/nodes/":
                to_visit.append(_first_detail(tab.page, "table.nodes tbody a[href^='/nodes/']") or "")
            to_visit = [p for p in to_visit if p]
        assert any(p.startswith("/jobs/") and p != "/jobs/" for p in visited), visited
        assert any(p.startswith("/nodes/") and p != "/nodes/" for p in visited), visited
    assert len(seen) == 1, "the what-if page's Replay was not pressed"
    assert not report, "accessibility rules broken:\n" + "\n".join(
        f"{where}:\n" + "\n".join(f"  {k}: {v}" for k, v in found.items()) for where, found in report.items())
