"""Who may open which page: the role rules of services/access.py, applied to the pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import AllocationState
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Allocation, Job
from controlplane.services.transitions import RELEASE_PREEMPTED
from tests.controlplane.built_once import Shared, built_once

pytestmark = pytest.mark.django_db

PAGES = ["/", "/jobs/", "/teams/", "/showback/", "/nodes/", "/what-if/"]
JSON = ["/ui/overview.json", "/ui/nodes.json", "/ui/jobs.json?ids=1"]

# Every test of the module stands on one seeding of the demo fleet (tests/controlplane/built_once.py).
SHARED = Shared()


@pytest.fixture(scope="module")
def _demo_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """The demo fleet, seeded once for the module's 59 tests instead of for each (the file took
    9.4 s at a load of 3, 5.5 s so). Each test runs in a savepoint of it, rolled back after it:
    the jobs a test submits, cancels or edits are gone for the next (the submitted-range test
    counts one job)."""
    yield from built_once(django_db_blocker, seed_demo_fleet, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "demo")


@pytest.fixture
def demo(_demo_once: None, db: None) -> None:
    """The shared demo fleet (conftest's `demo` seeds one for each test)."""



@pytest.mark.parametrize("url", PAGES + JSON)
def test_anonymous_is_sent_to_the_login_page(demo, url):
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_login_page_renders_for_anonymous(demo):
    response = Client().get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content and b'name="password"' in response.content


def test_login_with_the_right_password_lands_on_the_overview(demo):
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_login_with_a_wrong_password_says_so(demo):
    response = Client().post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"do not match" in response.content


@pytest.mark.parametrize("username", ["alice", "bob", "finn", "admin"])
@pytest.mark.parametrize("url", PAGES)
def test_every_role_opens_every_page(client_for, username, url):
    assert client_for(username).get(url).status_code == 200


def test_member_cannot_open_another_teams_job(client_for, submit_as):
    job = submit_as("bob", name="language-only")
    alice = client_for("alice")
    assert alice.get(f"/jobs/{job.pk}/").status_code == 404
    assert alice.get(f"/ui/jobs/{job.pk}.json").status_code == 404
    assert client_for("bob").get(f"/jobs/{job.pk}/").status_code == 200


def test_finance_cannot_open_a_job(client_for, submit_as):
    job = submit_as("alice")
    assert client_for("finn").get(f"/jobs/{job.pk}/").status_code == 404


def test_admin_opens_any_teams_job(client_for, submit_as):
    job = submit_as("bob")
    assert client_for("admin").get(f"/jobs/{job.pk}/").status_code == 200


def test_job_list_shows_only_the_members_team(client_for, submit_as):
    mine = submit_as("alice", name="vision-job")
    theirs = submit_as("bob", name="language-job")
    content = client_for("alice").get("/jobs/").content.decode()
    assert f'data-job="{mine.pk}"' in content
    assert f'data-job="{theirs.pk}"' not in content


def test_live_job_states_leave_out_other_teams_jobs(client_for, submit_as):
    mine = submit_as("alice")
    theirs = submit_as("bob")
    body = client_for("alice").get(f"/ui/jobs.json?ids={mine.pk},{theirs.pk}").json()
    assert set(body["html"]) == {f"job-state-{mine.pk}"}


def test_nav_offers_admin_link_only_to_admins(client_for):
    assert b'data-nav="admin"' in client_for("admin").get("/").content
    assert b'data-nav="admin"' not in client_for("alice").get("/").content


def test_nav_hides_jobs_from_finance(client_for):
    assert b'data-nav="jobs"' not in client_for("finn").get("/").content
    assert b'data-nav="jobs"' in client_for("alice").get("/").content


def test_finance_gets_no_submit_form(client_for):
    content = client_for("finn").get("/jobs/").content
    assert b'id="submit-job"' not in content
    assert b'id="submit-job"' in client_for("alice").get("/jobs/").content


def test_node_actions_are_offered_to_admins_only(client_for):
    assert b"data-node-action" in client_for("admin").get("/nodes/").content
    assert b"data-node-action" not in client_for("alice").get("/nodes/").content


def test_cancel_button_is_offered_to_the_owning_team_only(client_for, submit_as):
    job = submit_as("alice")
    assert b'id="cancel-job"' in client_for("alice").get(f"/jobs/{job.pk}/").content
    assert b'id="cancel-job"' in client_for("admin").get(f"/jobs/{job.pk}/").content


@pytest.mark.parametrize(("state", "offered"), [
    ("preempting", True),  # a cancel turns the requeueing stop into a cancel (services.transitions)
    ("succeeded", False), ("cancelled", False),
])
def test_cancel_button_follows_what_the_api_can_cancel(client_for, submit_as, state, offered):
    job = submit_as("alice")
    Job.objects.filter(pk=job.pk).update(state=state)
    if state == "preempting":  # stopped to be requeued: the allocation it is giving back says so
        Allocation.objects.create(job=job, generation=1, epoch=1, created_at=timezone.now(),
                                  state=AllocationState.RELEASING, release_reason=RELEASE_PREEMPTED)
    assert (b'id="cancel-job"' in client_for("alice").get(f"/jobs/{job.pk}/").content) is offered
    api = client_for("alice").post(f"/api/v1/jobs/{job.pk}/cancel/", {}, content_type="application/json")
    assert (api.status_code == 200) is offered  # the page offers what the API does


@pytest.mark.parametrize(("fields", "shown"), [
    ({}, "no CPU or memory request (GPUs only)"),
    ({"cpus_per_gpu": 8, "memory_gb_per_gpu": 64}, "8 CPUs, 64 GB memory"),
    ({"cpus_per_gpu": 4}, "4 CPUs, no memory request"),
])
def test_job_page_says_what_a_job_asked_per_gpu(client_for, submit_as, fields, shown):
    job = submit_as("alice", **fields)
    assert shown in client_for("alice").get(f"/jobs/{job.pk}/").content.decode()


def test_members_see_their_own_teams_quota_only(client_for):
    content = client_for("alice").get("/teams/").content.decode()
    table = content[content.index('<table class="teams">'):content.index("</table>")]
    assert "vision" in table and "language" not in table


def test_not_found_page_keeps_the_layout_and_says_why(client_for, submit_as):
    job = submit_as("bob")
    response = client_for("alice").get(f"/jobs/{job.pk}/")
    assert response.status_code == 404
    content = response.content.decode()
    assert "or the job belongs to a team you are not in" in content
    assert 'rel="icon"' in content and 'data-nav="overview"' in content


def test_teams_page_offers_the_same_windows_as_showback_up_to_a_month(client_for):
    response = client_for("alice").get("/teams/?window=30d")
    assert response.context["window"].key == "30d"
    assert [w.key for w in response.context["windows"]] == ["1h", "6h", "24h", "7d", "30d"]
    assert client_for("alice").get("/teams/?window=nonsense").context["window"].key == "7d"


def test_job_filters_take_the_browsers_datetime_inputs(client_for, submit_as):
    job = submit_as("alice", name="recent")
    response = client_for("alice").get("/jobs/?submitted_after=2020-01-01T00:00&state=pending&name=rec")
    assert response.context["filter_errors"] == {}
    assert [j.pk for j in response.context["jobs"]] == [job.pk]
    assert client_for("alice").get("/jobs/?submitted_after=2099-01-01T00:00").context["jobs"].paginator.count == 0


def test_a_filter_that_does_not_parse_says_which(client_for):
    response = client_for("alice").get("/jobs/?submitted_after=yesterday")
    assert "submitted_after" in response.context["filter_errors"]


def test_browsers_asking_for_favicon_ico_get_the_icon_not_a_404(demo):
    """Pages without our <link rel=icon> (the Django admin, the API's browsable views) make
    browsers ask for /favicon.ico: each used to log a 404."""
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("/frontend/favicon.svg")


def test_the_submitted_range_is_read_and_labelled_as_utc(client_for, submit_as):
    """The browser's datetime inputs carry no zone: the filter reads them as UTC, and the labels
    say so (a reader in another zone would otherwise type local time and miss hours of jobs)."""
    from datetime import timedelta
    from datetime import timezone as tz

    from django.utils import timezone

    submit_as("alice", name="just-now")
    now = timezone.now().astimezone(tz.utc)
    client = client_for("alice")
    html = client.get("/jobs/").content.decode()
    assert "Submitted after (UTC)" in html and "before (UTC)" in html
    just_before = (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    just_after = (now + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    assert client.get(f"/jobs/?submitted_after={just_before}").context["jobs"].paginator.count == 1
    assert client.get(f"/jobs/?submitted_after={just_after}").context["jobs"].paginator.count == 0
