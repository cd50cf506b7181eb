"""The jobs page could not be sorted: `?ordering=queue_position` (the queue's order, as `qm
list --sort queue_position` and the API give it) was accepted and silently ignored, the page
staying newest first. It now sorts by the API's own `ordering` (the JobFilterSet's), offers it
in the filter form, keeps it across pages, and refuses an unknown field naming `ordering`."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def _ids(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr data-job="(\d+)">', html)]


@pytest.fixture
def jobs(submit_as) -> dict[str, int]:
    return {name: submit_as("alice", name=name, gpus=gpus).pk for name, gpus in (("b", 4), ("a", 16), ("c", 1))}


def test_the_list_sorts_by_the_apis_ordering(client_for, jobs) -> None:
    client = client_for("alice")

    assert _ids(client.get("/jobs/").content.decode()) == [jobs["c"], jobs["a"], jobs["b"]]  # newest first
    assert _ids(client.get("/jobs/?ordering=-gpus").content.decode()) == [jobs["a"], jobs["b"], jobs["c"]]
    assert _ids(client.get("/jobs/?ordering=name").content.decode()) == [jobs["a"], jobs["b"], jobs["c"]]
    api = client.get("/api/v1/jobs/?ordering=-gpus").json()["results"]
    assert [j["id"] for j in api] == [jobs["a"], jobs["b"], jobs["c"]]


def test_the_form_offers_the_sort_and_keeps_it(client_for, jobs) -> None:
    html = client_for("alice").get("/jobs/?ordering=queue_position").content.decode()

    select = re.search(r'<select name="ordering"[^>]*>(.*?)</select>', html, flags=re.S)
    assert select is not None
    assert re.search(r'<option value="queue_position" selected>', select.group(1))


def test_a_sorted_list_pages_in_its_order(client_for, submit_as) -> None:
    ids = [submit_as("alice", name=f"j{i:02d}", gpus=1 + i % 7).pk for i in range(55)]
    client = client_for("alice")

    first = client.get("/jobs/?ordering=name").content.decode()
    assert _ids(first) == ids[:50]
    assert re.search(r'href="\?ordering=name&(amp;)?page=2">next', first)
    assert _ids(client.get("/jobs/?ordering=name&page=2").content.decode()) == ids[50:]


def test_an_unknown_sort_is_refused_naming_ordering(client_for, jobs) -> None:
    response = client_for("alice").get("/jobs/?ordering=bogus")

    assert response.status_code == 400
    assert '<li data-error-for="ordering"><code>ordering</code>: ' in response.content.decode()
