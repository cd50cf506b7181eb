"""Every route of the pages (frontend/urls.py), as each role: anonymous, alice (vision: the job's
team), bob (language: another team), finn (finance) and the admin, with what each must not see.

Anonymous callers are sent to the sign-in page from every page and JSON fragment; another team's
job is a 404 on its page and its fragment (its existence does not leak); another user's hooks
are a 404 unless an admin asks; finance reads no job. `test_every_route_of_the_pages_is_in_the_table`
fails when a route of frontend/urls.py has no row, so a new page cannot ship unjudged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern

from controlplane.demo_fleet import seed_demo_fleet
from frontend import urls as page_urls
from tests.controlplane.built_once import Shared, built_once

pytestmark = pytest.mark.django_db

LOGIN = 302  # anonymous: to /accounts/login/?next=…
#             anonymous, alice (owner), bob (other team), finn (finance), admin
OPEN = (LOGIN, 200, 200, 200, 200)
OWNERS = (LOGIN, 200, 404, 404, 200)
OWN_HOOKS = (LOGIN, 200, 404, 404, 200)  # ?user=alice: only alice and admins
ROLES = ("anonymous", "alice", "bob", "finn", "admin")

TABLE: list[tuple[str, str, str, tuple[int, ...]]] = [
    ("login", "get", "/accounts/login/", (200, 200, 200, 200, 200)),
    ("logout", "post", "/accounts/logout/", (302, 302, 302, 302, 302)),
    ("overview", "get", "/", OPEN),
    ("jobs", "get", "/jobs/", OPEN),
    ("job", "get", "/jobs/{job}/", OWNERS),
    ("history", "get", "/history/", OPEN),
    ("history-csv", "get", "/history.csv", OPEN),
    ("history-xlsx", "get", "/history.xlsx", OPEN),
    ("teams", "get", "/teams/", OPEN),
    ("showback", "get", "/showback/", OPEN),
    ("nodes", "get", "/nodes/", OPEN),
    ("node", "get", "/nodes/h100-01/", OPEN),
    ("what-if", "get", "/what-if/", OPEN),
    ("notifications", "get", "/notifications/?user=alice", OWN_HOOKS),
    ("overview-json", "get", "/ui/overview.json", OPEN),
    ("jobs-json", "get", "/ui/jobs.json?ids={job}", OPEN),
    ("job-json", "get", "/ui/jobs/{job}.json", OWNERS),
    ("job-check", "post", "/ui/jobs/check.json", (LOGIN, 200, 200, 403, 200)),
    ("nodes-json", "get", "/ui/nodes.json", OPEN),
    ("node-json", "get", "/ui/nodes/h100-01.json", OPEN),
    ("what-if-json", "get", "/ui/what-if.json?key=none", OPEN),
    ("notifications-json", "get", "/ui/notifications.json?user=alice", OWN_HOOKS),
    ("plotly-js-versioned", "get", "/ui/vendor/plotly-0.0.0.min.js", (404,) * 5),  # only the served version
    ("favicon.ico", "get", "/favicon.ico", (301,) * 5),
]


def test_every_route_of_the_pages_is_in_the_table() -> None:
    names = {p.name or str(p.pattern) for p in page_urls.urlpatterns if isinstance(p, URLPattern)}

    assert names - {name for name, *_ in TABLE} == set(), "judge these for every role: a row in TABLE"
    assert "job-json" in names  # the routes were read


# The route table's test above comes first: the cases below share one seeding of the demo fleet
# (tests/controlplane/built_once.py), and a test without it may not run beside it.
SHARED = Shared()


@pytest.fixture(scope="module")
def _demo_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """The demo fleet, seeded once for the module's 115 cases instead of for each (the file took
    14 s at a load of 5, 7 s so). Each case runs in a savepoint of it, rolled back after it: its
    job, and what a post writes, are gone for the next."""
    yield from built_once(django_db_blocker, seed_demo_fleet, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "demo")


@pytest.fixture
def demo(_demo_once: None, db: None) -> None:
    """The shared demo fleet (conftest's `demo` seeds one for each test)."""


def _client(role: str, client_for: Any) -> Client:
    return Client() if role == "anonymous" else client_for(role)


CASES = [pytest.param(method, path, role, expected[i], id=f"{name}-{role}")
         for name, method, path, expected in TABLE for i, role in enumerate(ROLES)]


@pytest.mark.parametrize("method,path,role,expected", CASES)
def test_page_answers_each_role_as_its_row_says(client_for, submit_as, method, path, role, expected) -> None:
    job = submit_as("alice", name="vision-secret-job", gpus=1)
    url = path.format(job=job.pk)
    client = _client(role, client_for)

    if method == "post":
        response = client.post(url, {"name": "m", "gpus": 1}, content_type="application/json")
    else:
        response = client.get(url)

    assert response.status_code == expected, (response.status_code, response.content[:300])
    if expected == LOGIN and role == "anonymous" and path != "/accounts/logout/":
        assert response["Location"].startswith("/accounts/login/?next=")
    if role in ("bob", "finn") and response.status_code == 200:
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert b"vision-secret-job" not in body  # another team's job, not even named
