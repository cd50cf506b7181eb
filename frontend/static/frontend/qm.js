/* Quartermaster pages: draw the server's Plotly figures, keep them live by polling a small JSON
 * endpoint, and send every change (submit, cancel, node actions) through the REST API.
 * No framework: the server renders the page and every fragment it later replaces. */
(function () {
  "use strict";

  /* (showSendToCloud: plotly.js 4 puts "Share chart..." in every mode bar, which opens
     cloud.plotly.com and hands it the figure, teams, jobs and costs, once one signs in there:
     the fleet's figures stay here.) */
  var PLOT_CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false };
  var QM = {};
  window.QM = QM;

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  /* ------------------------------------------------------------------------ charts */

  var AXES = ["xaxis", "yaxis"];

  function figureOf(key) {
    var el = document.getElementById("fig-" + key);
    return el ? JSON.parse(el.textContent) : null;
  }

  function boxFor(key) {
    return document.querySelector('[data-chart="' + key + '"]');
  }

  function attachClicks(plot) {
    if (plot.dataset.qmClicks || typeof plot.on !== "function") return;
    plot.dataset.qmClicks = "1";
    plot.on("plotly_click", function (event) {
      var point = event && event.points && event.points[0];
      if (point && typeof point.customdata === "number") {
        window.location.href = "/jobs/" + point.customdata + "/";
      }
    });
  }

  /* The chart's figures in words (its text alternative: frontend/chart_figures.py), brought up to
     date with each live figure (writeRows) so a screen reader reads the numbers the chart now draws. */
  /* A cell's words with each date and clock unbreakable (the figure_cell filter's rule); a row's
     header with each hyphenated word held whole (the whole_words filter's: services/whole_words.py),
     so a team's name reads "recommendation-systems", never "recommendation-" / "systems". */
  var DATE_OR_CLOCK = /\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?/g;
  var HYPHENATED_WORD = /(?<!\S)(?=\S{0,39}\w-\w)\S{3,40}(?!\S)/g;
  function writeCell(el, text, held) {
    if (Array.isArray(text)) {  // parts: words and links (chart_figures.link: a heat map's jobs)
      text.forEach(function (part) {
        if (part && typeof part === "object") {
          var a = document.createElement("a");
          a.href = part.href;
          a.textContent = part.text;
          el.appendChild(a);
        } else {
          writeCell(el, part, held);
        }
      });
      return;
    }
    var at = 0;
    text = String(text);
    text.replace(held || DATE_OR_CLOCK, function (found, offset) {
      el.appendChild(document.createTextNode(text.slice(at, offset)));
      var span = document.createElement("span");
      span.className = "nobr";
      span.textContent = found;
      el.appendChild(span);
      at = offset + found.length;
      return found;
    });
    el.appendChild(document.createTextNode(String(text).slice(at)));
  }

  /* A table's words as the new figure has them, written in place: a header cell or a cell whose
     words changed is rewritten, a row is kept (by its time when `keyed`, as the values at each
     point: a new point's row comes in at the top, the oldest leaves at the foot; else by its
     place), rows come and go at the ends; the table, its other rows and cells stay the same
     nodes. Rewritten whole at each live update, a screen reader in the table lost its place
     and the keyboard its focus. New rows of a keyed table come hidden: showValues shows them. */
  function cellText(cell) {
    return Array.isArray(cell) ? cell.map(function (part) { return part && typeof part === "object" ? part.text : String(part); }).join("")
      : String(cell);
  }

  function writeRows(table, columns, rows, keyed, rowHeld) {
    var head = table.tHead.rows[0];
    columns.forEach(function (column, i) {
      var th = head.cells[i];
      if (!th) { th = document.createElement("th"); th.scope = "col"; head.appendChild(th); }
      if (th.textContent !== column) th.textContent = column;
    });
    while (head.cells.length > columns.length) head.removeChild(head.lastElementChild);
    var body = table.tBodies[0];
    var kept = new Map();
    Array.prototype.forEach.call(body.rows, function (tr, i) { kept.set(keyed ? tr.dataset.at : i, tr); });
    var next = body.firstElementChild;  // where the next row belongs
    rows.forEach(function (row, place) {
      var key = keyed ? String(row[0]) : place;
      var tr = kept.get(key);
      if (tr) {
        kept.delete(key);
      } else {
        tr = document.createElement("tr");
        if (keyed) { tr.dataset.at = key; tr.hidden = true; }
      }
      row.forEach(function (cell, i) {
        var el = tr.cells[i];
        if (el && el.tagName !== (i === 0 ? "TH" : "TD")) { tr.removeChild(el); el = null; }
        if (!el) {
          el = document.createElement(i === 0 ? "th" : "td");
          if (i === 0) el.scope = "row";
          tr.insertBefore(el, tr.cells[i] || null);
        } else if (el.textContent === cellText(cell)) {
          return;
        }
        el.textContent = "";
        writeCell(el, cell, i === 0 ? rowHeld : DATE_OR_CLOCK);
      });
      while (tr.cells.length > row.length) tr.removeChild(tr.lastElementChild);
      if (tr === next) next = next.nextElementSibling;
      else body.insertBefore(tr, next);
    });
    kept.forEach(function (tr) { body.removeChild(tr); });
  }

  function writeFigures(box, table) {
    var details = box.querySelector("[data-chart-figures]");
    if (!details || !table) return;
    writeRows(details.querySelector("table"), table.columns || [], table.rows || [], false, HYPHENATED_WORD);
  }

  /* A chart's series shown or hidden. Plotly's legend hides a series at a click: the pointer's
     only. Above each chart with a legend, a checkbox per series does the same from the keyboard
     (Plotly.restyle, as the legend's click), and a click in the legend ticks or unticks it: one
     state, which a live update keeps (a hidden series stays hidden in the new figure). */
  function legendNames(plot) {
    var names = [];
    if (!plot.layout || plot.layout.showlegend === false) return names;
    plot.data.forEach(function (t) {
      if (t.showlegend === false || !t.name || t.type === "heatmap" || names.indexOf(t.name) >= 0) return;
      names.push(t.name);
    });
    return names;
  }

  function tracesNamed(plot, name) {
    var found = [];
    plot.data.forEach(function (t, i) { if (t.name === name && t.showlegend !== false) found.push(i); });
    return found;
  }

  function isHidden(trace) { return trace.visible === "legendonly" || trace.visible === false; }

  function swatch(plot, index) {
    var t = (plot._fullData || [])[index] || {};
    var colour = (t.marker && typeof t.marker.color === "string" && t.marker.color) ||
      (t.line && typeof t.line.color === "string" && t.line.color) || "";
    var span = document.createElement("span");
    span.className = "swatch";
    span.setAttribute("aria-hidden", "true");
    span.style.background = colour;
    return span;
  }

  /* Names of the legend's series now drawn (not hidden). */
  function shownNames(plot, names) {
    return names.filter(function (name) {
      return !tracesNamed(plot, name).every(function (i) { return isHidden(plot.data[i]); });
    });
  }

  function smallButton(words, label) {
    var button = document.createElement("button");
    button.type = "button";
    button.textContent = words;
    if (label) button.setAttribute("aria-label", label);
    return button;
  }

  function syncSeries(box, plot) {
    var set = box.querySelector("[data-chart-series]");
    if (!set) return;
    var list = set.querySelector("[data-series-list]");
    var names = plot.dataset.drawn ? legendNames(plot) : [];
    var shown = shownNames(plot, names);
    var hidden = {};
    names.forEach(function (name) { if (shown.indexOf(name) < 0) hidden[name] = true; });
    box.qmHidden = hidden;
    set.hidden = !names.length;
    if (list.dataset.names !== JSON.stringify(names)) {
      var was = list.contains(document.activeElement) ? document.activeElement : null;
      var focused = was && (was.type === "checkbox" ? "box:" + was.value : was.dataset.only !== undefined ?
        "only:" + was.dataset.only : "all");
      list.textContent = "";
      names.forEach(function (name) {
        // (the figure's text is typed: a "<" in a name reaches plotly as "&lt;")
        var said = name.replace(/&lt;/g, "<");
        var one = document.createElement("span");
        one.className = "one-series";
        var label = document.createElement("label");
        var input = document.createElement("input");
        input.type = "checkbox";
        input.value = name;
        label.appendChild(input);
        label.appendChild(swatch(plot, tracesNamed(plot, name)[0]));
        label.appendChild(document.createTextNode(" " + said));
        one.appendChild(label);
        list.appendChild(one);
        if (focused === "box:" + name) input.focus({ preventScroll: true });
        // The legend's double click, from the keyboard: this series alone (pressed), or all again.
        if (names.length > 1) {
          var only = smallButton("only", "Show only " + said);
          only.dataset.only = name;
          one.appendChild(only);
          if (focused === "only:" + name) only.focus({ preventScroll: true });
        }
      });
      if (names.length > 1) {
        var all = smallButton("Show all");
        all.dataset.showAll = "";
        list.appendChild(all);
        if (focused === "all") all.focus({ preventScroll: true });
      }
      list.dataset.names = JSON.stringify(names);
    }
    list.querySelectorAll("input").forEach(function (input) { input.checked = !hidden[input.value]; });
    list.querySelectorAll("[data-only]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(shown.length === 1 && shown[0] === button.dataset.only));
    });
  }

  function bindSeries(box) {
    var set = box.querySelector("[data-chart-series]");
    if (!set || set.dataset.bound) return;
    set.dataset.bound = "1";
    set.addEventListener("change", function (event) {
      var plot = box.querySelector(".chart");
      var input = event.target;
      if (!plot.dataset.drawn || input.type !== "checkbox") return;
      Plotly.restyle(plot, { visible: input.checked ? true : "legendonly" }, tracesNamed(plot, input.value));
    });
    // "only": that series alone, the others hidden, as the legend's double click; pressed again
    // (it is alone), or "Show all": every series again.
    set.addEventListener("click", function (event) {
      var plot = box.querySelector(".chart");
      var button = event.target.closest("button");
      if (!button || !plot.dataset.drawn) return;
      var alone = button.dataset.only !== undefined && button.getAttribute("aria-pressed") !== "true" ? button.dataset.only : null;
      var indices = [];
      var visible = [];
      legendNames(plot).forEach(function (name) {
        tracesNamed(plot, name).forEach(function (i) {
          indices.push(i);
          visible.push(alone === null || name === alone ? true : "legendonly");
        });
      });
      Plotly.restyle(plot, { visible: visible }, indices);
    });
  }

  function attachLegend(box, plot) {
    if (plot.dataset.qmLegend || typeof plot.on !== "function") return;
    plot.dataset.qmLegend = "1";
    // A legend click (or double click, showing one series alone) restyles: the boxes follow.
    plot.on("plotly_restyle", function () { syncSeries(box, plot); });
  }

  /* The figure to draw with the series hidden on the chart left hidden. */
  function keepHidden(box, data) {
    var hidden = box.qmHidden || {};
    return data.map(function (t) {
      return hidden[t.name] && t.showlegend !== false ? Object.assign({}, t, { visible: "legendonly" }) : t;
    });
  }

  /* A time series' range: plotly zooms and pans by a drag of the pointer (its mode bar's buttons
     only step in and out, or reset). Above each time series, a
     button per span the server offers (chart_figures.time_range: "Last 15 min", ..., "All", the
     one chosen pressed) and Earlier / Later (its width back or on) set the x range through
     Plotly.relayout. The choice is the box's (qmRange): a span ends at the chart's end, which a
     live update moves along; a range the pointer zoomed to, or Earlier reached, stays as it is;
     none (All) is plotly's autorange. A pointer's zoom presses none, its double click All. */
  function msOf(text) {  // a time as plotly's date axis writes it ("2026-12-06 10:00:00.5"), UTC
    var iso = String(text).trim().replace(" ", "T");
    return Date.parse(iso.length === 10 ? iso + "T00:00Z" : iso + "Z");
  }

  function timeOf(ms) { return new Date(ms).toISOString().slice(0, 19).replace("T", " "); }

  function rangesOf(box) {
    var set = box.querySelector("[data-chart-ranges]");
    try { return set ? JSON.parse(set.dataset.ranges || "null") : null; } catch (e) { return null; }
  }

  function chosenRange(box) {
    var ranges = rangesOf(box);
    var chosen = box.qmRange;
    if (!chosen || !ranges) return null;
    if (chosen.span) return [timeOf(msOf(ranges.end) - chosen.span * 1000), ranges.end];
    return [chosen.from, chosen.to];
  }

  function drawnRange(plot) {
    var axis = plot.layout && plot.layout.xaxis;
    return axis && axis.range ? [msOf(axis.range[0]), msOf(axis.range[1])] : null;
  }

  /* The range chosen for an axis (a time series' x: its time range; any other axis: one set
     in its Axis range, or drawn by the pointer), or null: the figure's own. */
  function chosenOf(box, name) {
    if (name === "xaxis" && rangesOf(box)) return chosenRange(box);
    var chosen = (box.qmAxes || {})[name];
    return chosen ? chosen.slice() : null;
  }

  /* The layout to draw with the box's chosen ranges (a live update keeps them). */
  function keepRange(box, layout) {
    var kept = layout;
    AXES.forEach(function (name) {
      var range = chosenOf(box, name);
      if (!range) return;
      var axis = {};
      axis[name] = Object.assign({}, layout[name], { range: range, autorange: false });
      kept = Object.assign({}, kept, axis);
    });
    return kept;
  }

  /* How the figure itself draws an axis: its fixed range (a utilization's 0 to 100 %, the heat
     map's slots), else its autorange (true, or "reversed": the heat map's nodes top down). */
  function figureAxes(layout) {
    var axes = {};
    AXES.forEach(function (name) {
      var axis = layout[name] || {};
      axes[name] = { range: axis.range ? axis.range.slice() : null,
                     autorange: axis.autorange === undefined || axis.autorange === false ? true : axis.autorange };
    });
    return axes;
  }

  /* Plotly.relayout's keys drawing each axis as chosen, or as the figure draws it. */
  function axesUpdate(box) {
    var update = {};
    var own = box.qmFigureAxes || figureAxes({});
    AXES.forEach(function (name) {
      var range = chosenOf(box, name) || (own[name].range && own[name].range.slice());
      if (range) update[name + ".range"] = range; else update[name + ".autorange"] = own[name].autorange;
    });
    return update;
  }

  function syncRanges(box, plot) {
    var set = box.querySelector("[data-chart-ranges]");
    if (!set) return;
    var ranges = plot.dataset.drawn ? rangesOf(box) : null;
    set.hidden = !ranges;
    if (!ranges) return;
    var list = set.querySelector("[data-range-list]");
    if (list.dataset.spans !== JSON.stringify(ranges.spans)) {
      var was = list.contains(document.activeElement) ? document.activeElement : null;
      var focused = was && (was.dataset.span || "pan" + was.dataset.pan);
      list.textContent = "";
      ranges.spans.concat([["All", "all"]]).forEach(function (span) {
        var button = smallButton(span[0]);
        button.dataset.span = String(span[1]);
        list.appendChild(button);
      });
      [["Earlier", "-1"], ["Later", "1"]].forEach(function (pan) {
        var button = smallButton(pan[0]);
        button.dataset.pan = pan[1];
        button.className = "pan";
        list.appendChild(button);
      });
      list.dataset.spans = JSON.stringify(ranges.spans);
      list.querySelectorAll("button").forEach(function (button) {
        if (focused && (button.dataset.span || "pan" + button.dataset.pan) === focused) button.focus({ preventScroll: true });
      });
    }
    var chosen = box.qmRange;
    list.querySelectorAll("[data-span]").forEach(function (button) {
      var pressed = button.dataset.span === "all" ? !chosen : Boolean(chosen && chosen.span && String(chosen.span) === button.dataset.span);
      button.setAttribute("aria-pressed", String(pressed));
    });
    // Earlier at the chart's start, Later at its end: said (aria-disabled), still focusable, so
    // the keyboard's focus stays where it was.
    var drawn = drawnRange(plot);
    var atStart = !drawn || drawn[0] <= msOf(ranges.start) + 1000;
    var atEnd = !drawn || drawn[1] >= msOf(ranges.end) - 1000;
    list.querySelector('[data-pan="-1"]').setAttribute("aria-disabled", String(atStart));
    list.querySelector('[data-pan="1"]').setAttribute("aria-disabled", String(atEnd));
  }

  /* Earlier (-1) or Later (1): the drawn range moved by its width, within the chart's start and
     end; one that reaches the end follows it again, as a span. */
  function panned(plot, ranges, way) {
    var drawn = drawnRange(plot);
    var start = msOf(ranges.start);
    var end = msOf(ranges.end);
    var width = drawn[1] - drawn[0];
    var from = way < 0 ? Math.max(start, drawn[0] - width) : Math.min(end, drawn[1] + width) - width;
    if (from + width >= end - 1000) return { span: Math.round(width / 1000) };
    return { from: timeOf(from), to: timeOf(from + width) };
  }

  /* Draw the box's chosen ranges (Plotly.relayout), then bring the buttons, the values shown and
     the axis ranges' fields along. */
  function setRange(box, plot) {
    box.qmRelayout = true;
    return Plotly.relayout(plot, axesUpdate(box)).finally(function () {
      box.qmRelayout = false;
      syncRanges(box, plot);
      showValues(box, plot);
      syncAxes(box, plot, true);
    });
  }

  function bindRanges(box) {
    var set = box.querySelector("[data-chart-ranges]");
    if (!set || set.dataset.bound) return;
    set.dataset.bound = "1";
    set.addEventListener("click", function (event) {
      var plot = box.querySelector(".chart");
      var button = event.target.closest("button");
      var ranges = rangesOf(box);
      if (!button || !plot.dataset.drawn || !ranges || button.getAttribute("aria-disabled") === "true") return;
      if (button.dataset.span) box.qmRange = button.dataset.span === "all" ? null : { span: Number(button.dataset.span) };
      else box.qmRange = panned(plot, ranges, Number(button.dataset.pan));
      // y as the figure draws it (a fixed 0 to 100 %, else autorange): a zoom may have narrowed it
      // to what the stretch of time left behind held.
      if (box.qmAxes) box.qmAxes.yaxis = null;
      setRange(box, plot);
    });
  }

  /* Bars that each cover a period (the showback's cost per hour or day: figures.period_ticks)
     tick the periods' starts, a whole number of periods apart, counted from the figure's tick0
     (midnight over hours, the first bar over days). The figure's own spacing fits its whole
     window; zoomed, panned or set by the axis fields, the range drawn is ticked anew by the same
     rule (figures.period_ticks_zoomed: the fewest periods apart that leave at most `most` ticks),
     and reset, the figure's own again. Spaced once, 26 hour bars kept a tick every 4 hours: two
     in a zoom to 8 hours, 60 zoomed out to ten days. A day's label is centred on its day only
     while every day has a tick. */
  function periodTicksFor(ticks, range) {
    var period = ticks.period;
    var count = Math.max(1, Math.floor(range[1] / period) - Math.ceil(range[0] / period) + 1);
    var stride = null;
    ticks.strides.forEach(function (each) {
      if (stride === null && Math.ceil(count * period / each) <= ticks.most) stride = each;
    });
    var widest = ticks.strides[ticks.strides.length - 1];
    if (stride === null) stride = widest * Math.ceil(count * period / (ticks.most * widest));
    return { dtick: stride, ticklabelmode: ticks.day_labels && stride === period ? "period" : "instant" };
  }

  function periodTicksOf(layout) {
    return layout && layout.meta && layout.meta.period_ticks;
  }

  /* The figure's layout with the ticks of the x range kept from a zoom (a live update redraws it). */
  function keepPeriodTicks(layout) {
    var ticks = periodTicksOf(layout);
    var axis = layout.xaxis || {};
    if (!ticks || !axis.range || axis.autorange !== false) return layout;
    return Object.assign({}, layout, { xaxis: Object.assign({}, axis, periodTicksFor(ticks, axis.range.map(msOf))) });
  }

  function periodTicks(box, plot) {
    var ticks = periodTicksOf(plot.layout);
    var axis = plot._fullLayout && plot._fullLayout.xaxis;
    if (!ticks || !axis || !box.qmOwnTicks) return;
    var wanted = axis.autorange === false ? periodTicksFor(ticks, axis.range.map(msOf)) : box.qmOwnTicks;
    if (axis.dtick === wanted.dtick && axis.ticklabelmode === wanted.ticklabelmode) return;
    Plotly.relayout(plot, { "xaxis.dtick": wanted.dtick, "xaxis.ticklabelmode": wanted.ticklabelmode });
  }

  /* A heat map's GPU-slot axis (layout.meta.slot_ticks: how many slots) labels every slot while
     the labels fit side by side, else every 2nd, 4th, ... slot from 0: at a phone's 390 px a
     16-GPU node's "10" to "15" were drawn over one another (about 5.6 px a slot). The one rule,
     given the axis's length in px, the slots it spans and a digit's width; the slots to label. */
  function slotTickvals(count, axisPx, span, digitPx) {
    var perSlot = axisPx / span;
    var widest = String(count - 1).length * digitPx;
    var stride = 1;
    while (stride < count && stride * perSlot < widest + 4) stride *= 2;
    var wanted = [];
    for (var i = 0; i < count; i += stride) wanted.push(i);
    return wanted;
  }

  /* A digit's width on the slot axis: measured on the labels drawn, else about 0.6 em of the
     axis's font (nothing drawn yet). */
  function slotDigitPx(plot, font) {
    var digit = 0;
    plot.querySelectorAll(".xtick text").forEach(function (t) {
      var chars = t.textContent.length;
      if (chars) digit = Math.max(digit, t.getBoundingClientRect().width / chars);
    });
    return digit || ((font && font.size) || 12) * 0.6;
  }

  /* The colour bar's words, which set how much of the width it takes from the plot. */
  function colourBarWords(data) {
    var bar = (data && data[0] && data[0].colorbar) || {};
    return (bar.ticktext || []).concat([(bar.title && bar.title.text) || ""]).map(String);
  }

  /* The slot axis's length before a drawing: the last drawing's where the plot is as wide and its
     colour bar says the same (a live update), else the plot's width less its margins and the
     colour bar (its 30 px bar, padding and longest words). The drawing is measured after (slotTicks). */
  function slotAxisPx(plot, layout, data) {
    var full = plot._fullLayout;
    var words = colourBarWords(data);
    if (full && full.xaxis && full.xaxis._length && full.width === plot.clientWidth &&
        JSON.stringify(colourBarWords(plot.data)) === JSON.stringify(words)) return full.xaxis._length;
    var margin = layout.margin || {};
    var longest = Math.max.apply(null, words.map(function (w) { return w.length; }));
    var bar = 30 + 10 + 3 + longest * 12 * 0.6 + 15;
    return Math.max(1, plot.clientWidth - (margin.l || 80) - Math.max(margin.r || 80, bar));
  }

  /* The layout to draw with its slot labels thinned already, so that no drawing (the first, a
     live update's) labels every slot before slotTicks thins them: a live update at a phone's width
     drew "0" to "15" across one another for a moment at each refresh. */
  function thinSlotTicks(plot, layout, data) {
    var count = layout.meta && layout.meta.slot_ticks;
    var axis = layout.xaxis;
    if (!count || !axis || !axis.range) return layout;
    var span = Math.abs(axis.range[1] - axis.range[0]);
    var wanted = slotTickvals(count, slotAxisPx(plot, layout, data), span, slotDigitPx(plot, axis.tickfont));
    return Object.assign({}, layout, { xaxis: Object.assign({}, axis, { tickvals: wanted }) });
  }

  /* The slot labels checked on the axis as drawn, at each drawing (a resize, a live update whose
     colour bar took more or less room), so a wide window labels them all. */
  function slotTicks(plot) {
    var count = plot.layout && plot.layout.meta && plot.layout.meta.slot_ticks;
    var axis = plot._fullLayout && plot._fullLayout.xaxis;
    if (!count || !axis || !axis._length) return Promise.resolve();
    var wanted = slotTickvals(count, axis._length, Math.abs(axis.range[1] - axis.range[0]), slotDigitPx(plot, axis.tickfont));
    if (JSON.stringify(plot.layout.xaxis.tickvals) === JSON.stringify(wanted)) return Promise.resolve();
    return Plotly.relayout(plot, { "xaxis.tickvals": wanted });
  }

  /* SVGs plotly draws that are no reader's business, out of the accessibility tree: its
     text-measuring SVG, off screen at the body's end, and the icon inside each mode bar button
     (the button is named by its title). Chromium gave each an unnamed image on every page with a
     chart (seen 7 Dec). */
  function hideDecorations(plot) {
    var tester = document.getElementById("js-plotly-tester");
    if (tester) tester.setAttribute("aria-hidden", "true");
    plot.querySelectorAll(".modebar svg.icon").forEach(function (icon) { icon.setAttribute("aria-hidden", "true"); });
  }

  /* At each drawing plotly makes (a resize, a relayout): the slot labels measured anew, the mode
     bar's icons (drawn anew) hidden. */
  function attachAfterplot(plot) {
    if (plot.dataset.qmAfterplot || typeof plot.on !== "function") return;
    plot.dataset.qmAfterplot = "1";
    plot.on("plotly_afterplot", function () { hideDecorations(plot); slotTicks(plot); });
  }

  /* The pointer's zoom (a drag, the mode bar, a double click) is the range chosen: a live update
     keeps it, and the time range buttons and the axis ranges' fields follow it. */
  function attachZoom(box, plot) {
    if (plot.dataset.qmZoom || typeof plot.on !== "function") return;
    plot.dataset.qmZoom = "1";
    plot.on("plotly_relayout", function (change) {
      periodTicks(box, plot);
      if (box.qmRelayout || !change) return;
      var moved = false;
      AXES.forEach(function (name) {
        var range;
        if (change[name + ".autorange"] !== undefined) range = null;
        else if (name + ".range[0]" in change || name + ".range" in change) range = plot.layout[name].range.slice();
        else return;
        moved = true;
        if (name === "xaxis" && rangesOf(box)) box.qmRange = range && { from: String(range[0]), to: String(range[1]) };
        else (box.qmAxes = box.qmAxes || {})[name] = range;
      });
      if (!moved) return;
      syncRanges(box, plot);
      showValues(box, plot);
      syncAxes(box, plot, true);
    });
  }

  /* A time series' value at each point (chart_figures.values_table), what a hover says there:
     brought up to date in place with each live figure (writeRows), and shown for the drawn
     range, newest first, at most the table's `shown` rows, the note above saying which. */
  function writeValues(box, table) {
    var details = box.querySelector("[data-chart-values]");
    if (!details) return;
    details.hidden = !table;
    if (!table) return;
    writeRows(details.querySelector("table"), table.columns, table.rows, true);
    details.dataset.shown = String(table.shown);
  }

  function showValues(box, plot) {
    var details = box.querySelector("[data-chart-values]");
    if (!details || details.hidden) return;
    var rows = Array.prototype.slice.call(details.querySelectorAll("tbody tr"));
    var drawn = box.qmRange && plot.dataset.drawn ? drawnRange(plot) : null;
    var inRange = rows.filter(function (row) {
      var at = msOf(row.dataset.at);
      return !drawn || (at >= drawn[0] && at <= drawn[1]);
    });
    var most = Number(details.dataset.shown) || rows.length;
    // (only a row whose state changes is touched: a screen reader keeps its place)
    var shown = new Set(inRange.slice(0, most));
    rows.forEach(function (row) { if (row.hidden === shown.has(row)) row.hidden = !shown.has(row); });
    var words;
    if (!inRange.length) {
      words = "No point in the chart's time range (" + timeOf(drawn[0]) + " to " + timeOf(drawn[1]) + " UTC).";
    } else {
      var span = " from " + inRange[inRange.length - 1].dataset.at + " to " + inRange[0].dataset.at + " UTC";
      words = inRange.length > most
        ? "The newest " + most + " of the " + inRange.length + " points" + span + " (the chart's time range), newest " +
          "first: a shorter time range, then Earlier, shows the others."
        : (inRange.length === 1 ? "The one point" : "The " + inRange.length + " points") + span +
          " (the chart's time range), newest first.";
    }
    var note = details.querySelector("[data-values-note]");
    if (note.textContent !== words) note.textContent = words;
  }

  /* An axis' range by keyboard: plotly zooms by a drag of the pointer (its mode bar's buttons step
     in and out), on any axis of any chart; a time series' buttons above set its x alone. Under
     each chart, "…: axis range" opens a small form per axis, From and To (a number as the axis
     says it, a time in UTC, or, on an axis of teams or nodes, the first and last shown), Apply
     (Enter in a field too) and Reset (the range the figure draws by itself), each named by the
     axis and the chart it acts on. Applied through Plotly.relayout, the range is the box's choice,
     as a pointer's zoom is, and the fields show the range drawn whichever set it. A range refused
     (a field that says no number or time, From not below To) is said in the chart's status line
     and on its field, the chart left as it was. */
  function chartTitle(box) { return box.getAttribute("aria-label") || box.dataset.chart; }

  function axisTitle(plot, name) {
    var title = plot.layout[name] && plot.layout[name].title;
    return String((title && typeof title === "object" ? title.text : title) || "").replace(/&lt;/g, "<");
  }

  function axisWords(box, plot, name) {  // "y axis (GPUs) of Queue depth by priority class"
    var text = axisTitle(plot, name);
    return name.charAt(0) + " axis" + (text ? " (" + text + ")" : "") + " of " + chartTitle(box);
  }

  /* The categories of an axis as read on the screen: left to right, top to bottom. */
  function categoriesRead(axis) {
    var found = (axis._categories || []).map(function (name, i) { return { name: String(name), at: i }; });
    var range = axis.range || [0, 1];
    var descending = range[0] > range[1];
    // (a y axis counts up from its foot: read from the top, its last category comes first)
    if (axis._id.charAt(0) === "y") descending = !descending;
    return descending ? found.reverse() : found;
  }

  function axisKind(axis) {
    return axis.type === "category" || axis.type === "date" || axis.type === "log" ? axis.type : "linear";
  }

  /* A number as its field shows it: the decimals the range's width asks for, no more. */
  function numberText(value, width) {
    var decimals = Math.min(6, Math.max(0, Math.ceil(-Math.log10(Math.abs(width) || 1)) + 2));
    return String(Number(value.toFixed(decimals)));
  }

  /* The two ends of the range drawn, as the fields show them. */
  function fieldsOf(axis) {
    var range = axis.range;
    var kind = axisKind(axis);
    if (kind === "date") return [timeOf(msOf(range[0])), timeOf(msOf(range[1]))];
    if (kind === "log") {
      return range.map(function (end) { return String(Number(Math.pow(10, end).toPrecision(3))); });
    }
    if (kind === "category") {
      var read = categoriesRead(axis);
      var low = Math.min(range[0], range[1]), high = Math.max(range[0], range[1]);
      var inside = read.filter(function (c) { return c.at >= low && c.at <= high; });
      if (!inside.length) {  // zoomed in between two: the nearer
        var middle = (low + high) / 2;
        inside = read.filter(function (c) { return Math.abs(c.at - middle) <= 0.5; }).slice(0, 1);
      }
      return inside.length ? [inside[0].name, inside[inside.length - 1].name] : ["", ""];
    }
    return [numberText(range[0], range[1] - range[0]), numberText(range[1], range[1] - range[0])];
  }

  /* A field's words as a value of the axis, or null: a time (UTC), a number (its "$", "%" and
     thousands' commas allowed), a category's place. */
  function fieldValue(axis, text) {
    var kind = axisKind(axis);
    text = String(text).trim();
    if (!text) return null;
    if (kind === "date") {
      var ms = msOf(text);
      return /^\d{4}-\d{2}-\d{2}/.test(text) && !isNaN(ms) ? ms : null;
    }
    if (kind === "category") {
      var found = categoriesRead(axis).filter(function (c) { return c.name === text; })[0];
      return found ? found.at : null;
    }
    var cleaned = text.replace(/[,\s]/g, "").replace(/^\$/, "").replace(/%$/, "");
    var value = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(cleaned) ? Number(cleaned) : NaN;
    return isFinite(value) ? value : null;
  }

  var axesSaid = 0;
  function axesSay(box, words, field) {
    var said = box.querySelector("[data-axes-said]");
    if (!said.id) said.id = "axes-said-" + (++axesSaid);
    box.querySelectorAll("[data-axes-list] [aria-invalid]").forEach(function (el) {
      el.removeAttribute("aria-invalid");
      el.removeAttribute("aria-describedby");
    });
    said.className = field ? "note error" : "note";
    said.textContent = words;
    if (field) {
      field.setAttribute("aria-invalid", "true");
      field.setAttribute("aria-describedby", said.id);
    }
  }

  /* The range a form asks for, as Plotly.relayout takes it, or the words refusing it. */
  function askedRange(box, plot, form) {
    var name = form.dataset.axis;
    var axis = plot._fullLayout[name];
    var kind = axisKind(axis);
    var fields = form.querySelectorAll("[data-end]");
    var ends = [];
    var words = axisWords(box, plot, name) + ": ";
    for (var i = 0; i < 2; i++) {
      var value = fieldValue(axis, fields[i].value);
      var which = i ? "To" : "From";
      if (value === null) {
        var text = fields[i].value.trim();
        var wanted = kind === "date" ? "a time in UTC, as 2026-12-06 10:00:00" : kind === "category" ? "one of its categories" : "a number";
        return { field: fields[i], refused: words + which + (text ? " \u201c" + text + "\u201d is not " : " is empty, not ") + wanted +
          "; the range is as it was." };
      }
      if (kind === "log" && value <= 0) {
        return { field: fields[i], refused: words + which + " must be above 0 on its log scale; the range is as it was." };
      }
      ends.push(value);
    }
    if (kind === "category") {
      var read = categoriesRead(axis).map(function (c) { return c.at; });
      if (read.indexOf(ends[0]) > read.indexOf(ends[1])) {
        return { field: fields[0], refused: words + "From (" + fields[0].value.trim() + ") comes after To (" + fields[1].value.trim() +
          "); the range is as it was." };
      }
      var low = Math.min(ends[0], ends[1]) - 0.5, high = Math.max(ends[0], ends[1]) + 0.5;
      // (drawn the way it is: a heat map's nodes top down keep their order)
      return { range: axis.range[0] > axis.range[1] ? [high, low] : [low, high] };
    }
    if (ends[0] >= ends[1]) {
      return { field: fields[0], refused: words + "From (" + fields[0].value.trim() + ") must be below To (" + fields[1].value.trim() +
        "); the range is as it was." };
    }
    if (kind === "date") return { range: [timeOf(ends[0]), timeOf(ends[1])] };
    if (kind === "log") return { range: [Math.log10(ends[0]), Math.log10(ends[1])] };
    return { range: ends };
  }

  /* A field, labelled for a screen reader by its axis and chart: a text field, or on an axis of
     categories a choice of them. */
  function axisField(box, plot, name, end) {
    var axis = plot._fullLayout[name];
    var field;
    if (axisKind(axis) === "category") {
      field = document.createElement("select");
      categoriesRead(axis).forEach(function (c) {
        var option = document.createElement("option");
        option.value = c.name;
        option.textContent = c.name.replace(/&lt;/g, "<");
        field.appendChild(option);
      });
    } else {
      field = document.createElement("input");
      field.type = "text";
      field.spellcheck = false;
      field.autocomplete = "off";
      field.size = axisKind(axis) === "date" ? 19 : 8;
      if (axisKind(axis) !== "date") field.inputMode = "decimal";
    }
    field.dataset.end = String(end);
    field.setAttribute("aria-label", (end ? "To, " : "From, ") + axisWords(box, plot, name));
    var label = document.createElement("label");
    label.appendChild(document.createTextNode(end ? "to " : "from "));
    label.appendChild(field);
    return label;
  }

  function axesShape(plot) {
    return JSON.stringify(AXES.map(function (name) {
      var axis = plot._fullLayout[name];
      return [name, axisKind(axis), axisTitle(plot, name), axisKind(axis) === "category" ? categoriesRead(axis) : null];
    }));
  }

  /* The forms made anew when the chart's axes change (another kind, title or categories), else
     kept, so the keyboard's focus and what is being typed stay; the fields show the range drawn,
     but for one typed and not yet applied (unless `all`: the range was just set). */
  function syncAxes(box, plot, all) {
    var set = box.querySelector("[data-chart-axes]");
    if (!set) return;
    set.hidden = !plot.dataset.drawn;
    if (set.hidden) return;
    var list = set.querySelector("[data-axes-list]");
    var shape = axesShape(plot);
    if (list.dataset.shape !== shape) {
      var was = list.contains(document.activeElement) ? document.activeElement : null;
      var focused = was && was.closest("form").dataset.axis + (was.dataset.end || was.dataset.axisDo);
      var typed = {};
      list.querySelectorAll("[data-end]").forEach(function (field) {
        if (field.dataset.typed) typed[field.closest("form").dataset.axis + field.dataset.end] = field.value;
      });
      list.textContent = "";
      AXES.forEach(function (name) {
        var form = document.createElement("form");
        form.className = "axis-range";
        form.dataset.axis = name;
        form.noValidate = true;
        var group = document.createElement("fieldset");
        var legend = document.createElement("legend");
        legend.textContent = name.charAt(0) + " axis" + (axisTitle(plot, name) ? ": " + axisTitle(plot, name) : "");
        group.appendChild(legend);
        group.appendChild(axisField(box, plot, name, 0));
        group.appendChild(axisField(box, plot, name, 1));
        var apply = smallButton("Apply", "Apply the range of the " + axisWords(box, plot, name));
        apply.type = "submit";
        apply.dataset.axisDo = "apply";
        var reset = smallButton("Reset", "Reset the range of the " + axisWords(box, plot, name));
        reset.dataset.axisDo = "reset";
        group.appendChild(apply);
        group.appendChild(reset);
        form.appendChild(group);
        list.appendChild(form);
      });
      list.dataset.shape = shape;
      list.querySelectorAll("[data-end], [data-axis-do]").forEach(function (el) {
        var key = el.closest("form").dataset.axis + (el.dataset.end || el.dataset.axisDo);
        if (key in typed && !all && el.tagName === "INPUT") { el.value = typed[key]; el.dataset.typed = "1"; }
        if (key === focused) el.focus({ preventScroll: true });
      });
    }
    AXES.forEach(function (name) {
      var shown = fieldsOf(plot._fullLayout[name]);
      list.querySelectorAll('[data-axis="' + name + '"] [data-end]').forEach(function (field) {
        if (field.dataset.typed && !all) return;
        delete field.dataset.typed;
        var value = shown[Number(field.dataset.end)];
        if (field.value !== value) field.value = value;
      });
    });
  }

  function bindAxes(box) {
    var set = box.querySelector("[data-chart-axes]");
    if (!set || set.dataset.bound) return;
    set.dataset.bound = "1";
    // (typed and not yet applied: a live update leaves the field as typed)
    set.addEventListener("input", function (event) { if (event.target.dataset.end) event.target.dataset.typed = "1"; });
    set.addEventListener("change", function (event) { if (event.target.dataset.end) event.target.dataset.typed = "1"; });
    set.addEventListener("submit", function (event) {
      event.preventDefault();
      var plot = box.querySelector(".chart");
      if (!plot.dataset.drawn) return;
      var form = event.target;
      var name = form.dataset.axis;
      var asked = askedRange(box, plot, form);
      if (asked.refused) { axesSay(box, asked.refused, asked.field); return; }
      if (name === "xaxis" && rangesOf(box)) box.qmRange = { from: asked.range[0], to: asked.range[1] };
      else (box.qmAxes = box.qmAxes || {})[name] = asked.range;
      setRange(box, plot).then(function () { sayRange(box, plot, name, false); });
    });
    set.addEventListener("click", function (event) {
      var button = event.target.closest('[data-axis-do="reset"]');
      var plot = box.querySelector(".chart");
      if (!button || !plot.dataset.drawn) return;
      var name = button.closest("form").dataset.axis;
      if (name === "xaxis" && rangesOf(box)) box.qmRange = null;
      else (box.qmAxes = box.qmAxes || {})[name] = null;
      setRange(box, plot).then(function () { sayRange(box, plot, name, true); });
    });
  }

  /* The range drawn now, said: "y axis (GPUs) of Queue depth by priority class: from 0 to 5." */
  function sayRange(box, plot, name, reset) {
    var shown = fieldsOf(plot._fullLayout[name]);
    axesSay(box, axisWords(box, plot, name) + (reset ? ", as the chart draws it by itself" : "") +
      ": from " + shown[0] + " to " + shown[1] + (axisKind(plot._fullLayout[name]) === "date" ? " UTC." : "."));
  }

  function draw(box, chart) {
    var plot = box.querySelector(".chart");
    var empty = box.querySelector(".empty");
    var figures = box.querySelector("[data-chart-figures]");
    var ranges = box.querySelector("[data-chart-ranges]");
    if (chart.caption) box.querySelector("figcaption").textContent = chart.caption;
    if (chart.figures) writeFigures(box, chart.figures);
    // (a live figure brings its ranges and values; the page's first has them in its HTML)
    if (ranges && chart.ranges !== undefined) ranges.dataset.ranges = JSON.stringify(chart.ranges);
    if (chart.values !== undefined) writeValues(box, chart.values);
    if (figures) figures.hidden = Boolean(chart.empty);
    if (chart.empty) {
      empty.hidden = false;
      empty.querySelector("p").textContent = chart.empty;
      if (plot.dataset.drawn) {
        Plotly.purge(plot);
        delete plot.dataset.drawn; delete plot.dataset.qmClicks; delete plot.dataset.qmLegend; delete plot.dataset.qmZoom; delete plot.dataset.qmAfterplot;
      }
      plot.hidden = true;
      box.dataset.rendered = "empty";
      syncSeries(box, plot);
      syncRanges(box, plot);
      syncAxes(box, plot, true);
      writeValues(box, null);
      return Promise.resolve();
    }
    empty.hidden = true;
    plot.hidden = false;
    bindSeries(box);
    bindRanges(box);
    bindAxes(box);
    // (copied before plotly writes its autorange into the layout it draws)
    box.qmFigureAxes = figureAxes(chart.figure.layout);
    var own = chart.figure.layout.xaxis || {};
    box.qmOwnTicks = { dtick: own.dtick, ticklabelmode: own.ticklabelmode || "instant" };
    var data = keepHidden(box, chart.figure.data);
    var layout = thinSlotTicks(plot, keepPeriodTicks(keepRange(box, chart.figure.layout)), data);
    return Plotly.react(plot, data, layout, PLOT_CONFIG).then(function () {
      return slotTicks(plot);
    }).then(function () {
      hideDecorations(plot);
      plot.dataset.drawn = "1";
      box.dataset.rendered = "plot";
      attachClicks(plot);
      attachLegend(box, plot);
      attachZoom(box, plot);
      attachAfterplot(plot);
      syncSeries(box, plot);
      syncRanges(box, plot);
      showValues(box, plot);
      syncAxes(box, plot, false);
    });
  }

  QM.drawAll = function () {
    var boxes = document.querySelectorAll("[data-chart]");
    if (!boxes.length) {  // no chart on this page: plotly.js is not even loaded
      document.body.dataset.chartsReady = "true";
      return Promise.resolve();
    }
    var pending = [];
    boxes.forEach(function (box) {
      var empty = !box.querySelector(".empty").hidden;
      pending.push(draw(box, { figure: figureOf(box.dataset.chart), empty: empty ? box.querySelector(".empty p").textContent : "" }));
    });
    return Promise.all(pending).then(function () { document.body.dataset.chartsReady = "true"; });
  };

  /* -------------------------------------------------------------------- live updates */

  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";

  /* What a focused element of a live fragment is: its id, what it does (the API it calls, where
     it leads), its words, and its place among the fragment's focusable elements. */
  function focusedAs(root, el) {
    return { id: el.id, tag: el.tagName, does: el.getAttribute("data-api-post") || el.getAttribute("data-url") ||
             el.getAttribute("href") || "", words: el.textContent.trim(),
             at: Array.prototype.indexOf.call(root.querySelectorAll(FOCUSABLE), el) };
  }

  function refocus(root, was) {
    var all = Array.prototype.slice.call(root.querySelectorAll(FOCUSABLE));
    var same = (was.id && document.getElementById(was.id)) || all.filter(function (el) {
      return el.tagName === was.tag && (el.getAttribute("data-api-post") || el.getAttribute("data-url") ||
        el.getAttribute("href") || "") === was.does && el.textContent.trim() === was.words;
    })[0] || all[Math.min(was.at, all.length - 1)];
    if (same && root.contains(same)) same.focus({ preventScroll: true });
  }

  QM.apply = function (data) {
    var charts = data.charts || {};
    Object.keys(charts).forEach(function (key) {
      var box = boxFor(key);
      if (box) draw(box, charts[key]);
    });
    var text = data.text || {};
    var said = announced();
    Object.keys(text).forEach(function (key) {
      // Only a changed text is written: rewriting the same words every few seconds is a change
      // to the page for a screen reader.
      document.querySelectorAll('[data-live="' + key + '"]').forEach(function (el) {
        if (el.textContent !== text[key]) el.textContent = text[key];
      });
    });
    if (data.rows) insertRows(data.rows);
    if (data.left) markLeft(data.left);
    var html = data.html || {};
    Object.keys(html).forEach(function (key) {
      document.querySelectorAll('[data-live-html="' + key + '"]').forEach(function (el) {
        // A choice being made or words being typed (a select or an input of the fragment has
        // focus: a hold's reason) are not swept away: the fragment is refreshed by the next
        // update after it.
        var focused = document.activeElement;
        if (focused && (focused.tagName === "SELECT" || focused.tagName === "INPUT") && el.contains(focused)) return;
        // A button or link with the keyboard's focus (Cancel, a node's cordon) is replaced by its
        // like in the new fragment, which takes the focus: it fell to the page's start before.
        var was = focused && focused !== el && el.contains(focused) ? focusedAs(el, focused) : null;
        el.innerHTML = html[key];
        bindActions(el);
        if (was) refocus(el, was);
        // Charts that arrived inside the fragment: draw them from their own JSON.
        el.querySelectorAll("[data-chart]").forEach(function (box) {
          var empty = !box.querySelector(".empty").hidden;
          draw(box, { figure: figureOf(box.dataset.chart),
                      empty: empty ? box.querySelector(".empty p").textContent : "" });
        });
      });
    });
    announce(said, data.said);
    if (data.after !== undefined) keepUpWith(data.after);
    if (data.state) {
      QM.state = data.state;
      markStaleForms(data.state);
      settleActionResult(data.state);
    }
    if (data.stop) QM.stop();
    document.body.dataset.liveUpdates = String(Number(document.body.dataset.liveUpdates || "0") + 1);
  };

  /* An action's notice ("Job 10 is stopping: its processes get 30 s to exit.") speaks of the job
     as the action left it: once the job moves on (its processes exited: Cancelled) it is taken
     away, where it stood above a Cancelled badge until the page was reloaded. A node's page
     gives its node's state the same way ("h100-03: ready → cordoned: …" goes once uncordoned). */
  function settleActionResult(state) {
    var out = document.getElementById("action-result");
    if (!out || out.hidden || !out.dataset.forState || out.dataset.forState === state) return;
    out.hidden = true;
    out.textContent = "";
    delete out.dataset.forState;
  }

  /* A form built for the job as it stood (the Change panel: a waiting job's shape fields) says
   * so once the job has moved on, and sends nothing: the server would refuse what no longer
   * applies. Not a live fragment, so what was typed stays (h50's walk, 5 Dec: a pending job's
   * form still offered its shape after it started). */
  function markStaleForms(state) {
    document.querySelectorAll("[data-form-for-state]").forEach(function (panel) {
      var stale = panel.dataset.formForState !== state;
      var note = panel.querySelector("[data-stale-note]");
      var button = panel.querySelector('button[type="submit"]');
      if (note) {
        note.hidden = !stale;
        note.textContent = stale ? "The job is no longer " + panel.dataset.formForStateSaid + " (it is " +
          state.replace(/_/g, " ") + " now): this form was for it as it stood. Reload the page for what can " +
          "change now." : "";
      }
      if (button) button.disabled = stale;
    });
  }

  /* A job's or a node's state changed by a live update (an element marked data-announce="Job 12",
     its badge inside) is said once in #live-said, a polite status: "Job 12: Running". The rest
     of a page's live figures (tiles, tables) change silently: read when reached. */
  function announced() {
    var now = {};
    document.querySelectorAll("[data-announce]").forEach(function (el) {
      now[el.dataset.announce] = el.textContent.replace(/\s+/g, " ").trim();
    });
    return now;
  }

  /* `news`: a sentence of the update's own about what it brought (the jobs list's new jobs:
     "New in this list: job 12 train."), said with the states that changed, and not again while
     it stays the same (a notice of "2 new jobs" each poll until they are shown). */
  var lastNews = "";
  function announce(before, news) {
    var out = document.getElementById("live-said");
    if (!out) return;
    var after = announced();
    var changes = Object.keys(after).filter(function (key) { return key in before && before[key] !== after[key]; })
      .map(function (key) { return key + ": " + after[key]; });
    if (news !== undefined) {
      if (news && news !== lastNews) changes.push(news.replace(/\.$/, ""));
      lastNews = news;
    }
    if (changes.length) out.textContent = changes.join(". ");
  }

  /* A list's new rows (the jobs list, its first page newest first: frontend/views/jobs.
     _list_news), newest first, go in at the top of its table ([data-live-rows]), above the rows
     read, which keep their order. The page keeps its size (data-live-rows-max): a row pushed
     past it goes, as a reload would show the page, unless it holds the keyboard's focus. */
  function insertRows(rows) {
    var body = document.querySelector("[data-live-rows]");
    if (!body || !rows.length) return;
    var made = document.createElement("tbody");
    made.innerHTML = rows.join("");
    var first = body.firstElementChild;
    Array.prototype.slice.call(made.children).forEach(function (row) { body.insertBefore(row, first); });
    var most = Number(body.dataset.liveRowsMax || "0");
    var focused = document.activeElement;
    while (most && body.children.length > most && !body.lastElementChild.contains(focused)) {
      body.removeChild(body.lastElementChild);
    }
    var table = document.querySelector("[data-live-rows-table]");
    if (table) table.hidden = false;
    var empty = document.querySelector("[data-live-rows-empty]");
    if (empty) empty.hidden = true;
  }

  /* The rows of a list's jobs that no longer match its filters (`left`: a job listed as pending
     that started), marked where they stand, not taken away: rows do not move under the reader's
     eyes or cursor (as a new job is told, not put in, in a list sorted otherwise). A row whose
     job matches again is unmarked. */
  function markLeft(left) {
    var body = document.querySelector("[data-live-rows]");
    if (!body) return;
    var gone = new Set(left.map(String));
    Array.prototype.forEach.call(body.querySelectorAll("tr[data-job]"), function (row) {
      var note = row.querySelector("[data-left-note]");
      var leaving = gone.has(row.dataset.job);
      row.classList.toggle("left-list", leaving);
      if (leaving && !note) {
        note = document.createElement("span");
        note.className = "note left-note";
        note.setAttribute("data-left-note", "");
        note.textContent = "No longer matches this list's filters; gone at the next reload.";
        (row.querySelector(".job-name") || row.lastElementChild).appendChild(note);
      } else if (!leaving && note) {
        note.remove();
      }
    });
  }

  /* The next poll of a list asks about the rows it shows now and the jobs after the newest it
     has seen (`after`): a row put in is not told as new again. */
  function keepUpWith(after) {
    var body = document.querySelector("[data-live-rows]");
    var ids = body ? Array.prototype.map.call(body.querySelectorAll("tr[data-job]"), function (row) {
      return row.dataset.job;
    }).slice(0, 100) : [];
    document.body.dataset.liveExtra = "ids=" + ids.join("%2C") + "&after=" + encodeURIComponent(after);
  }

  function liveUrl() {
    var url = document.body.dataset.liveUrl;
    var extra = document.body.dataset.liveExtra;
    return extra ? url + (url.indexOf("?") < 0 ? "?" : "&") + extra : url;
  }

  /* When the page's live updates last answered: what a page left showing is as it was then. */
  var keptUpAt = new Date();

  /* That instant in UTC, as the pages say times, with its date when it was not today (UTC): an
     answer before midnight said as "23:59:50 UTC" alone read as today's. */
  function keptUpWhen() {
    var at = keptUpAt.toISOString();
    var today = new Date().toISOString().slice(0, 10);
    return (at.slice(0, 10) === today ? "" : at.slice(0, 10) + " ") + at.slice(11, 19) + " UTC";
  }

  /* A 404 or 403 from a page's live endpoint does not pass (the job or node deleted, the reader
     no longer in its team): the page says the endpoint's words (its JSON `detail`, "No node is
     named 'a100-04'.": frontend/views/live_json.py), stops asking, and keeps what it showed,
     marked as no longer kept up. A 5xx or an unreachable server may pass: those retry. */
  function goneFromView(response) {
    return response.json().catch(function () { return {}; }).then(function (body) {
      var detail = (body && body.detail) || (response.status === 404
        ? "What this page shows no longer exists, or is no longer visible to you."
        : "What this page shows is no longer visible to you.");
      QM.stop();
      markStale();
      closeActions(detail);
      showBanner("Live updates stopped: " + detail + " What this page shows is as it was at " +
        keptUpWhen() + " and is no longer kept up.");
      return null;
    });
  }

  /* The page's actions on what is gone (a node's cordon and drain, a job's hold, cancel, requeue,
     its Change form) would only get the API's 404: they are disabled, each titled with why, and
     the reasons typed for them with them. `data-gone` keeps them so (bindActions' finally). */
  function closeActions(detail) {
    var why = "Not available: live updates stopped. " + detail;
    var buttons = document.querySelectorAll('[data-api-post], [data-job-url] button[type="submit"]');
    buttons.forEach(function (button) {
      button.disabled = true;
      button.dataset.gone = "true";
      button.title = why;
      var source = button.dataset.bodyFrom && document.getElementById(button.dataset.bodyFrom);
      if (source) { source.disabled = true; source.title = why; }
    });
  }

  function markStale() {
    document.body.dataset.liveStopped = "true";
    document.querySelectorAll("[data-live-html], [data-live], [data-chart]").forEach(function (el) {
      el.classList.add("live-stale");
    });
  }

  QM.poll = function () {
    var url = liveUrl();
    if (!url) return Promise.resolve();
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.redirected || response.status === 401) {
          QM.stop();
          showBanner("Your session ended: reload the page to log in again.");
          return null;
        }
        if (response.status === 404 || response.status === 403) return goneFromView(response);
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        if (data) { failures = 0; keptUpAt = new Date(); hideBanner(); QM.apply(data); }
      })
      .catch(function (error) {
        failures += 1;
        showBanner("Live updates paused (" + error.message + "); retrying.");
      });
  };

  /* Polls follow one another (a timeout each, not an interval): after a transient fault (the
     server out of reach, a 5xx) each wait is twice the last, up to eight times the page's pace,
     so a struggling server is not asked at full rate by every open page; an answer brings the
     pace back. `chain` tells a stopped (or restarted) round of polls not to go on. */
  var timer = null;
  var chain = 0;
  var failures = 0;
  function pollAfter(round) {
    var every = Number(document.body.dataset.liveEvery || "5000");
    timer = window.setTimeout(function () {
      if (round !== chain) return;
      var asked = document.hidden ? Promise.resolve() : QM.poll();
      asked.then(function () { if (round === chain) pollAfter(round); });
    }, every * Math.pow(2, Math.min(failures, 3)));
  }
  QM.start = function () {
    if (!document.body.dataset.liveUrl || timer) return;
    chain += 1;
    pollAfter(chain);
  };
  QM.stop = function () {
    if (timer) window.clearTimeout(timer);
    timer = null;
    chain += 1;
  };

  function showBanner(message) {
    var banner = document.getElementById("live-banner");
    if (!banner) {
      banner = document.createElement("p");
      banner.id = "live-banner";
      banner.className = "banner";
      banner.setAttribute("role", "status");  // said once, politely: the page goes on
      document.querySelector("main").prepend(banner);
    }
    banner.textContent = message;
    banner.hidden = false;
  }
  function hideBanner() {
    var banner = document.getElementById("live-banner");
    if (banner) banner.hidden = true;
  }

  /* ------------------------------------------------------------------------ the API */

  QM.api = function (method, url, body) {
    var init = {
      method: method,
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(url, init).then(function (response) {
      return response.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = { detail: text.slice(0, 300) }; }
        return { status: response.status, ok: response.ok, data: data || {} };
      });
    });
  };

  /* A form marked data-submit-on-change (the job page's run and rank) goes as soon as one of its
     selects changes; empty choices are left out of the address. Its button stays for keyboards. */
  document.addEventListener("change", function (event) {
    var form = event.target.closest && event.target.closest("form[data-submit-on-change]");
    if (!form || event.target.tagName !== "SELECT") return;
    var query = new URLSearchParams();
    new FormData(form).forEach(function (value, name) { if (value !== "") query.append(name, value); });
    var text = query.toString();
    window.location.assign(form.getAttribute("action") + (text ? "?" + text : ""));
  });

  /* The API's answer to an action, said on the page: its pointers to the CLI (`qm release 52`,
     after a hold or a requeue that leaves the job held) name the page's button that does it;
     qm says the API's words as they are. */
  function onThePage(text) {
    return text.replace(/\bqm release \d+\b/g, "its Release button");
  }

  /* Buttons that call the API: <button data-api-post="/api/v1/..." data-confirm="..."> */
  function bindActions(root) {
    root.querySelectorAll("[data-api-post]").forEach(function (button) {
      if (button.dataset.bound) return;
      button.dataset.bound = "1";
      button.addEventListener("click", function () {
        // data-body-from: an input whose text, when typed, is sent as data-body-field (a hold's reason).
        // data-body: fixed fields sent with it (a requeue's {"hold": true}).
        var source = button.dataset.bodyFrom ? document.getElementById(button.dataset.bodyFrom) : null;
        var typed = source ? source.value.trim() : "";
        var question = button.dataset.confirm;
        if (question && typed) question += " (" + button.dataset.bodyField + ": " + typed + ")";
        if (question && !window.confirm(question)) return;
        var out = document.getElementById(button.dataset.result || "action-result");
        var body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
        if (typed) {
          body = body || {};
          body[button.dataset.bodyField] = typed;
        }
        button.disabled = true;
        QM.api("POST", button.dataset.apiPost, body).then(function (result) {
          if (out) {
            delete out.dataset.forState;  // the refresh below shows the state it speaks of
            out.hidden = false;
            out.className = result.ok ? "notice ok" : "notice error";
            out.textContent = result.data.detail ? onThePage(result.data.detail) : (result.ok ? (button.dataset.done || "Done.") : "Refused (HTTP " + result.status + ").");
          }
          // data-body-clear: an input shared by several buttons (the Nodes page's reason) is sent
          // once, so the next action does not carry it unasked.
          if (result.ok && source && button.dataset.bodyClear !== undefined) source.value = "";
          // A request refused as invalid changed nothing: its words (and what was typed) stay.
          if (result.status === 400) return null;
          return QM.poll().then(function () { if (out && QM.state) out.dataset.forState = QM.state; });
        }).finally(function () { button.disabled = button.dataset.gone === "true"; });
      });
    });
  }

  /* ------------------------------------------------------------------ the submit form */

  /* Fields typed in a unit the API takes in seconds (the Change form's runtime limit is said in
     hours, minutes or seconds, whichever says it exactly: frontend/views/jobs.limit_field). */
  var UNIT_SECONDS = { hours: 3600, minutes: 60, seconds: 1 };

  /* One input's value as the API takes it; undefined when left empty. */
  function inputValue(input) {
    var kind = input.dataset.kind || "text";
    if (input.tagName === "SELECT" && input.multiple) {
      var chosen = Array.prototype.filter.call(input.options, function (o) { return o.selected; }).map(function (o) { return o.value; });
      return chosen.length ? chosen : undefined;
    }
    // A yes-or-no option (members on distinct nodes): true or false, never the box's "on".
    if (input.type === "checkbox") return input.checked;
    var raw = input.value.trim();
    if (raw === "") return undefined;
    // Lines the API reads as they are (the environment's NAME=value lines: a value's spaces are its own).
    if (kind === "lines") return input.value;
    if (kind === "int") return /^-?\d+$/.test(raw) ? Number(raw) : raw;
    if (kind in UNIT_SECONDS) {
      var amount = Number(raw);
      return isFinite(amount) ? Math.round(amount * UNIT_SECONDS[kind]) : raw;
    }
    return raw;
  }

  function roleRows(form) {
    return Array.prototype.slice.call(form.querySelectorAll("[data-role-row]"));
  }

  /* A heterogeneous gang's roles as the API takes them: one object per row, its filled fields. */
  function formRoles(form) {
    return roleRows(form).map(function (row) {
      var role = {};
      row.querySelectorAll("[data-role-field]").forEach(function (input) {
        var value = inputValue(input);
        if (value !== undefined) role[input.dataset.roleField] = value;
      });
      return role;
    });
  }

  function formBody(form) {
    var body = {};
    form.querySelectorAll("[data-field]").forEach(function (input) {
      var value = inputValue(input);
      if (value !== undefined) body[input.dataset.field] = value;
    });
    var roles = formRoles(form);
    if (roles.length) body.roles = roles;
    return body;
  }

  /* With roles, the API takes `gpus` as their sum (members × GPUs per member): the GPUs field
     shows it, read-only, summing the rows whose two numbers are typed (empty until one is).
     Without roles it is the researcher's field again, with what they had typed. */
  function syncRoleGpus(form) {
    var gpus = form.querySelector('[data-field="gpus"]');
    var note = form.querySelector("[data-gpus-from-roles]");
    var roles = formRoles(form);
    if (!roles.length) {
      if (gpus.readOnly) {
        gpus.readOnly = false;
        gpus.value = gpus.dataset.typed || "";
        note.hidden = true;
      }
      return;
    }
    if (!gpus.readOnly) {
      gpus.dataset.typed = gpus.value;
      gpus.readOnly = true;
      note.hidden = false;
    }
    var total = null;
    roles.forEach(function (role) {
      if (typeof role.count === "number" && typeof role.gpus_per_member === "number") {
        total = (total || 0) + role.count * role.gpus_per_member;
      }
    });
    gpus.value = total === null ? "" : String(total);
  }

  /* Each row's legend, remove button and error slots say its place: the API names a role's
     field by its index (`roles.1.count`), and so does the slot that shows the error. */
  function numberRoles(form) {
    roleRows(form).forEach(function (row, i) {
      row.querySelector("[data-role-legend]").textContent = "Role " + (i + 1);
      row.querySelector("[data-remove-role]").setAttribute("aria-label", "Remove role " + (i + 1));
      row.querySelectorAll("[data-role-field]").forEach(function (input) {
        var field = input.dataset.roleField;
        input.dataset.path = "roles." + i + "." + field;
        var slot = row.querySelector('[data-role-error="' + field + '"]');
        slot.id = "role-" + i + "-" + field + "-error";
        input.setAttribute("aria-describedby", slot.id);
      });
      row.querySelectorAll("[data-role-error]").forEach(function (slot) {
        var field = slot.dataset.roleError;
        slot.dataset.errorFor = "roles." + i + (field ? "." + field : "");
      });
    });
  }

  /* A field typed in hours or minutes that the API takes in seconds: the API's words on it say
     each amount in the field's unit. Its bare bound ("Ensure this value is greater than or equal
     to 1.") and every "N s" become hours or minutes ("200 h"; one not whole to three figures
     keeps its seconds: "1.51 h (5432 s)", and one under a whole unit is said in seconds alone:
     "at least 1 s", not "0.000278 h (1 s)"); the words the API adds after an amount ("720000 s
     (8 d 8 h)", "(604800 s), which is 7 d") go, the field's unit saying it. Under *Runtime
     limit (hours)* it said "720000 s (8.3 days) is beyond the maximum … (604800 s)" of 200 hours
     typed. Other words are left as they are. */
  var FIELD_UNITS = { hours: [3600, "h", "hours"], minutes: [60, "min", "minutes"] };

  function inUnit(seconds, unit) {
    var n = Number(seconds);
    var exact = n / unit[0];
    // Three figures, but never fewer than the whole units' digits and two after them: 1234 h
    // typed was said "1230 h (4442400 s)", 99999 h "100000 h".
    var whole = Math.abs(exact) >= 1 ? Math.floor(Math.log10(Math.abs(exact))) + 1 : 1;
    var amount = Number(exact.toPrecision(Math.min(21, Math.max(3, whole + 2))));
    if (Math.abs(n) < unit[0] && amount * unit[0] !== n) return n + " s";
    return amount + " " + unit[1] + (amount * unit[0] === n ? "" : " (" + n + " s)");
  }

  /* One pass over the API's words, so that the seconds an amount keeps ("1.51 h (5432 s)") are
     not read again as an amount: "1230 h (1230 h (4442400 s))" was said of 1234 hours typed. */
  var SPAN = "[\\d.,]+ ?[a-z]+(?: [\\d.,]+ ?[a-z]+)*";
  var SECONDS_SAID = new RegExp(
    // "(604800 s), which is 7 d" | "720000 s (8 d 8 h)" | "1 s" | "than or equal to 1."
    "\\((\\d+) s\\), which is " + SPAN + "|\\b(\\d+) s \\(" + SPAN + "\\)|\\b(\\d+) s\\b|(than or equal to )(-?\\d+)\\.", "g");

  function inFieldUnit(input, text) {
    var unit = input && FIELD_UNITS[input.dataset.kind];
    if (!unit) return text;
    // The API's words for an amount after its seconds are a runtime limit's span, "8 d 8 h".
    return text
      .replace(SECONDS_SAID, function (all, maximum, spanned, bare, bound, boundSeconds) {
        if (maximum !== undefined) return "(" + inUnit(maximum, unit) + ")";
        if (bound !== undefined) return bound + inUnit(boundSeconds, unit) + ".";
        return inUnit(spanned !== undefined ? spanned : bare, unit);
      })
      .replace(/\bin seconds\b/g, "in " + unit[2]);
  }

  /* A field's name as the form labels it (the words of its <label>, not its hint; a field typed
     in a unit without its "(hours)", which its amounts now say; a role's field with its row:
     "Role 2, Members"), or the legend of the fieldset of a slot with no field of its own. */
  function ownWords(el) {
    return Array.prototype.filter.call(el.childNodes, function (n) { return n.nodeType === 3; })
      .map(function (n) { return n.textContent; }).join(" ").replace(/\s+/g, " ").trim();
  }

  function labelWords(input) {
    var label = input && input.closest("label");
    if (!label) return "";
    var words = ownWords(label);
    if (FIELD_UNITS[input.dataset.kind] || input.dataset.kind in UNIT_SECONDS) words = words.replace(/\s*\([^()]*\)$/, "");
    return words;
  }

  function fieldLabel(input, slot) {
    var words = labelWords(input);
    var row = slot.closest("[data-role-row]");
    var rowName = row ? row.querySelector("[data-role-legend]").textContent.trim() : "";
    if (!words) {
      var fieldset = slot.closest("fieldset");
      var legend = fieldset && fieldset.querySelector("legend");
      return legend ? legend.textContent.trim() : "";
    }
    return rowName ? rowName + ", " + words : words;
  }

  /* The API's words on a field name its fields as the API does ("min_gpus 8 is more than gpus
     4"): on a form each is said by its label ("Elastic: min GPUs 8 is more than GPUs 4"), the
     labels being the one home of those words. A name is one that is no English word (with an
     underscore; `gpus`, `env`), of a field this form has; the API keeps its names. */
  var API_NAME = /\b(?:[a-z]+(?:_[a-z]+)+|gpus|env)\b/g;

  function inFormWords(form, text) {
    var words = {};
    form.querySelectorAll("[data-field], [data-role-field]").forEach(function (input) {
      var name = input.dataset.field || input.dataset.roleField;
      if (!(name in words)) words[name] = labelWords(input);
    });
    return text.replace(API_NAME, function (name) { return words[name] || name; });
  }

  /* The field's error is its description: a screen reader on the field hears why it is refused,
     not only that it is ("invalid entry"). */
  var errorIds = 0;
  function describedBy(input, slot) {
    if (!slot.id) slot.id = "field-error-" + (++errorIds);
    var ids = (input.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
    if (ids.indexOf(slot.id) < 0) input.setAttribute("aria-describedby", ids.concat([slot.id]).join(" "));
  }

  /* The API's errors on the form: each on its field's slot, in the field's unit. Returns what it
     said where: `placed`, one {key, label, text} a slot, in the form's order; `unplaced`, the
     errors no slot shows ("field: why", or the why alone of one about no field). */
  function placeErrors(form, errors) {
    form.querySelectorAll("[data-error-for]").forEach(function (el) { el.textContent = ""; el.hidden = true; });
    form.querySelectorAll("[data-field], [data-path]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
    var unplaced = [];
    var fieldOf = {};
    Object.keys(errors || {}).forEach(function (field) {
      // The nearest slot: `roles.1.count` on its row's field, `gpu_types.0` on gpu_types.
      var parts = field.split(".");
      var slot = null;
      var key = field;
      while (parts.length && !slot) {
        key = parts.join(".");
        slot = form.querySelector('[data-error-for="' + key + '"]');
        parts.pop();
      }
      var text = [].concat(errors[field]).join(" ");
      if (slot) {
        var input = form.querySelector('[data-field="' + key + '"], [data-path="' + key + '"]');
        fieldOf[key] = input;
        text = inFormWords(form, inFieldUnit(input, text));
        slot.textContent = slot.textContent ? slot.textContent + " " + text : text;
        slot.hidden = false;
        if (input) {
          input.setAttribute("aria-invalid", "true");
          describedBy(input, slot);
        }
      } else {
        text = inFormWords(form, text);
        unplaced.push(field === "non_field_errors" ? text : field + ": " + text);
      }
    });
    var placed = [];
    form.querySelectorAll("[data-error-for]").forEach(function (slot) {
      var key = slot.dataset.errorFor;
      if (slot.hidden || !(key in fieldOf)) return;
      placed.push({ key: key, label: fieldLabel(fieldOf[key], slot), text: slot.textContent });
    });
    return { placed: placed, unplaced: unplaced };
  }

  function showErrors(form, errors) {
    return placeErrors(form, errors).unplaced;
  }

  QM.showErrors = showErrors;

  /* The sentence under a form the API refused, in the form's words: each field marked by its
     label with the words on it ("Fix the fields marked: Runtime limit: 200 h is beyond …;
     Runs after: no job 99999 you can see."), the field whose shape this fleet can never run
     first (`neverRuns`, the live check's), then what no field shows. It repeated the API's
     sentence, which names its fields ("runtime_limit_s: …", "dependencies.1.job: …") and
     says seconds. With nothing marked, the API's own sentence (`fallback`). */
  function refusalSentence(said, fallback, neverRuns) {
    // A text that begins with its label already ("Elastic: min GPUs 8 is more than GPUs 4") is not labelled twice.
    var clause = function (p) {
      var text = p.text.replace(/\.$/, "");
      return (p.label && text.indexOf(p.label) !== 0 ? p.label + ": " : "") + text;
    };
    var first = null;
    var rest = said.placed.filter(function (p) {
      if (!first && neverRuns && (p.key === neverRuns || neverRuns.indexOf(p.key + ".") === 0)) { first = p; return false; }
      return true;
    });
    var unplaced = said.unplaced.length ? " " + said.unplaced.join(" ") : "";
    if (!said.placed.length) return (fallback || "") + unplaced;
    var others = rest.map(clause).join("; ");
    if (first) {
      return "This job can never run on this fleet: " + first.text.replace(/\.$/, "") + "." +
        (others ? " Fix the other fields marked too: " + others + "." : "") + unplaced;
    }
    return "Fix the fields marked: " + others + "." + unplaced;
  }

  // The Nodes page's maintenance form marks its fields and says its refusal as these forms do.
  QM.placeErrors = placeErrors;
  QM.refusalSentence = refusalSentence;

  function bindSubmitForm(form) {
    var verdict = form.querySelector("[data-verdict]");
    var checkUrl = form.dataset.checkUrl;
    var seq = 0;
    var debounce = null;

    function check() {
      var mine = ++seq;
      var body = formBody(form);
      // Nothing to check until GPUs are typed (0 is typed, and checked), or with roles until
      // one role has its members and GPUs per member; an emptied field also takes its earlier
      // errors and verdict away.
      if (body.gpus === undefined) {
        showErrors(form, {});
        verdict.textContent = ""; verdict.className = "verdict";
        return;
      }
      QM.api("POST", checkUrl, body).then(function (result) {
        if (mine !== seq) return;  // a newer keystroke's answer will come
        var said = placeErrors(form, result.data.errors || {});
        if (result.ok && result.data.runs) {
          // Taken, but its team's quotas could never admit it: not the green of a job that runs.
          verdict.className = result.data.never_under_quota ? "verdict warn" : "verdict ok";
          verdict.textContent = result.data.detail;
        } else {
          verdict.className = "verdict error";
          verdict.textContent = refusalSentence(said, result.data.detail, result.data.never_runs);
        }
      });
    }

    function checkSoon() {
      window.clearTimeout(debounce);
      debounce = window.setTimeout(check, 250);
    }

    form.addEventListener("input", function (event) {
      if (event.target.dataset.roleField) syncRoleGpus(form);
      checkSoon();
    });

    // Only the priority classes the picked team may submit in (each option names its teams):
    // the others are hidden, and one picked that the team may not use goes back to its default.
    var teamSelect = form.querySelector('select[name="team"]');
    var classSelect = form.querySelector('select[name="priority_class"]');
    function offerTheTeamsClasses() {
      if (!teamSelect || !classSelect) return;
      Array.prototype.forEach.call(classSelect.options, function (option) {
        if (option.dataset.teams === undefined) return;  // "the team's default"
        var theirs = option.dataset.teams.split(" ").indexOf(teamSelect.value) >= 0;
        option.hidden = !theirs;
        option.disabled = !theirs;
      });
      var picked = classSelect.options[classSelect.selectedIndex];
      if (picked && picked.disabled) classSelect.value = "";
    }
    if (teamSelect) teamSelect.addEventListener("change", offerTheTeamsClasses);
    offerTheTeamsClasses();

    var rows = form.querySelector("[data-role-rows]");
    var template = document.getElementById("role-row-template");
    var addRole = form.querySelector("[data-add-role]");
    if (rows && template && addRole) {
      addRole.addEventListener("click", function () {
        rows.appendChild(template.content.cloneNode(true));
        seq++;  // an answer on its way names the rows as they were
        numberRoles(form);
        syncRoleGpus(form);
        var added = rows.lastElementChild;
        added.querySelector('[data-role-field="name"]').focus();
        checkSoon();
      });
      rows.addEventListener("click", function (event) {
        var remove = event.target.closest("[data-remove-role]");
        if (!remove) return;
        var row = remove.closest("[data-role-row]");
        var next = row.nextElementSibling || row.previousElementSibling;
        row.remove();
        seq++;
        numberRoles(form);
        syncRoleGpus(form);
        // Focus stays in the roles: on the row that took its place, else on "Add a role".
        (next ? next.querySelector("[data-remove-role]") : addRole).focus();
        checkSoon();
      });
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      // The submit's answer is the last word: a live check still waiting to fire, or one on its
      // way back, would otherwise replace the submit's field errors with its own.
      window.clearTimeout(debounce);
      seq++;
      var body = formBody(form);
      var isArray = body.array !== undefined;
      var url = isArray ? form.dataset.arrayUrl : form.dataset.jobUrl;
      var button = form.querySelector('button[type="submit"]');
      button.disabled = true;
      verdict.className = "verdict";
      verdict.textContent = "Submitting…";
      QM.api("POST", url, body).then(function (result) {
        if (result.status === 201 || result.status === 200) {
          window.location.href = isArray ? "/jobs/?array_id=" + result.data.array_id : "/jobs/" + result.data.id + "/";
          return;
        }
        verdict.className = "verdict error";
        verdict.textContent = refusalSentence(placeErrors(form, result.data.errors || {}),
          result.data.detail || "The API refused the job (HTTP " + result.status + ").");
        button.disabled = false;
      }).catch(function (error) {
        verdict.className = "verdict error";
        verdict.textContent = "Could not reach the API: " + error.message;
        button.disabled = false;
      });
    });
  }

  /* ---------------------------------------------------------------- the Change form */

  /* A field's value as shown, to tell a field changed from one left as it was. */
  function shownValue(input) {
    if (input.type === "checkbox") return String(input.checked);
    if (input.tagName === "SELECT" && input.multiple) {
      return Array.prototype.filter.call(input.options, function (o) { return o.selected; })
        .map(function (o) { return o.value; }).sort().join(",");
    }
    return input.value.trim();
  }

  /* An emptied field as the API takes it (its data-empty): null, 0, [] or a word ("none"). */
  function emptied(input) {
    var empty = input.dataset.empty;
    if (empty === "null") return null;
    if (empty === "0") return 0;
    if (empty === "[]") return [];
    return empty === undefined ? "" : empty;
  }

  /* The job page's Change form: PATCH jobs/{id}/ with the fields changed (as `qm update`).
     The server judges them: its 4xx errors go next to their fields, its answer's job is
     shown in the form and the page's live fragments (shape, status, events) are refreshed. */
  function bindChangeForm(form) {
    var verdict = form.querySelector("[data-verdict]");
    var fields = Array.prototype.slice.call(form.querySelectorAll("[data-field]"));
    var initial = {};
    function remember() {
      fields.forEach(function (input) { initial[input.dataset.field] = shownValue(input); });
    }
    remember();

    /* A field marked data-shown-from="changes" (dependencies: the job says them as a list, the
       answer's `changes` as the server's text) shows the new value of its change, its
       data-empty word ("none") as empty; one not changed keeps what is shown. */
    function show(job, changes) {
      fields.forEach(function (input) {
        var name = input.dataset.field;
        if (input.dataset.shownFrom === "changes") {
          if (changes && name in changes) {
            var now = changes[name][1];
            input.value = now === null || now === undefined || now === input.dataset.empty ? "" : String(now);
          }
          return;
        }
        if (!(name in job)) return;
        var value = job[name];
        if (input.type === "checkbox") {
          input.checked = value === true;
        } else if (input.tagName === "SELECT" && input.multiple) {
          var chosen = value || [];
          Array.prototype.forEach.call(input.options, function (o) { o.selected = chosen.indexOf(o.value) >= 0; });
        } else if (value === null || value === undefined) {
          input.value = "";
        } else if (input.dataset.kind in UNIT_SECONDS) {
          input.value = String(Number((value / UNIT_SECONDS[input.dataset.kind]).toPrecision(6)));
        } else {
          input.value = String(value);
        }
      });
      remember();
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var body = {};
      fields.forEach(function (input) {
        if (shownValue(input) === initial[input.dataset.field]) return;
        var value = inputValue(input);
        body[input.dataset.field] = value === undefined ? emptied(input) : value;
      });
      var button = form.querySelector('button[type="submit"]');
      button.disabled = true;
      showErrors(form, {});
      verdict.className = "verdict";
      verdict.textContent = "Changing…";
      QM.api("PATCH", form.dataset.jobUrl, body).then(function (result) {
        if (result.ok) {
          verdict.className = "verdict ok";
          verdict.textContent = result.data.detail || "Changed.";
          if (result.data.job) show(result.data.job, result.data.changes);
          return QM.poll();
        }
        verdict.className = "verdict error";
        verdict.textContent = refusalSentence(placeErrors(form, result.data.errors || {}),
          result.data.detail || "Refused (HTTP " + result.status + ").");
      }).catch(function (error) {
        verdict.className = "verdict error";
        verdict.textContent = "Could not reach the API: " + error.message;
      }).finally(function () {
        var note = form.closest("[data-form-for-state]");
        note = note && note.querySelector("[data-stale-note]");
        // (markStaleForms: the job moved on; closeActions: it is gone)
        button.disabled = Boolean(note && !note.hidden) || button.dataset.gone === "true";
      });
    });
  }

  /* ------------------------------------------------------ pickers that apply on choice */

  /* <select data-autosubmit>: a pointer's choice applies at once. With the keyboard, the arrows
     move through the options and Enter (or leaving the field) applies: submitting on every
     change sent the page away at the first arrow, focus lost, so a keyboard could not reach
     an option two steps away. */
  function bindAutosubmit(root) {
    root.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
      var initial = select.value;
      var keyed = false;
      function apply() { if (select.value !== initial) { initial = select.value; select.form.submit(); } }
      select.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { event.preventDefault(); apply(); return; }
        keyed = true;
      });
      select.addEventListener("mousedown", function () { keyed = false; });
      select.addEventListener("change", function () { if (!keyed) apply(); });
      select.addEventListener("blur", function () { if (keyed) apply(); keyed = false; });
    });
  }

  /* ---------------------------------------------------------------------------- boot */

  document.addEventListener("DOMContentLoaded", function () {
    QM.drawAll();
    bindActions(document);
    bindAutosubmit(document);
    var form = document.getElementById("submit-job");
    if (form) bindSubmitForm(form);
    var change = document.getElementById("change-job");
    if (change) bindChangeForm(change);
    QM.start();
  });
})();
