"""A query parameter that takes one value, given more than once, is a 400 naming it and saying
how many times it was given ("give it once"), on every list, the history exports, any other
endpoint and the pages that read the same filtersets. Found by the operator audit (7 Dec):
`nodes/?pool=a100&pool=h100` listed the h100 nodes alone, the first value dropped without a
word (the Nodes page too); `?limit=10&limit=1000` answered a page of 1,000.

The parameters that take several values keep taking them: `state` (and an event's `kind`),
repeated, lists either; `id` and `ordering` take several in one value, comma-separated."""

from __future__ import annotations

import html

import pytest
from django.test import Client
from rest_framework.test import APIClient

from controlplane.api.urls import router
from tests.controlplane import factories as f
from tests.controlplane.api.test_api_text_query_parameters import LISTS
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db
J = "/api/v1"

#: Each filter that reads several values when repeated (a MultipleChoiceFilter): its list, and two of them.
SEVERAL = {("jobs/", "state"): ("pending", "running"), ("jobs/history.csv", "state"): ("failed", "cancelled"),
           ("nodes/", "state"): ("ready", "cordoned"), ("events/", "kind"): ("job.submitted", "job.started"),
           ("maintenance-windows/", "state"): ("upcoming", "active")}
ONE_VALUE = [(path, name) for filterset, path in LISTS.items() for name in filterset.base_filters
             if (path, name) not in SEVERAL]


def _refused(client: APIClient, path: str, query: str) -> dict[str, list[str]]:
    r = client.get(f"{J}/{path}?{query}", HTTP_ACCEPT="application/json")
    assert r.status_code == 400, (r.status_code, r.content[:300])
    return r.json()["errors"]


def test_the_several_valued_filters_are_those_here() -> None:
    from controlplane.filtersets import repeatable_parameters

    assert {(path, name) for filterset, path in LISTS.items()
            for name in repeatable_parameters(filterset)} == set(SEVERAL)


@pytest.mark.parametrize(("path", "name"), ONE_VALUE, ids=[f"{p}?{n}" for p, n in ONE_VALUE])
def test_every_one_value_filter_given_twice_is_a_400_naming_it(fleet: Fleet, admin: APIClient, path: str,
                                                               name: str) -> None:
    errors = _refused(admin, path, f"{name}=a&{name}=b")

    assert list(errors) == [name], errors
    [said] = errors[name]
    assert said.startswith("Given twice: ") and "give it once" in said, said


def test_a_pool_given_twice_is_refused_not_the_last_one_listed(fleet: Fleet, alice: APIClient) -> None:
    """The audit's case: h100's nodes alone were listed, as if a100 had not been asked."""
    errors = _refused(alice, "nodes/", "pool=a100&pool=h100")

    assert errors == {"pool": ["Given twice: this parameter takes one value; give it once."]}
    assert alice.get(f"{J}/nodes/", {"pool": "a100"}).json()["count"] == 2


def test_the_times_given_are_counted(fleet: Fleet, alice: APIClient) -> None:
    errors = _refused(alice, "jobs/", "team=ml&team=ml&team=vision")

    assert errors == {"team": ["Given 3 times: this parameter takes one value; give it once."]}


@pytest.mark.parametrize(("path", "name"), [("jobs/", "id"), ("jobs/", "ordering")])
def test_a_comma_list_given_twice_is_told_to_put_its_values_in_one(fleet: Fleet, alice: APIClient, path: str,
                                                                   name: str) -> None:
    [said] = _refused(alice, path, f"{name}=1&{name}=2")[name]

    assert said.startswith("Given twice: ") and "comma-separated" in said, said


def test_an_event_filter_and_the_history_export_refuse_a_repeat(fleet: Fleet, alice: APIClient) -> None:
    job = f.make_job(fleet.ml, fleet.research, name="one")

    assert list(_refused(alice, "events/", f"job={job.pk}&job={job.pk}")) == ["job"]
    assert list(_refused(alice, "jobs/history.csv", "user=alice&user=alice")) == ["user"]
    assert list(_refused(alice, "jobs/history.xlsx", "exit_code=0&exit_code=1")) == ["exit_code"]


@pytest.mark.parametrize(("path", "name"), list(SEVERAL), ids=[f"{p}?{n}" for p, n in SEVERAL])
def test_a_filter_of_several_values_still_takes_them_repeated(fleet: Fleet, admin: APIClient, path: str,
                                                              name: str) -> None:
    one, two = SEVERAL[(path, name)]

    r = admin.get(f"{J}/{path}?{name}={one}&{name}={two}")

    assert r.status_code == 200, (r.status_code, r.content[:300])


def test_several_states_list_the_jobs_of_either(fleet: Fleet, alice: APIClient) -> None:
    waiting = f.make_job(fleet.ml, fleet.research, name="waiting")
    ended = f.make_job(fleet.ml, fleet.research, name="ended", state="failed")

    body = alice.get(f"{J}/jobs/?state=pending&state=failed").json()

    assert sorted(job["id"] for job in body["results"]) == sorted([waiting.pk, ended.pk])
    assert alice.get(f"{J}/jobs/?id={waiting.pk},{ended.pk}&ordering=-id,name").status_code == 200


def _list_paths() -> list[str]:
    return [f"{prefix}/" for prefix, viewset, _ in router.registry if hasattr(viewset, "list")]


@pytest.mark.parametrize("path", _list_paths())
@pytest.mark.parametrize("name", ["limit", "offset", "format"])
def test_every_list_refuses_its_page_and_format_parameters_given_twice(fleet: Fleet, admin: APIClient, path: str,
                                                                       name: str) -> None:
    value = {"limit": "10", "offset": "0", "format": "json"}[name]

    errors = _refused(admin, path, f"{name}={value}&{name}={value}")

    assert errors == {name: ["Given twice: this parameter takes one value; give it once."]}


@pytest.mark.parametrize("query", ["jobs/{job}/?format=json&format=json", "jobs/{job}/events/?limit=5&limit=50",
                                   "metrics/etas/?days=7&days=30", "jobs/priority/?team=ml&team=vision",
                                   "notification-hooks/?user=alice&user=bob"])
def test_any_other_endpoint_refuses_a_parameter_given_twice(fleet: Fleet, admin: APIClient, query: str) -> None:
    job = f.make_job(fleet.ml, fleet.research, name="one")
    path, params = query.format(job=job.pk).split("?")
    name = params.split("=")[0]

    assert list(_refused(admin, path, params)) == [name]


def test_the_nodes_page_says_a_repeated_pool_on_its_error_line(fleet: Fleet) -> None:
    page = Client()
    page.force_login(fleet.users["admin"])

    response = page.get("/nodes/?pool=a100&pool=h100")

    assert response.status_code == 400
    said = html.unescape(response.content.decode())
    assert ('<li data-error-for="pool"><code>pool</code>: Given twice: this parameter takes one value; '
            "give it once.</li>") in said, said[-2000:]
    assert page.get("/nodes/?state=ready&state=cordoned").status_code == 200
    assert page.get("/nodes/?page=1&page=2").status_code == 400


@pytest.mark.parametrize("path", ["/jobs/", "/history/"])
def test_the_jobs_and_history_pages_say_a_repeated_team_on_their_error_line(fleet: Fleet, path: str) -> None:
    page = Client()
    page.force_login(fleet.users["owner"])

    response = page.get(f"{path}?team=ml&team=vision")

    assert response.status_code == 400
    assert ('<code>team</code>: Given twice: this parameter takes one value; give it once.'
            in html.unescape(response.content.decode()))
    assert page.get(f"{path}?state=failed&state=cancelled").status_code == 200
