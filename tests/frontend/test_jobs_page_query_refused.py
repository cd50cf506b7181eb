"""The jobs page refuses a query parameter it does not take, and one taking one value given
twice, on its error line with a 400, as the Nodes and History pages and the API do
(frontend/page_filters.py): `/jobs/?tema=vision` listed every job as if unfiltered, and
`/jobs/?page=2&page=3` showed page 3 without a word. Every link and form the product makes to
the jobs page (its pages, sorts, array views, filter form, live update and "new jobs" notice,
the overview's tiles, a task's array link) is still taken."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from urllib.parse import urlencode, urljoin, urlsplit

import pytest

from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _error_line(response) -> str:
    return html.unescape(response.content.decode())


def test_an_unknown_parameter_is_refused_naming_it_and_what_the_page_takes(client_for, submit_as) -> None:
    alice = client_for("alice")
    mine = submit_as("alice", name="mine")

    response = alice.get("/jobs/", {"tema": "vision"})
    page = _error_line(response)

    assert response.status_code == 400
    assert '<li data-error-for="tema"><code>tema</code>: Unknown query parameter; this page takes: ' in page
    assert "array_id, " in page and ", page, " in page and ", team, " in page  # what it does take
    assert f'data-job="{mine.pk}"' not in page  # a refused query lists nothing, as a refused filter
    assert 'data-live-url=""' in page  # nor keeps anything up
    assert alice.get("/api/v1/jobs/", {"tema": "vision"}).json()["errors"]["tema"][0].startswith(
        "Unknown query parameter")  # as the API says it


def test_a_page_given_twice_is_refused(client_for, submit_as) -> None:
    alice = client_for("alice")
    submit_as("alice", name="mine")

    response = alice.get("/jobs/?page=2&page=3")

    assert response.status_code == 400
    assert ('<li data-error-for="page"><code>page</code>: Given twice: this parameter takes one value; '
            "give it once.</li>") in _error_line(response)


def test_a_filter_given_twice_is_refused_and_a_state_may_be(client_for, submit_as) -> None:
    alice = client_for("alice")
    submit_as("alice", name="mine")

    assert alice.get("/jobs/?team=vision&team=vision").status_code == 400
    assert alice.get("/jobs/?state=pending&state=running").status_code == 200  # takes several


def test_the_live_update_of_a_refused_query_keeps_nothing_up(client_for, submit_as) -> None:
    alice = client_for("alice")
    job = submit_as("alice", name="mine")

    body = alice.get("/ui/jobs.json", {"ids": job.pk, "after": job.pk, "tema": "vision"}).json()

    assert "rows" not in body and "jobs-count" not in body["html"]


class _Links(HTMLParser):
    """The page's links and its filter form's submission, as a browser would make it."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.form: list[tuple[str, str]] = []
        self._in_form = False
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []
        self.live = ""
        self.live_extra = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if "data-live-url" in a:
            self.live, self.live_extra = a["data-live-url"], a.get("data-live-extra", "")
        if tag == "form" and a.get("id") == "job-filters":
            self._in_form = True
        if not self._in_form or not a.get("name") and tag != "option":
            return
        if tag == "input" and (a.get("type") != "checkbox" or "checked" in a):
            self.form.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self._select, self._options = a["name"], []
        elif tag == "option" and self._select:
            self._options.append((a.get("value", ""), "selected" in a))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        if tag == "select" and self._select:
            chosen = [value for value, selected in self._options if selected] or [self._options[0][0]]
            self.form.append((self._select, chosen[0]))
            self._select = None


def _read(client, url: str) -> _Links:
    response = client.get(url)
    assert response.status_code == 200, (url, response.content[:300])
    links = _Links()
    links.feed(response.content.decode())
    return links


def _to_the_jobs_page(base: str, hrefs: list[str]) -> list[str]:
    urls = [urljoin(base, href) for href in hrefs]
    return [url for url in urls if urlsplit(url).path == "/jobs/" and urlsplit(url).query]


def test_every_link_and_form_the_product_makes_to_the_jobs_page_is_taken(client_for, submit_as,
                                                                           monkeypatch) -> None:
    monkeypatch.setattr("frontend.views.jobs.PAGE_SIZE", 1)  # pages, so their links
    alice, admin = client_for("alice"), client_for("admin")
    for name in ("a", "b", "c"):
        submit_as("alice", name=name, gpus=1)
    task = submit_as("alice", name="sweep", gpus=1, array="0-1")
    run_cycle("test")
    listings = ["/jobs/", "/jobs/?page=2", "/jobs/?ordering=name&page=2", f"/jobs/?array_id={task.array_id}",
                "/jobs/?name=&team=vision&state=pending&state=running&ordering=-gpus"]
    # the other pages' links here: a task's array, the overview's job tiles (an admin's)
    made = _to_the_jobs_page(f"/jobs/{task.pk}/", _read(alice, f"/jobs/{task.pk}/").hrefs)
    tiles = _to_the_jobs_page("/", _read(admin, "/").hrefs)
    assert made == [f"/jobs/?array_id={task.array_id}"] and len(tiles) == 2
    followed: list[str] = []
    for listing in listings:
        page = _read(alice, listing)
        followed += _to_the_jobs_page(listing, page.hrefs) + [f"/jobs/?{urlencode(page.form)}"]
        # its live update, then the notice of a job submitted since on a page other than the first
        assert alice.get(f"{page.live}&{page.live_extra}" if "?" in page.live else
                         f"{page.live}?{page.live_extra}").status_code == 200
    page = _read(alice, "/jobs/?ordering=name")
    submit_as("alice", name="since", gpus=1)
    notice = alice.get(f"{page.live}&{page.live_extra}").json()["html"]["jobs-new"]
    followed += _to_the_jobs_page("/jobs/?ordering=name", _hrefs(notice))
    assert any("page=" in url for url in followed) and any("array_id=" in url for url in followed)
    assert any(url.startswith("/jobs/?ordering=name&page=") for url in followed)  # the notice's link

    for url in [*followed, *made, *tiles, f"/jobs/?array_id={task.array_id}"]:  # qm.js's after an array submit
        client = admin if url in tiles else alice
        response = client.get(url)
        assert response.status_code == 200, (url, _error_line(response)[:500])
        assert "jobs-filter-errors" not in response.content.decode(), url


def _hrefs(fragment: str) -> list[str]:
    links = _Links()
    links.feed(fragment)
    return links.hrefs
