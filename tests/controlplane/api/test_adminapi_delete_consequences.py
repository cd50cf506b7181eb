"""DELETE of a cohort, team, priority class or GPU type through the API does what the admin's
delete does (the same events, the same refusals) and answers what it did to the records that
stay, in the words of the admin's confirmation page.

Found by QA as a platform engineer: `DELETE cohorts/{id}/` with three teams in the cohort, one of
them running 8 GPUs above its nominal, answered 204 and nothing else: not that the teams left
the cohort (Team.cohort is SET_NULL), that they no longer lend or borrow, nor that the borrowed
GPUs stay with their running jobs and may now be reclaimed by preemption. The admin's
confirmation page said the first of these; neither said the last. `DELETE gpu-types/{id}/` of a
type with prices deleted its price rates (CASCADE) with no event, in the API and the admin."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Cohort, Event, GpuType, Job, PriceRate, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _run(team: Team, node, indices: list[int]) -> Job:
    now = timezone.now()
    job = f.make_job(team, gpus=len(indices), state=JobState.RUNNING, started_at=now, borrowed=True)
    generation = Allocation.objects.count() + 1
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=now, started_at=now,
                                           borrowed=True)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i) for i in indices)
    return job


def _borrowing_cohort(fleet) -> tuple[Cohort, Job]:
    """Cohort all with ml, vision and research; ml runs 24 H100s on its nominal 16."""
    cohort = Cohort.objects.get(name="all")
    f.make_team("research", cohort=cohort)
    for node in fleet.nodes[1:3]:
        _run(fleet.ml, node, list(range(8)))
    return cohort, _run(fleet.ml, fleet.nodes[3], list(range(8)))


def test_deleting_a_cohort_answers_what_happens_to_its_teams_and_their_borrowed_gpus(fleet, admin) -> None:
    cohort, borrowed = _borrowing_cohort(fleet)

    r = admin.delete(f"{J}/cohorts/{cohort.pk}/")

    assert r.status_code == 200, r.content
    body = r.json()
    assert body["detail"].startswith("Cohort all deleted"), body
    lines = body["consequences"]
    assert "Team ml leaves the cohort: it no longer lends or borrows" in lines[0], lines
    assert "its running jobs keep the 8 H100-80GB GPUs above its nominal 16" in lines[0], lines
    assert "deleting the cohort stops nothing" in lines[0] and "reclaim them by preemption" in lines[0], lines
    assert lines[1:] == ["Team research leaves the cohort: it no longer lends or borrows",
                         "Team vision leaves the cohort: it no longer lends or borrows"]
    assert not Cohort.objects.exists()
    assert set(Team.objects.values_list("cohort", flat=True)) == {None}
    assert Job.objects.get(pk=borrowed.pk).state == JobState.RUNNING  # deleting stops nothing


def test_the_api_records_what_the_admin_records(fleet, admin) -> None:
    cohort, _ = _borrowing_cohort(fleet)

    admin.delete(f"{J}/cohorts/{cohort.pk}/")

    [deleted] = Event.objects.filter(kind=EventKind.COHORT_CHANGED, reason="CohortDeleted")
    assert deleted.data["before"]["teams"] == ["ml", "research", "vision"]
    moves = Event.objects.filter(reason="TeamCohortChanged").order_by("team__name")
    assert [e.message for e in moves] == [
        f"Team {name} left cohort all: it no longer lends or borrows (cohort all deleted)"
        for name in ("ml", "research", "vision")]


def test_the_admin_confirmation_page_says_the_same_lines(fleet) -> None:
    cohort, _ = _borrowing_cohort(fleet)
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    page = " ".join(browser.get(f"/admin/controlplane/cohort/{cohort.pk}/delete/").content.decode().split())

    assert "8 H100-80GB GPUs above its nominal 16" in page
    assert "Team research leaves the cohort: it no longer lends or borrows" in page


def test_an_empty_cohort_is_deleted_with_nothing_to_say(fleet, admin) -> None:
    empty = f.make_cohort("spare")

    r = admin.delete(f"{J}/cohorts/{empty.pk}/")

    assert r.status_code == 204 and not r.content
    assert not Cohort.objects.filter(name="spare").exists()


def test_deleting_a_team_answers_what_went_with_it(fleet, admin) -> None:
    team = f.make_team("tmpteam", cohort=Cohort.objects.get(name="all"))
    f.make_quota(team, fleet.h100, 8)
    f.make_project(team, "scratch")
    f.make_user("tess", team=team)

    r = admin.delete(f"{J}/teams/{team.pk}/")

    assert r.status_code == 200, r.content
    lines = r.json()["consequences"]
    assert "Its quota on H100-80GB (nominal 8) is deleted" in lines, lines
    assert "Project scratch is deleted" in lines, lines
    assert "tess is no longer a member of tmpteam" in " ".join(lines), lines
    assert "It leaves cohort all: it no longer lends or borrows" in lines, lines
    said = {e.reason for e in Event.objects.filter(actor="user:root")}
    assert {"QuotaDeleted", "ProjectDeleted", "MembershipDeleted", "TeamDeleted", "TeamCohortChanged"} <= said


def test_deleting_a_default_class_answers_which_teams_lose_it(fleet, admin) -> None:
    f.make_priority_class("batch", 10)

    r = admin.delete(f"{J}/priority-classes/{fleet.production.pk}/")

    assert r.status_code == 200, r.content
    assert r.json()["consequences"] == [
        "Team vision: its default class becomes none; its jobs submitted without a class will get batch (10), "
        "the lowest class (set another default on the team's page)"]
    assert Team.objects.get(name="vision").default_priority_class is None


def test_deleting_a_gpu_type_records_its_prices_going_with_it(fleet, admin) -> None:
    b200 = f.make_gpu_type("B200", 192)
    f.make_price_rate(b200, "6.0000")

    r = admin.delete(f"{J}/gpu-types/{b200.pk}/")

    assert r.status_code == 200, r.content
    assert r.json()["consequences"] == ["Its price B200 on_demand ($6.0000 per GPU-hour from 2026-01-01) is deleted"]
    assert not GpuType.objects.filter(name="B200").exists() and not PriceRate.objects.filter(gpu_type_id=b200.pk).exists()
    [event] = Event.objects.filter(reason="PriceRateDeleted")
    assert event.message.endswith("(GPU type B200 deleted)"), event.message
    assert event.data["before"]["usd_per_gpu_hour"] == "6.0000"


def test_the_admin_records_the_prices_of_a_deleted_gpu_type_too(fleet) -> None:
    b200 = f.make_gpu_type("B200", 192)
    f.make_price_rate(b200, "6.0000")
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    r = browser.post(f"/admin/controlplane/gputype/{b200.pk}/delete/", {"post": "yes"})

    assert r.status_code == 302 and not GpuType.objects.filter(name="B200").exists()
    assert Event.objects.filter(reason="PriceRateDeleted", actor="user:boss").count() == 1


def test_a_gpu_type_in_use_is_still_refused_with_nothing_written(fleet, admin) -> None:
    r = admin.delete(f"{J}/gpu-types/{fleet.a100.pk}/")

    assert r.status_code == 409
    assert "a100-0" in r.json()["detail"]
    assert GpuType.objects.filter(pk=fleet.a100.pk).exists()
    assert not f.trail().filter(kind=EventKind.CONFIG_CHANGED).exists()
