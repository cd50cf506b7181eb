"""A filter by a related record's name (`?team=`, `?priority_class=`, `?node=`, `?user=`, ...)
that names nothing the reader may see is a 400 naming the parameter. It matched nothing, so
`qm list --team nope` exited 0 with an empty list: a typo read as "no jobs". A name the reader
may not see is refused in the same words as one that does not exist (filters leak no
existence); records everyone sees are refused plainly, the short lists naming what there is."""

from __future__ import annotations

import pytest

from controlplane.models import MaintenanceWindow
from tests.controlplane import factories as f
from tests.controlplane.api.test_api_filter_choices_named import refusal

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _ids(client, path: str, query: dict[str, object]) -> set[int]:
    r = client.get(f"{J}/{path}", query)
    assert r.status_code == 200, r.content
    return {row["id"] for row in r.json()["results"]}


def test_a_team_whose_jobs_you_may_not_read_is_refused_as_one_that_does_not_exist(fleet, alice) -> None:
    mine = f.make_job(fleet.ml, submitter=fleet.users["owner"]).pk
    f.make_job(fleet.vision)

    for team in ("nope", "vision"):
        assert refusal(alice, "jobs/", {"team": team}) == {"team": [f"no team named '{team}' whose jobs you may read"]}
        assert refusal(alice, "jobs/history.csv", {"team": team}) == {
            "team": [f"no team named '{team}' whose jobs you may read"]}
    assert _ids(alice, "jobs/", {"team": "ml"}) == {mine}


def test_finance_reads_no_team_s_jobs_and_is_told_so(fleet, clients) -> None:
    assert refusal(clients["finance"], "jobs/", {"team": "ml"}) == {
        "team": ["no team named 'ml' whose jobs you may read"]}


def test_an_admin_names_any_team_and_is_refused_only_a_missing_one(fleet, admin) -> None:
    theirs = f.make_job(fleet.vision).pk

    assert _ids(admin, "jobs/", {"team": "vision"}) == {theirs}
    assert refusal(admin, "jobs/", {"team": "visoin"}) == {"team": ["no team named 'visoin' whose jobs you may read"]}


def test_an_unknown_priority_class_lists_the_classes(fleet, alice) -> None:
    assert refusal(alice, "jobs/", {"priority_class": "bogus"}) == {
        "priority_class": ["no priority class named 'bogus': priority classes are production, research"]}
    assert _ids(alice, "jobs/", {"priority_class": "research"}) == set()


@pytest.mark.parametrize("parameter", ["node", "ran_on"])
def test_an_unknown_node_is_refused(fleet, alice, parameter) -> None:
    assert refusal(alice, "jobs/", {parameter: "h100-9"}) == {parameter: ["no node named 'h100-9'"]}
    assert _ids(alice, "jobs/", {parameter: "h100-1"}) == set()


def test_a_user_is_one_whose_jobs_you_may_read(fleet, alice, admin) -> None:
    carol = f.make_user("carol", team=fleet.ml)
    # dave left ml (no membership now) but his job there stays readable, by his name too.
    daves = f.make_job(fleet.ml, submitter=f.make_user("dave")).pk
    f.make_job(fleet.vision, submitter=fleet.users["other_team"])

    for user in ("nope", "bob"):
        assert refusal(alice, "jobs/", {"user": user}) == {"user": [f"no user named '{user}' whose jobs you may read"]}
    assert _ids(alice, "jobs/", {"user": "alice"}) == set()
    assert _ids(alice, "jobs/", {"user": carol.username}) == set()
    assert _ids(alice, "jobs/", {"user": "dave"}) == {daves}
    assert len(_ids(admin, "jobs/", {"user": "bob"})) == 1


def test_a_finance_account_may_name_itself(fleet, clients) -> None:
    """`qm list --mine` sends the reader's own name: never refused, whatever their teams."""
    assert _ids(clients["finance"], "jobs/", {"user": "finn"}) == set()


def test_a_project_is_one_of_a_team_whose_jobs_you_may_read(fleet, alice) -> None:
    f.make_project(fleet.vision, "secret")

    for project in ("nope", "secret"):
        assert refusal(alice, "jobs/", {"project": project}) == {
            "project": [f"no project named '{project}' whose jobs you may read"]}
    assert _ids(alice, "jobs/", {"project": "llm"}) == set()


def test_every_problem_is_named_at_once(fleet, alice) -> None:
    assert set(refusal(alice, "jobs/", {"team": "nope", "priority_class": "bogus", "node": "x"})) == {
        "team", "priority_class", "node"}


def test_quotas_and_projects_take_the_teams_you_may_read(fleet, alice, clients) -> None:
    for path in ("quotas/", "projects/"):
        for team in ("nope", "vision"):
            assert refusal(alice, path, {"team": team}) == {"team": [f"no team named '{team}' that you may read"]}
    # finance reads every team's
    assert len(_ids(clients["finance"], "quotas/", {"team": "vision"})) == 1
    assert _ids(clients["finance"], "projects/", {"team": "vision"}) == set()
    assert refusal(alice, "quotas/", {"gpu_type": "B200"}) == {
        "gpu_type": ["no GPU type named 'B200': GPU types are A100-40GB, H100-80GB"]}


def test_the_fleet_s_lists_refuse_unknown_gpu_types_cohorts_and_nodes(fleet, alice, admin) -> None:
    said = "no GPU type named 'B200': GPU types are A100-40GB, H100-80GB"
    assert refusal(alice, "nodes/", {"gpu_type": "B200"}) == {"gpu_type": [said]}
    assert refusal(alice, "price-rates/", {"gpu_type": "B200"}) == {"gpu_type": [said]}
    assert refusal(alice, "teams/", {"cohort": "nope"}) == {"cohort": ["no cohort named 'nope': cohorts are all"]}
    assert refusal(alice, "maintenance-windows/", {"node": "nope"}) == {"node": ["no node named 'nope'"]}
    assert refusal(admin, "events/", {"node": "nope"}) == {"node": ["no node named 'nope'"]}
    assert MaintenanceWindow.objects.count() == 0
    assert _ids(alice, "maintenance-windows/", {"node": "h100-1"}) == set()


def test_events_take_the_teams_whose_events_you_may_read(fleet, alice, admin) -> None:
    for team in ("nope", "vision"):
        assert refusal(alice, "events/", {"team": team}) == {"team": [f"no team named '{team}' whose events you may read"]}
    _ids(alice, "events/", {"team": "ml"})  # a 200
    _ids(admin, "events/", {"team": "vision"})


def test_a_name_with_a_percent_sign_or_a_nul_is_refused_in_words(fleet, alice) -> None:
    assert refusal(alice, "jobs/", {"team": "50%s%(x)s"}) == {"team": ["no team named '50%s%(x)s' whose jobs you may read"]}
    assert list(refusal(alice, "jobs/", {"team": "m\x00l"})) == ["team"]
