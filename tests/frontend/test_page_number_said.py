"""A `?page=` a paginated page (nodes, jobs, history) cannot show is said above its list, naming
the parameter and the page shown instead, as a bad `?window=` is said (test_window_names_said.py):
`frontend/page_numbers.page_choice`, one rule for the three. Until 7 Dec Django's
`Paginator.get_page` put page 1 or the last page in its place unsaid: a link to page 9 of a list
that had shrunk to 3 pages showed page 3 as if it were page 9."""

from __future__ import annotations

import html
import re

import pytest

from frontend.views import history as history_view
from frontend.views import jobs as jobs_view
from frontend.views import nodes as nodes_view

PAGES = ["/nodes/", "/jobs/", "/history/"]


def _notice(response) -> str | None:
    found = re.search(r'<p class="error" role="alert" id="page-error" data-error-for="page">([^<]*)</p>',
                      response.content.decode())
    return html.unescape(found.group(1)) if found else None


@pytest.mark.parametrize("path", PAGES)
def test_a_page_that_is_not_a_number_is_said_and_the_first_shown(client_for, path):
    answer = client_for("admin").get(path, {"page": "abc"})
    assert answer.status_code == 200
    assert _notice(answer) == "page: 'abc' is not a page number; showing page 1."


@pytest.mark.parametrize("path", PAGES)
def test_page_zero_is_said_and_the_first_shown(client_for, path):
    answer = client_for("admin").get(path, {"page": "0"})
    assert _notice(answer) == "page: 0 is not a page: pages are numbered from 1; showing page 1."


@pytest.mark.parametrize("path", PAGES)
def test_a_page_past_the_last_is_said_and_the_last_shown(client_for, path):
    answer = client_for("admin").get(path, {"page": "99"})
    assert answer.status_code == 200
    assert _notice(answer) == "page: 99 is past the last page, 1; showing page 1."


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("asked", [None, "", "1"])
def test_a_page_that_is_there_says_nothing(client_for, path, asked):
    answer = client_for("admin").get(path, {} if asked is None else {"page": asked})
    assert answer.status_code == 200
    assert _notice(answer) is None


def test_the_nodes_page_past_its_last_page_shows_the_last_and_says_which(client_for, monkeypatch):
    monkeypatch.setattr(nodes_view, "PAGE_SIZE", 5)  # the demo's 16 nodes: pages 1-4
    answer = client_for("admin").get("/nodes/", {"page": "9"})
    assert _notice(answer) == "page: 9 is past the last page, 4; showing page 4."
    assert "page 4 of 4" in answer.content.decode()


def test_the_jobs_page_past_its_last_page_shows_the_last_and_says_which(client_for, submit_as, monkeypatch):
    monkeypatch.setattr(jobs_view, "PAGE_SIZE", 2)
    for i in range(5):
        submit_as("alice", name=f"j{i}", gpus=1, hold=True)  # pages 1-3
    answer = client_for("alice").get("/jobs/", {"page": "7"})
    assert _notice(answer) == "page: 7 is past the last page, 3; showing page 3."


def test_the_history_page_reads_the_same_rule(client_for, monkeypatch):
    monkeypatch.setattr(history_view, "PAGE_SIZE", 2)
    answer = client_for("alice").get("/history/", {"page": "-1"})
    assert _notice(answer) == "page: '-1' is not a page number; showing page 1."
