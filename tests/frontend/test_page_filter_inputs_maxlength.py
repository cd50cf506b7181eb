"""A listing page's text filter inputs stop at the length the server takes (`maxlength`, rendered
from the page's filterset, filtersets.text_filter_lengths): until 7 Dec they had none, so a
129-character job name could be typed into the jobs page's Name box and was answered by the error
line "is 129 characters long: at most 128 are taken"."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

pytestmark = pytest.mark.django_db

LENGTH_REFUSED = re.compile(r'<li data-error-for="(\w+)"><code>\w+</code>: is \d+ characters long: at most (\d+) are taken')


class _FormInputs(HTMLParser):
    """The text inputs (`type` text or search) of the form `form_id`: name → their attributes."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id, self.inside, self.inputs = form_id, False, {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self.inside = attributes.get("id") == self.form_id
        elif tag == "input" and self.inside and attributes.get("type", "text") in ("text", "search"):
            self.inputs[attributes["name"]] = attributes

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def _text_inputs(page: str, form_id: str) -> dict[str, dict[str, str | None]]:
    parser = _FormInputs(form_id)
    parser.feed(page)
    return parser.inputs


def _lengths_refused(client, path: str, query: dict[str, str]) -> dict[str, int]:
    """The parameters whose length the page's error line refused, and the length it said it takes."""
    page = html.unescape(client.get(path, query).content.decode())
    return {name: int(longest) for name, longest in LENGTH_REFUSED.findall(page)}


@pytest.mark.parametrize(("path", "form_id", "text_filters"), [
    ("/jobs/", "job-filters", {"name", "priority_class", "project", "user"}),
    ("/history/", "history-filters", {"project", "user", "ran_on"}),
    ("/nodes/", "nodes-filters", set()),  # its pool and GPU type are menus
])
def test_each_text_filter_input_stops_at_the_length_the_server_takes(client_for, path, form_id, text_filters) -> None:
    admin = client_for("admin")
    inputs = _text_inputs(admin.get(path).content.decode(), form_id)

    # What the server takes, asked of it: every text input of the form given far too long a value.
    taken = _lengths_refused(admin, path, {name: "x" * 5_000 for name in inputs})

    assert set(taken) == text_filters
    assert {name: attributes.get("maxlength") for name, attributes in inputs.items()} == {
        name: str(taken[name]) if name in taken else None for name in inputs}
    for name, longest in taken.items():
        assert name not in _lengths_refused(admin, path, {name: "x" * longest}), name
        assert _lengths_refused(admin, path, {name: "x" * (longest + 1)}) == {name: longest}, name


@pytest.mark.parametrize(("path", "form_id"), [("/jobs/", "job-filters"), ("/history/", "history-filters")])
def test_a_value_refused_as_too_long_comes_back_in_its_box_cut_to_the_boxs_maxlength(client_for, path, form_id) -> None:
    """The page refuses a value longer than the server takes and says how long it was; the box
    it came from shows its first `maxlength` characters, as typing would have left it. Until 7 Dec
    the box showed all of it beyond its own maxlength, and the browser sends a value it did not
    type whatever its length: Filter again, after any other change, was refused again."""
    admin = client_for("admin")
    bounded = {name: int(a["maxlength"]) for name, a in _text_inputs(admin.get(path).content.decode(), form_id).items()
               if a.get("maxlength")}
    asked = {name: name[0] * 300 for name in bounded}

    page = admin.get(path, asked).content.decode()

    assert page.count("is 300 characters long") == len(bounded) > 0
    shown = _text_inputs(page, form_id)
    assert {name: shown[name]["value"] for name in bounded} == {name: asked[name][:longest] for name, longest in bounded.items()}
