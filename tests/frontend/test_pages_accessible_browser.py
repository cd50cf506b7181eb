"""In Chromium, as a researcher, a finance reader or an admin meets them with a keyboard or a
screen reader (docs/dashboards.md, Accessibility): every product page has a language, a title
naming it, one h1 and headings in order; every control and link has a name in Chromium's own
accessibility tree (CDP `Accessibility.getFullAXTree`); every table's header cells are `th` with a
scope, and a table whose first column names its row (the jobs, the history, a job's runs, a chart's
figures as a live update rewrites them, ...) heads each body row with it; every chart is an image named by its title and described by its figures in words, which
name every trace and say its largest value as drawn (after a live update too), each series
its legend hides at a click has a checkbox above it and "only" beside it, and a time series has
its time range buttons and its value at each point (tests/frontend/test_charts_by_keyboard_browser.py
works them), and every chart its axis range, opened on the overview so its fields and buttons are
named, measured and reached by Tab too (tests/frontend/test_chart_axes_by_keyboard_browser.py works
them); text reads at
least 4.5:1 against its background (3:1 when large), the state badges included, and so does the
text plotly draws in a chart's SVG (ticks, titles, legend, colour bar, and each trace's hover
label as the pointer brings it up), and every badge says its state in words; Tab reaches every control and link from "Skip to the page" on, with a
visible focus ring on each, and leaves the page (no trap); a live refresh keeps the keyboard's
focus, a job's new state is said once in a polite status, a refused field is described by its
error, and the notices an action writes are announced.

Run against the pages before 6 Dec, it reported on every page: contrast (white on the pending
badge 2.27:1, running 4.37, succeeded 4.20, cancelled 3.32; the muted grey 4.45 on the page and
4.22 in table heads; the primary buttons and the active tab 4.20, the footer's link 3.98); no `th`
with a scope; no chart with a text alternative, and every chart's figure unnamed; h1 then h3 on
the job and node pages; no "Skip to the page"; the nodes pages' action notice and maintenance
verdict silent; a refused GPUs field with no description; and on a waiting job's page the focus
dropped from Cancel to the page's start at a live refresh, its cancellation unannounced. Until
6 Dec a chart's own text was not measured: every hover label was its trace's colour with white or
#444 on it (white on the borrowed orange 3.58:1, #444 on pending's amber 4.30) and a bar's name
beside it in the bar's colour on white (pending 2.27:1, the quota's grey 2.07)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from controlplane.models import Job, Node
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from controlplane.services.transitions import cancel_job
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, browser, fill_the_fleet, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_pages_fit_laptops_browser import _the_widest_rows
from tests.frontend.test_pages_headings_and_tables import ROW_NAMED

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WHAT_IF = "/what-if/?days=1&placement=spread&backfill=on&preemption=on"

# Roles a control, link or image takes in Chromium's tree; each must have a name. ("image" is the
# role Chromium gives an SVG: until 7 Dec only "img" was asked, and plotly's text-measuring SVG and
# its mode bar's icons, unnamed images on every page with a chart, went unseen.)
NAMED_ROLES = {"textbox", "searchbox", "combobox", "listbox", "checkbox", "radio", "spinbutton", "button",
               "link", "slider", "switch", "menuitem", "tab", "img", "image", "figure", "DisclosureTriangle"}

# The tables whose first column names the row (tests/frontend/test_pages_headings_and_tables.py
# checks them in the server's HTML), the jobs, history and runs tables among them, and a chart's
# figures, which qm.js rewrites at each live update: in the browser, after the scripts ran.
ROW_NAMED_TABLES = ", ".join([*(f"table.{kind}" for kind in (*ROW_NAMED, "jobs", "runs")), ".chart-figures table"])

# Everything the page shows, read in the browser: headings, tables, badges, contrast, charts;
# `rowNamed`, the tables each of whose body rows must be headed by its first cell, th scope="row".
AUDIT = r"""async (rowNamed = '') => {
  const out = {};
  const shown = el => {
    if (el.closest('[hidden], template')) return false;
    const s = getComputedStyle(el);
    if (s.display === 'none' || s.visibility === 'hidden') return false;
    // Inside a closed <details>: only its summary is rendered.
    const d = el.closest('details:not([open])');
    if (d && !d.querySelector(':scope > summary').contains(el)) return false;
    return true;
  };
  const say = el => (el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\s+/).join('.') : '')
    + ' "' + (el.innerText || el.value || '').replace(/\s+/g, ' ').trim().slice(0, 40) + '"');

  out.lang = document.documentElement.getAttribute('lang') || '';
  out.title = document.title;
  const headings = [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')].filter(shown);
  out.h1 = headings.filter(h => h.tagName === 'H1').map(h => h.innerText.trim());
  out.skips = [];
  let level = 0;
  for (const h of headings) {
    const n = Number(h.tagName[1]);
    if (n > level + 1) out.skips.push(`h${level} → ${say(h)}`);
    level = n;
  }
  out.th = [...document.querySelectorAll('th')].filter(th => !['col', 'row', 'colgroup', 'rowgroup'].includes(th.getAttribute('scope'))).map(say).slice(0, 5);
  out.headless = [...document.querySelectorAll('table')].filter(t => shown(t) && !t.querySelector('th')).map(say);
  // (a closed chart's figures too: opened, a screen reader reads them; an empty table's one spanning sentence aside)
  out.rowless = (rowNamed ? [...document.querySelectorAll(rowNamed)] : []).filter(t => !t.closest('template'))
    .flatMap(t => [...t.tBodies].flatMap(b => [...b.rows]))
    .filter(r => r.cells.length && r.cells[0].colSpan === 1 && !(r.cells[0].tagName === 'TH' && r.cells[0].getAttribute('scope') === 'row'))
    .map(say).slice(0, 5);
  out.wordless = [...document.querySelectorAll('.badge')].filter(b => shown(b) && !b.innerText.trim()).map(say);

  // Contrast: each element with its own visible text, against the first opaque background under it.
  const rgb = c => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null; const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = ([r, g, b]) => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
  const background = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let colour = [255, 255, 255];
    for (const c of layers.reverse()) colour = over(c, colour);
    return colour;
  };
  out.contrast = [];
  const seen = new Set();
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('svg, .chart, script, style, template, noscript, option') || !shown(el)) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.data.trim());
    if (!own || el.closest('[disabled]')) continue;
    const s = getComputedStyle(el);
    let fg = rgb(s.color);
    if (!fg) continue;
    const opacity = [...function* () { for (let e = el; e; e = e.parentElement) yield Number(getComputedStyle(e).opacity); }()].reduce((a, b) => a * b, 1);
    const bg = background(el);
    fg = over([fg[0], fg[1], fg[2], fg[3] * opacity], bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    const key = s.color + s.backgroundColor + el.className;
    if (ratio < need && !seen.has(key)) { seen.add(key); out.contrast.push(`${say(el)} ${ratio.toFixed(2)}:1`); }
  }

  // Charts: each drawn chart names itself and has its figures in words beside it; the numbers
  // said are the figure's own (each trace's largest value, as the text writes numbers: thousands
  // separated, at most two decimals, as the page beside it; dollars to the cent include those).
  const num = v => (Math.round(v * 100) / 100).toLocaleString('en-US', {maximumFractionDigits: 2});
  out.charts = [];
  for (const box of document.querySelectorAll('[data-chart]')) {
    if (box.dataset.rendered !== 'plot') continue;
    const key = box.dataset.chart;
    const plot = box.querySelector('.chart');
    // The figure drawn now (a live update redraws it; the page's JSON is the first one).
    const fig = plot.data ? {data: plot.data, layout: plot.layout} : JSON.parse(document.getElementById('fig-' + key).textContent);
    const alt = box.querySelector('[data-chart-figures]');
    if (!alt) { out.charts.push(`${key}: no text alternative`); continue; }
    const text = alt.textContent.replace(/\s+/g, ' ');
    const named = plot.getAttribute('role') === 'img' && (plot.getAttribute('aria-label') || '').includes(fig.layout.title.text);
    if (!named) out.charts.push(`${key}: the plot is not an image named by its title`);
    if (plot.getAttribute('aria-describedby') !== alt.id) out.charts.push(`${key}: the plot is not described by its figures`);
    for (const t of fig.data) {
      if (t.showlegend === false && t.mode === 'text') continue;  // (the heat map's free counts: in its rows' words)
      if (t.name && t.name !== 'events' && t.showlegend !== false && !text.includes(t.name)) out.charts.push(`${key}: trace ${t.name} not named`);
      let values = [];
      if (t.type === 'heatmap') continue;
      if (t.type === 'box') values = [...t.median, ...t.q1, ...t.q3];
      else if (t.type === 'bar' && t.orientation === 'h' && t.base) values = [];
      else values = (t.orientation === 'h' ? t.x : t.y) || [];
      values = values.filter(v => typeof v === 'number');
      if (values.length && !text.includes(num(Math.max(...values)))) out.charts.push(`${key}: ${t.name}'s largest ${num(Math.max(...values))} not said`);
    }
    // A series the legend hides at a click has a checkbox that does it from the keyboard.
    const series = fig.layout.showlegend === false ? [] : [...new Set(fig.data
      .filter(t => t.showlegend !== false && t.name && t.type !== 'heatmap').map(t => t.name))];
    const boxes = [...box.querySelectorAll('[data-series-list] input[type=checkbox]')].map(i => i.value);
    if (JSON.stringify(series) !== JSON.stringify(boxes)) out.charts.push(`${key}: series ${series} have checkboxes ${boxes}`);
    // ... and, beside it, "only" (the legend's double click) when there are two or more.
    const onlys = [...box.querySelectorAll('[data-series-list] [data-only]')].map(b => b.dataset.only);
    if (series.length > 1 && JSON.stringify(series) !== JSON.stringify(onlys)) out.charts.push(`${key}: series ${series} have "only" for ${onlys}`);
    // A time series (a date axis, no timeline's bars from a base) has its time range buttons (the
    // pointer's zoom and pan), one pressed at most, and its value at each point, as many rows
    // shown as the range drawn holds (all of them at first), at most the table's `shown`.
    const timeSeries = fig.layout.xaxis && fig.layout.xaxis.type === 'date' && !fig.data.some(t => t.base);
    const ranges = box.querySelector('[data-chart-ranges]');
    const values = box.querySelector('[data-chart-values]');
    if (timeSeries) {
      if (!ranges || ranges.hidden || !ranges.querySelector('[data-span=all]')) out.charts.push(`${key}: no time range buttons`);
      else if (ranges.querySelectorAll('[aria-pressed=true]').length > 1) out.charts.push(`${key}: two time ranges pressed`);
      if (!values || values.hidden) out.charts.push(`${key}: no value at each point`);
      else {
        const rows = [...values.querySelectorAll('tbody tr')].filter(r => !r.hidden).length;
        const points = new Set(fig.data.flatMap(t => t.x || [])).size;
        if (rows !== Math.min(points, Number(values.dataset.shown))) out.charts.push(`${key}: ${rows} values shown of ${points} points`);
      }
    } else if ((ranges && !ranges.hidden) || (values && !values.hidden)) {
      out.charts.push(`${key}: time range buttons or values at each point on a chart over no time`);
    }
    if (fig.data[0] && fig.data[0].type === 'heatmap') {
      const labels = fig.data[0].y;
      const missing = labels.filter(l => !text.includes(l));
      if (missing.length) out.charts.push(`${key}: rows ${missing.slice(0, 3)} not said`);
    }
  }
  // Text plotly draws in its SVG (titles, ticks, legend, colour bar, text marks, annotations, and
  // each trace's hover label, shown point by point): its fill against what it is drawn on. A hover
  // label and a legend have their own box; the rest sits on the plot area's colour inside it, on
  // the paper's outside it (paper_bgcolor, plot_bgcolor as drawn).
  const fillOf = el => rgb(getComputedStyle(el).fill) || null;
  const alphaOf = el => Number(getComputedStyle(el).fillOpacity || 1);
  const opacityOf = el => { let o = 1; for (let e = el; e && e.tagName !== 'svg'; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; };
  const layered = (shape, under) => {  // a filled shape over `under`, its fill and fill opacity
    const c = shape && fillOf(shape);
    return c ? over([c[0], c[1], c[2], c[3] * alphaOf(shape) * opacityOf(shape)], under) : under;
  };
  const chartText = (box, where) => {
    const plot = box.querySelector('.chart');
    const svg = plot.querySelector('svg.main-svg');
    if (!svg) return;
    const paper = background(svg);
    const plotBg = layered(plot.querySelector('.bglayer .bg'), paper);
    const frame = svg.getBoundingClientRect();
    const size = plot._fullLayout._size;
    for (const text of plot.querySelectorAll('svg text')) {
      const words = text.textContent.replace(/\s+/g, ' ').trim();
      const r = text.getBoundingClientRect();
      if (!words || !r.width || getComputedStyle(text).display === 'none' || getComputedStyle(text).visibility === 'hidden') continue;
      const cx = r.left + r.width / 2 - frame.left, cy = r.top + r.height / 2 - frame.top;
      const inside = cx >= size.l && cx <= size.l + size.w && cy >= size.t && cy <= size.t + size.h;
      let bg = inside ? plotBg : paper;
      const hover = text.closest('.hovertext');
      const legend = text.closest('.legend');
      const note = text.closest('.annotation');
      // (a hover's trace name sits beside its box, on a paper-coloured rect)
      if (hover) bg = text.classList.contains('name') ? layered(hover.querySelector('rect'), bg) : layered(hover.querySelector('path'), paper);
      else if (legend) bg = layered(legend.querySelector('rect.bg'), bg);
      else if (note) bg = layered(note.querySelector('rect.bg'), bg);
      const s = getComputedStyle(text);
      let fg = rgb(s.fill);
      if (!fg) continue;
      fg = over([fg[0], fg[1], fg[2], fg[3] * alphaOf(text) * opacityOf(text)], bg);
      const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
      const ratio = (a + 0.05) / (b + 0.05);
      const px = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
      const need = px >= 24 || (bold && px >= 18.66) ? 3 : 4.5;
      const key = box.dataset.chart + s.fill + bg.join();
      if (ratio < need && !seen.has(key)) {
        seen.add(key);
        out.chartText.push(`${box.dataset.chart}${where} "${words.slice(0, 30)}" ${s.fill} on rgb(${bg.map(Math.round)}) ${ratio.toFixed(2)}:1`);
      }
    }
  };
  // Each trace's hover label as the mouse brings it up: the pointer over its first drawn point
  // (a bar, a marker, a box's middle, the heat map's first cell, a line's first point), in view
  // (plotly answers no pointer outside the window), through plotly's own handler.
  const targets = plot => {
    const frame = plot.querySelector('.nsewdrag').getBoundingClientRect();
    const middle = r => [r.left + r.width / 2, r.top + r.height / 2];
    const {xaxis: xa, yaxis: ya} = plot._fullLayout;
    const found = [];
    for (const trace of plot.querySelectorAll('.cartesianlayer g.trace')) {
      const point = [...trace.querySelectorAll('.point > path, path.point')].find(p => {
        const r = p.getBoundingClientRect();
        return r.width > 0 && r.height > 0;
      });
      if (point) found.push(middle(point.getBoundingClientRect()));
    }
    plot._fullData.forEach((t, i) => {
      if (t.type === 'heatmap') found.push([frame.left + xa.l2p(0), frame.top + ya.l2p(0)]);
      const b = plot.calcdata[i][0];  // (a box all of one value offers the pointer nothing: no hover)
      if (t.type === 'box' && b.max > b.min) found.push([frame.left + xa.l2p(b.pos), frame.top + ya.c2p((b.min + b.max) / 2)]);
      if (t.type !== 'scatter' || t.mode !== 'lines' || t.hoverinfo === 'skip' || t.visible !== true) return;
      const p = plot.calcdata[i].find(d => isFinite(d.x) && isFinite(d.y));
      if (p) found.push([frame.left + xa.c2p(p.x), frame.top + ya.c2p(p.y)]);
    });
    return found;
  };
  out.chartText = [];
  for (const box of document.querySelectorAll('[data-chart]')) {
    if (box.dataset.rendered !== 'plot') continue;
    chartText(box, '');
    const plot = box.querySelector('.chart');
    const drag = plot.querySelector('.nsewdrag');
    for (let k = 0; k < targets(plot).length; k++) {
      window.scrollBy(0, targets(plot)[k][1] - innerHeight / 2);
      const [x, y] = targets(plot)[k];
      drag.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true, view: window}));
      // (plotly draws a hover at most every few ms: a label asked for sooner comes a moment later)
      for (let i = 0; i < 20 && !plot.querySelector('.hoverlayer text'); i++) await new Promise(r => setTimeout(r, 25));
      if (!plot.querySelector('.hoverlayer text')) out.chartText.push(`${box.dataset.chart}: no hover label at ${Math.round(x)}, ${Math.round(y)}`);
      chartText(box, ' hover');
      Plotly.Fx.unhover(plot);
    }
  }
  window.scrollTo(0, 0);
  // Notices an action writes (the action's result, the live banner, a form's verdict): announced.
  out.silent = [...document.querySelectorAll('#action-result, #hook-result, [data-verdict], #live-banner')]
    .filter(el => !el.getAttribute('role') && !el.getAttribute('aria-live')).map(say);
  return out;
}"""

# Tab through the page from its start: every control and link reached, each drawn with a
# visible focus ring (an outline or a box shadow), and the page left at its end (focus out to
# the browser, document.activeElement the body, or round to its first link again); a trap is
# focus coming back to an element short of the end.
FOCUS_RING = r"""() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const s = getComputedStyle(el);
  const ring = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || (s.boxShadow && s.boxShadow !== 'none');
  return {id: el.dataset.qmTab || (el.dataset.qmTab = String(Math.random()).slice(2)), ring,
          what: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' "' + (el.innerText || el.value || el.getAttribute('aria-label') || '').replace(/\s+/g, ' ').trim().slice(0, 30) + '"'};
}"""

TABBABLE = r"""() => [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]')]
  .filter(el => {
    if (el.disabled || el.getAttribute('tabindex') === '-1' || el.closest('[hidden], template, .chart')) return false;
    const d = el.closest('details:not([open])');
    if (d && !d.querySelector(':scope > summary').contains(el)) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden';
  })
  .map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' "' + (el.innerText || el.value || el.getAttribute('aria-label') || '').replace(/\s+/g, ' ').trim().slice(0, 30) + '"')"""


def _unnamed(page: Page) -> list[str]:
    """Controls and links with no accessible name in Chromium's own accessibility tree."""
    cdp = page.context.new_cdp_session(page)
    try:
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
        found = []
        for node in nodes:
            role = node.get("role", {}).get("value")
            if node.get("ignored") or role not in NAMED_ROLES or node.get("name", {}).get("value", "").strip():
                continue
            described = "?"
            if "backendDOMNodeId" in node:
                obj = cdp.send("DOM.resolveNode", {"backendNodeId": node["backendDOMNodeId"]})["object"]
                described = cdp.send("Runtime.callFunctionOn", {
                    "objectId": obj["objectId"], "returnByValue": True,
                    "functionDeclaration": "function () { return this.outerHTML ? this.outerHTML.slice(0, 120) : String(this); }",
                })["result"]["value"]
            found.append(f"{role}: {described}")
        return found
    finally:
        cdp.detach()


