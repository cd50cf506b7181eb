"""In Chromium: a yes-or-no option of the submit and Change forms (*Members on distinct nodes*)
has its box in the fields' column, its words beside the box and its hint under them. As a
field's label its box sat centred in the label column, its words in the fields' column, and on a
phone the box was the form's width, centred above its words (demo walk, 8 Dec)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PLACES = """(form) => {
  const label = document.querySelector(form + ' label.check');
  const box = label.querySelector('input').getBoundingClientRect();
  const words = Array.from(label.childNodes).find(n => n.nodeType === 3 && n.textContent.trim());
  const range = document.createRange();
  range.selectNodeContents(words);
  const text = range.getBoundingClientRect();
  const small = label.querySelector('small');  // the Change form's has no hint
  const hint = small ? small.getBoundingClientRect() : null;
  const field = document.querySelector(form + ' [data-field=gpus_per_node]').getBoundingClientRect();
  return {box: [box.x, box.y + box.height / 2, box.width], text: [text.x, text.y + text.height / 2],
          hint: hint && [hint.x, hint.y], field: field.x, words: words.textContent.trim()};
}"""


def _laid_out(page: Any, form: str) -> None:
    at = page.evaluate(PLACES, form)
    (box_x, box_middle, box_width), (text_x, text_middle) = at["box"], at["text"]
    assert at["words"] == "Members on distinct nodes"
    assert box_width < 30, at  # a box, not the form's width
    assert text_x > box_x + box_width and abs(text_middle - box_middle) < 8, at  # its words beside it
    assert at["hint"] is None or (at["hint"][1] > text_middle and at["hint"][0] <= text_x), at  # its hint under
    assert abs(box_x - at["field"]) < 2, at  # in the fields' column (on a phone, the form's left edge)


@pytest.mark.parametrize("width", [1400, 390])
def test_the_option_sits_in_the_fields_column_with_its_words_beside_it(session: Any, width: int) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="waits", gpus=4, gpus_per_node=2)).job  # its Change form
    alice = session("alice")
    alice.page.set_viewport_size({"width": width, "height": 1000})
    alice.open("/jobs/")
    _laid_out(alice.page, "#submit-job")
    alice.open(f"/jobs/{job.pk}/")
    _laid_out(alice.page, "#change-job")
    assert alice.errors == []
