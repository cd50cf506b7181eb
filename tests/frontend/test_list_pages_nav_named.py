"""The jobs, history and Nodes pages' links to their neighbouring pages are a navigation landmark
named "Pages of this list", beside the page's top navigation: both were unnamed, and read alike
to a screen reader's list of landmarks. A list of one page has none (it had an empty one)."""

from __future__ import annotations

import re

import pytest

from controlplane.services.transitions import cancel_job
from frontend.views import history as history_view
from frontend.views import jobs as jobs_view
from frontend.views import nodes as nodes_view

pytestmark = pytest.mark.django_db

NAMED = '<nav class="pages" aria-label="Pages of this list">'


def _navs(page: str) -> list[str]:
    return re.findall(r"<nav[^>]*>", page)


@pytest.mark.parametrize("path", ["/jobs/", "/history/", "/nodes/"])
def test_a_list_of_several_pages_names_its_page_links(client_for, submit_as, monkeypatch, path) -> None:
    for view in (jobs_view, history_view, nodes_view):
        monkeypatch.setattr(view, "PAGE_SIZE", 1)
    for name in ("a", "b"):
        cancel_job(submit_as("alice", name=name), "test")  # ended: on the history page too

    page = client_for("admin").get(path).content.decode()

    assert NAMED in page
    assert "next →" in page.split(NAMED)[1] or "older →" in page.split(NAMED)[1]
    assert len(_navs(page)) == 2 and _navs(page).count("<nav>") == 1  # the top one, and this one


@pytest.mark.parametrize("path", ["/jobs/", "/history/", "/nodes/"])
def test_a_list_of_one_page_has_no_page_links(client_for, submit_as, path) -> None:
    cancel_job(submit_as("alice", name="only"), "test")

    page = client_for("admin").get(path).content.decode()

    assert _navs(page) == ["<nav>"]  # the page's top navigation alone