def keyboard_findings(page: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """What Tab from the page's start to its end found wrong (a trap, a control with no focus
    ring, one never reached), and the walk itself."""
    tabbed = _tab_through(page)
    found: dict[str, Any] = {}
    if not tabbed["left"]:
        found["keyboard trap"] = tabbed
    if tabbed["ringless"]:
        found["no focus ring"] = tabbed["ringless"]
    if tabbed["missed"]:
        found["not reached by Tab"] = tabbed["missed"]
    return found, tabbed


def _tab_through(page: Page, limit: int = 600) -> dict[str, Any]:
    expected = page.evaluate(TABBABLE)
    # From the page's start, wherever a click left the browser's starting point.
    page.evaluate("""() => { const start = document.createElement('span'); start.id = 'qm-tab-start';
      start.tabIndex = -1; document.body.prepend(start); start.focus(); }""")
    reached: list[str] = []
    ringless: list[str] = []
    ids: set[str] = set()
    last = ""
    left = False
    trapped = ""
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = page.evaluate(FOCUS_RING)
        if now is None:
            left = True
            break
        if now["id"] == last:  # the next part of one field (a date's day, month, year)
            continue
        if reached and now["what"] == reached[0] and now["id"] in ids:  # round the whole page: not held anywhere
            left = True
            break
        if now["id"] in ids:  # back to an element already reached, short of the page's end: a trap
            trapped = f"{now['what']}, after {reached[-3:]}"
            break
        last = now["id"]
        ids.add(now["id"])
        reached.append(now["what"])
        if not now["ring"]:
            ringless.append(now["what"])
    missed = [what for what in expected if what not in reached]
    page.evaluate("() => document.getElementById('qm-tab-start').remove()")
    return {"left": left, "trapped at": trapped, "ringless": ringless[:6], "missed": missed[:6], "count": len(reached),
            "first": reached[0] if reached else ""}


def _problems(page: Page, title_word: str) -> dict[str, Any]:
    seen = page.evaluate(AUDIT, ROW_NAMED_TABLES)
    found: dict[str, Any] = {}
    if not seen["lang"]:
        found["lang"] = "no lang on <html>"
    if not re.match(rf"^{re.escape(title_word)}\b.* · Quartermaster$", seen["title"]):
        found["title"] = seen["title"]
    if len(seen["h1"]) != 1:
        found["h1"] = seen["h1"]
    for key in ("skips", "th", "headless", "rowless", "wordless", "contrast", "chartText", "charts", "silent"):
        if seen[key]:
            found[key] = seen[key]
    unnamed = _unnamed(page)
    if unnamed:
        found["unnamed"] = unnamed[:8]
    keyboard, tabbed = keyboard_findings(page)
    found.update(keyboard)
    if tabbed["first"] != 'a "Skip to the page"':
        found["first Tab stop"] = tabbed["first"]
    return found


def test_every_page_is_usable_by_keyboard_and_screen_reader(session: Any, live_server: Any) -> None:  # noqa: F811
    running, twice, gang, node = _the_widest_rows()
    waiting = submit(user("alice"), SubmitRequest(name="waits-for-room", gpus=64, gpus_per_node=8)).job
    run_cycle("test")  # it waits, with the engine's reason
    waiting.refresh_from_db()
    assert waiting.state == "pending", waiting.state
    assert Node.objects.filter(name=node.name).exists()
    visits = {
        "alice": [("/", "Overview"), ("/jobs/", "Jobs"), (f"/jobs/{waiting.pk}/", f"Job {waiting.pk}"),
                  (f"/jobs/{twice.pk}/", f"Job {twice.pk}"), (f"/jobs/{running.pk}/", f"Job {running.pk}"),
                  ("/history/", "History"), ("/teams/", "Teams"), ("/notifications/", "Notifications")],
        "finn": [("/showback/?window=24h", "Showback")],
        "admin": [("/nodes/", "Nodes"), (f"/nodes/{node.name}/", f"Node {node.name}"), (WHAT_IF, "What-if")],
    }
    report: dict[str, Any] = {}

    login = session("alice")
    login.context.clear_cookies()
    login.page.goto(login.base + "/accounts/login/")
    found = _problems(login.page, "Log in")
    if found:
        report["anonymous /accounts/login/"] = found

    for who, pages in visits.items():
        tab = session(who)
        for path, title_word in pages:
            tab.open(path)
            if path == WHAT_IF:  # Replay pressed; its comparison and charts arrive live; its quota table opened
                tab.replay()
                tab.page.click(".quota-table summary")
            if path == "/":  # the charts and their figures as a live update writes them, their axis ranges opened
                tab.page.evaluate("() => QM.poll()")
                tab.page.evaluate("() => document.querySelectorAll('[data-chart-axes]').forEach(d => { d.open = true; })")
            found = _problems(tab.page, title_word)
            if found:
                report[f"{who} {path}"] = found
            if path == "/jobs/":
                # A field the live check refuses is described by its error, not only marked invalid.
                tab.page.fill("[data-field=gpus]", "0")
                gpus = tab.page.locator("[data-field=gpus]")
                expect(gpus).to_have_attribute("aria-invalid", "true", timeout=ANSWER_TIMEOUT_MS)
                said = tab.page.evaluate("""() => (document.querySelector('[data-field=gpus]').getAttribute('aria-describedby') || '')
                  .split(' ').filter(Boolean).map(id => document.getElementById(id).textContent).join(' ')""")
                if "a job needs at least 1 GPU" not in said:
                    report.setdefault(f"{who} {path}", {})["a refused field's description"] = said
            if path in ("/teams/", "/showback/?window=24h"):  # the charts' figures, opened, for the eye
                tab.page.evaluate("() => document.querySelectorAll('.chart-figures').forEach(d => d.open = true)")
                tab.screenshot("accessible-figures-" + path.strip("/").split("/")[0].split("?")[0])
            if path == "/nodes/":
                # The nodes' table refreshed while the keyboard is on a node's cordon: still there.
                cordon = tab.page.locator("[data-node-action=cordon]").first
                url = cordon.get_attribute("data-api-post")
                cordon.focus()
                tab.page.evaluate("() => QM.poll()")
                focused = tab.page.evaluate("() => document.activeElement.getAttribute('data-api-post')")
                if focused != url:
                    report.setdefault(f"{who} {path}", {})["live refresh took the focus"] = focused or "body"
            if path == f"/jobs/{waiting.pk}/":
                # A live refresh while the keyboard is on Cancel: the focus stays on it.
                tab.page.focus("#cancel-job")
                tab.page.evaluate("() => QM.poll()")
                focused = tab.page.evaluate("() => document.activeElement.id")
                if focused != "cancel-job":
                    report.setdefault(f"{who} {path}", {})["live refresh took the focus"] = focused or "body"
                # Its state changed elsewhere (cancelled from the CLI): said once, politely.
                assert cancel_job(Job.objects.get(pk=waiting.pk), "test")
                tab.page.evaluate("() => QM.poll()")
                said = tab.page.evaluate("() => { const s = document.getElementById('live-said'); return s && [s.getAttribute('role'), s.textContent]; }")
                if said != ["status", f"Job {waiting.pk}: Cancelled"]:
                    report.setdefault(f"{who} {path}", {})["a new state, announced"] = said
    assert not report, "accessibility problems:\n" + "\n".join(
        f"{where}:\n" + "\n".join(f"  {k}: {v}" for k, v in found.items()) for where, found in report.items())
