"""The jobs page and the history page refuse a team, priority class, node or user that names
nothing the reader may see, with the API's words on their error line: the pages listed no job
for `?team=nope` without a word, as `qm list --team nope` did. Another team's name reads as a
missing one (the pages leak no existence either)."""

from __future__ import annotations

import html

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("team", ["nope", "language"])
def test_the_jobs_pages_error_line_says_no_such_team(client_for, submit_as, team) -> None:
    alice = client_for("alice")
    submit_as("alice")

    response = alice.get("/jobs/", {"team": team})
    api = alice.get("/api/v1/jobs/", {"team": team}).json()["errors"]["team"][0]

    assert response.status_code == 400
    assert api == f"no team named '{team}' whose jobs you may read"
    assert f'<li data-error-for="team"><code>team</code>: {api}</li>' in html.unescape(response.content.decode())
    assert 'role="alert"' not in alice.get("/jobs/", {"team": "vision"}).content.decode()  # hers


def test_the_jobs_page_names_an_unknown_priority_class_and_node(client_for) -> None:
    page = html.unescape(client_for("alice").get("/jobs/", {"priority_class": "bogus", "node": "h100-99"})
                         .content.decode())

    assert "<code>priority_class</code>: no priority class named 'bogus': priority classes are " in page
    assert "<code>node</code>: no node named 'h100-99'</li>" in page


@pytest.mark.parametrize("query", [{"team": "nope"}, {"team": "language"}, {"user": "bob"}, {"ran_on": "h100-99"}])
def test_the_history_page_and_its_download_refuse_the_name(client_for, query) -> None:
    alice = client_for("alice")
    (parameter, value), = query.items()

    response = alice.get("/history/", query)
    download = alice.get("/history.csv", query)

    assert response.status_code == 400
    assert f'<li data-error-for="{parameter}"><code>{parameter}</code>: no ' in response.content.decode()
    assert f"named '{value}'" in html.unescape(response.content.decode())
    assert download.status_code == 400
    assert download.content.decode().startswith(f"{parameter}: no ")
    assert alice.get("/history/", {"team": "vision", "user": "alice"}).status_code == 200


def test_a_refused_filter_lists_no_jobs_on_the_jobs_page(client_for, submit_as) -> None:
    """Under the error line the page listed every job the reader may see, which read as the
    filter's answer: now it lists none, as the history page does."""
    alice = client_for("alice")
    mine = submit_as("alice", name="mine")

    refused = alice.get("/jobs/", {"team": "nope"})
    listed = alice.get("/jobs/", {"team": "vision"})

    assert refused.status_code == 400 and refused.context["jobs"].paginator.count == 0
    assert f'data-job="{mine.pk}"' not in refused.content.decode()
    assert "These jobs cannot be listed: fix this filter." in refused.content.decode()
    assert [job.pk for job in listed.context["jobs"]] == [mine.pk]


@pytest.mark.parametrize(("path", "said"), [
    ("/jobs/", "at most 128 are taken (no job's name is longer)"),
    ("/history/", "at most 128 are taken (no job's name is longer)"),
    ("/nodes/", "at most 128 are taken (no node's name is longer)"),
])
def test_a_filter_longer_than_its_column_is_the_pages_error_line(client_for, path, said) -> None:
    """The pages read the API's filtersets: a too-long `?name=` is their error line, not a crash
    nor a page listing nothing."""
    response = client_for("admin").get(path, {"name": "x" * 5_000})

    assert response.status_code == 400
    assert (f'<li data-error-for="name"><code>name</code>: is 5000 characters long: {said}</li>'
            in html.unescape(response.content.decode()))


def test_the_history_download_refuses_a_too_long_filter(client_for) -> None:
    download = client_for("admin").get("/history.csv", {"ran_on": "n" * 129})

    assert download.status_code == 400
    assert download.content.decode().startswith(
        "ran_on: is 129 characters long: at most 128 are taken (no node's name is longer)")
