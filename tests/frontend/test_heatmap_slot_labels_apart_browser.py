"""In Chromium: no two of a heat map's GPU-slot labels are drawn over one another, on a phone's
390 px as on a laptop's 1280 px.

The slot axis labelled every slot (tickmode "array", 0 to the widest node's last GPU): a fleet
with a 16-GPU node drew "10" to "15" across one another at 390 px, where the plot is about 90 px
wide (5.6 px a slot for 14 px labels), on the overview and on that node's page (seen 7 Dec). At
narrow widths every 2nd (4th, ...) slot is labelled instead, the first always among them."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import GpuType, Node
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: Each slot label's words and box, as Chromium lays them out.
SLOT_LABELS = """key => [...document.querySelectorAll(`[data-chart="${key}"] .js-plotly-plot .xtick text`)]
    .map(t => { const r = t.getBoundingClientRect();
                return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })
    .filter(b => b.right > b.left)"""


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def _sixteen_gpu_node() -> None:
    h100 = Node.objects.get(name="h100-01")
    Node.objects.create(name="hgx2-01", pool="h100", gpu_type=GpuType.objects.get(pk=h100.gpu_type_id), gpu_count=16,
                        cpus=96, memory_gb=1536, leaf_switch="leaf-h1", spine="spine-1", simulated=True)


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize(("path", "key"), [("/", "heatmap"), ("/nodes/hgx2-01/", "placement")])
def test_no_two_slot_labels_of_a_heat_map_overlap(session: Any, path: str, key: str, width: int) -> None:  # noqa: F811
    admin = session("admin")
    _sixteen_gpu_node()
    admin.page.set_viewport_size({"width": width, "height": 900})
    admin.open(path)
    labels = admin.page.evaluate(SLOT_LABELS, key)
    said = [b["text"] for b in labels]
    assert len(labels) >= 2 and said[0] == "0", f"{path} at {width} px: {said}"
    clashes = [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:] if _overlap(a, b)]
    assert not clashes, f"{path} at {width} px: slot labels drawn over one another: {clashes} of {said}"
    # Evenly spaced slot numbers, whatever their stride: a reader counts on from them.
    numbers = [int(s) for s in said]
    assert len({b - a for a, b in zip(numbers, numbers[1:])}) == 1, said
    if width == 1280:  # room for every slot's label
        assert numbers == list(range(16)), said


def test_a_window_narrowed_to_a_phone_thins_the_slot_labels_and_widened_labels_them_all(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    _sixteen_gpu_node()
    admin.open("/")
    assert [b["text"] for b in admin.page.evaluate(SLOT_LABELS, "heatmap")] == [str(i) for i in range(16)]
    admin.page.set_viewport_size({"width": 390, "height": 900})
    # (plotly redraws a moment after the window's resize)
    admin.page.wait_for_function("""() => document.querySelector('[data-chart="heatmap"] .js-plotly-plot')
        ._fullLayout.width < 400""", timeout=10_000)
    admin.page.wait_for_function(f"""() => {{ const l = ({SLOT_LABELS})('heatmap');
        return l.length >= 2 && l.every((a, i) => i === 0 || l[i - 1].right <= a.left); }}""", timeout=10_000)
    admin.page.set_viewport_size({"width": 1280, "height": 900})
    admin.page.wait_for_function(f"() => ({SLOT_LABELS})('heatmap').length === 16", timeout=10_000)


#: Watches the heat map's slot labels from now on: at each change to its drawing, how many are
#: drawn (with a box), kept on the window. A MutationObserver's callback runs between plotly's
#: drawing and any later relayout, so a labelling drawn and then taken back is seen.
WATCH_SLOT_LABELS = """() => {
    const plot = document.querySelector('[data-chart="heatmap"] .js-plotly-plot');
    window.__slotLabelsDrawn = [];
    new MutationObserver(() => window.__slotLabelsDrawn.push(
        [...plot.querySelectorAll('.xtick text')].filter(t => t.getBoundingClientRect().width > 0).length))
        .observe(plot, {childList: true, subtree: true, attributes: true, characterData: true});
}"""


def test_a_live_update_draws_the_slot_labels_thinned_never_all_of_them_first(session: Any) -> None:  # noqa: F811
    # The overview's live update redrew the heat map with the server's every-slot labels, then
    # thinned them again: at a phone's width "0" to "15" were drawn across one another for a
    # moment at every refresh.
    admin = session("admin")
    _sixteen_gpu_node()
    admin.page.set_viewport_size({"width": 390, "height": 900})
    admin.open("/")
    page = admin.page
    page.evaluate("() => QM.stop()")  # the test's poll is the only one
    thinned = [b["text"] for b in page.evaluate(SLOT_LABELS, "heatmap")]
    assert 2 <= len(thinned) < 16, thinned
    # Elsewhere a node joins the fleet: the update draws the heat map anew, a row more.
    h100 = Node.objects.get(name="hgx2-01")
    Node.objects.create(name="hgx2-02", pool="h100", gpu_type_id=h100.gpu_type_id, gpu_count=16, cpus=96,
                        memory_gb=1536, leaf_switch="leaf-h1", spine="spine-1", simulated=True)
    page.evaluate(WATCH_SLOT_LABELS)
    updates = int(page.evaluate("() => Number(document.body.dataset.liveUpdates || '0')"))
    page.evaluate("() => QM.poll()")
    expect(page.locator("body")).to_have_attribute("data-live-updates", str(updates + 1))
    expect(page.locator('[data-chart="heatmap"] .js-plotly-plot .ytick text', has_text="hgx2-02")).to_have_count(1)
    drawn = page.evaluate("() => window.__slotLabelsDrawn")
    assert drawn, "the live update drew nothing"
    assert max(drawn) <= len(thinned), f"slot labels drawn during the update: {drawn}, thinned {len(thinned)}"
    assert [b["text"] for b in page.evaluate(SLOT_LABELS, "heatmap")] == thinned


def test_the_first_drawing_at_a_phones_width_draws_the_slot_labels_thinned(session: Any) -> None:  # noqa: F811
    # The page's first drawing took the server's every-slot labels too, and thinned them after.
    admin = session("admin")
    _sixteen_gpu_node()
    admin.page.set_viewport_size({"width": 390, "height": 900})
    admin.page.add_init_script("""window.__slotLabelsDrawn = [];
        new MutationObserver(() => {
            const plot = document.querySelector('[data-chart="heatmap"] .js-plotly-plot');
            if (plot) window.__slotLabelsDrawn.push([...plot.querySelectorAll('.xtick text')]
                .filter(t => t.getBoundingClientRect().width > 0).length);
        }).observe(document, {childList: true, subtree: true, attributes: true});""")
    admin.open("/")
    thinned = admin.page.evaluate(SLOT_LABELS, "heatmap")
    assert 2 <= len(thinned) < 16, thinned
    drawn = admin.page.evaluate("() => window.__slotLabelsDrawn")
    assert max(drawn) <= len(thinned), f"slot labels drawn while the page opened: {sorted(set(drawn))}"
