"""The jobs, Nodes and history pages head a refused query's error line with what is wrong in it:
they said "These jobs cannot be listed: fix this filter." of `?tema=vision` (a parameter the page
does not take) and of `?page=2&page=3` (one given twice), which no filter fixes."""

from __future__ import annotations

import html
import re

import pytest

pytestmark = pytest.mark.django_db

PAGES = [("/jobs/", "These jobs"), ("/nodes/", "These nodes"), ("/history/", "This history")]


def _heading(response) -> str:
    """The error line's heading, its tags dropped."""
    found = re.search(r'class="notice error" role="alert"[^>]*>\s*<p>(.*?)</p>', response.content.decode(), re.S)
    assert found, response.content.decode()[:2000]
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


@pytest.mark.parametrize(("path", "listing"), PAGES)
def test_an_unknown_parameter_is_headed_as_one(client_for, path, listing) -> None:
    response = client_for("alice").get(path, {"tema": "vision"})

    assert response.status_code == 400
    assert _heading(response) == f"{listing} cannot be listed: unknown parameter tema: remove it."
    assert "<code>tema</code>: remove it." in response.content.decode()


@pytest.mark.parametrize(("path", "listing"), PAGES)
def test_unknown_parameters_are_named_together(client_for, path, listing) -> None:
    response = client_for("alice").get(f"{path}?zeta=1&alpha=2&mid=3")

    assert _heading(response) == f"{listing} cannot be listed: unknown parameters alpha, mid and zeta: remove them."


@pytest.mark.parametrize(("path", "listing"), PAGES)
def test_a_parameter_given_twice_is_headed_so(client_for, path, listing) -> None:
    twice = client_for("alice").get(f"{path}?page=2&page=3")
    thrice = client_for("alice").get(f"{path}?page=1&page=2&page=3")

    assert twice.status_code == thrice.status_code == 400
    assert _heading(twice) == f"{listing} cannot be listed: page is given twice: give it once."
    assert _heading(thrice) == f"{listing} cannot be listed: page is given 3 times: give it once."


@pytest.mark.parametrize(("path", "listing", "first", "second"), [
    ("/jobs/", "These jobs", "name", "team"), ("/nodes/", "These nodes", "gpu_type", "pool"),
    ("/history/", "This history", "team", "user")])
def test_parameters_given_more_than_once_are_named_together(client_for, path, listing, first, second) -> None:
    response = client_for("admin").get(f"{path}?{second}=a&{first}=a&{second}=b&{first}=b&{first}=c")

    error_line = response.content.decode().split('role="alert"', 1)[1].split("</div>", 1)[0]
    listed = re.findall(r'<li data-error-for="(\w+)"', error_line)  # the lines' order
    assert sorted(listed) == [first, second]
    assert _heading(response) == (f"{listing} cannot be listed: {listed[0]} and {listed[1]} "
                                  "are each given more than once: give each once.")


def test_the_pages_own_parameter_given_twice_is_judged_before_the_filters(client_for) -> None:
    """`page` is judged first (query_refusals), the filters' repeats then, by the filterset."""
    response = client_for("alice").get("/jobs/?page=1&page=2&team=a&team=b")

    assert _heading(response) == "These jobs cannot be listed: page is given twice: give it once."


@pytest.mark.parametrize(("path", "listing"), PAGES)
def test_a_bad_filter_value_is_still_a_filter_to_fix(client_for, path, listing) -> None:
    one = client_for("admin").get(path, {"name": "x" * 5_000})
    two = client_for("admin").get(path, {"name": "x" * 5_000, "state": "bogus"})

    assert one.status_code == two.status_code == 400
    assert _heading(one) == f"{listing} cannot be listed: fix this filter."
    assert _heading(two) == f"{listing} cannot be listed: fix these filters."


def test_a_parameter_named_like_markup_is_escaped_in_the_heading(client_for) -> None:
    response = client_for("alice").get("/jobs/?<b>x</b>=1")

    assert "<code>&lt;b&gt;x&lt;/b&gt;</code>: remove it." in response.content.decode()


@pytest.mark.parametrize(("path", "listing", "name"), [
    ("/jobs/", "These jobs", "team"), ("/nodes/", "These nodes", "pool"), ("/history/", "This history", "team")])
def test_a_filter_given_twice_is_headed_as_given_twice(client_for, path, listing, name) -> None:
    """A filterset judges its own filters given twice: their heading says so too."""
    response = client_for("admin").get(f"{path}?{name}=a&{name}=b")

    assert response.status_code == 400
    assert _heading(response) == f"{listing} cannot be listed: {name} is given twice: give it once."
