"""Lowering a priority class's preemption budget under what its running jobs already used in
the current window protects them from every preemption (for priority and to give back borrowed
GPUs) until enough of their preemptions leave the window (the engine's JobSpec.
preemption_budget_frees_at). Taken, as asked, but the admin says it on saving, with the numbers
(used in the window, the new budget, until when it stays spent), and the audit event records it.
Before (7 Dec), the save said nothing and the jobs were silently out of preemption's reach."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from controlplane.services.preemption_budgets import spent_budgets
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _preempted(job: Job, *times: Any) -> None:
    """``job`` preempted at each of ``times`` (its budget's count and the events the cycle reads)."""
    for at in times:
        Event.objects.create(kind=EventKind.JOB_PREEMPTED, job=job, team_id=job.team_id, actor="system:test",
                             reason="Preempted", message="preempted", created_at=at)
    Job.objects.filter(pk=job.pk).update(preemption_count=len(times), last_preempted_at=max(times))


def _save_budget(browser: Any, pk: int, budget: int) -> Any:
    path = f"/admin/controlplane/priorityclass/{pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form["preemption_budget"] = budget
    return browser.post(path, form)


def test_a_budget_lowered_under_what_running_jobs_used_is_said_with_the_numbers_and_recorded(fleet, browser) -> None:
    # research: 3 preemptions per job per day. Job a was preempted 5 h and 2 h ago, job b 1 h ago,
    # job c never; lowering the budget to 1 spends a's budget until both its preemptions have
    # left the window (in 22 h) and b's until its only one has (in 23 h).
    now = timezone.now()
    jobs = []
    for node in fleet.nodes[0:3]:
        job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(minutes=30), priority_class=fleet.research)
        hold(job, [(node, 8)], now - timedelta(minutes=30))
        jobs.append(job)
    a, b, c = jobs
    _preempted(a, now - timedelta(hours=5), now - timedelta(hours=2))
    _preempted(b, now - timedelta(hours=1))

    r = _save_budget(browser, fleet.research.pk, 1)

    assert r.status_code == 302
    [said] = [str(m) for m in get_messages(r.wsgi_request) if "already used" in str(m)]
    a_until = (now - timedelta(hours=2) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    b_until = (now - timedelta(hours=1) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    assert "from 3 to 1 per job per 1 d" in said
    assert f"job {a.pk}: 2 used, spent until {a_until} UTC" in said
    assert f"job {b.pk}: 1 used, spent until {b_until} UTC" in said
    assert f"job {c.pk}" not in said
    event = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="PriorityClassChanged").latest("pk")
    assert "preemption_budget 3 → 1" in event.message.replace("preemption budget", "preemption_budget")
    assert f"job {a.pk}: 2 used" in event.message
    assert {(s["job"], s["used"], s["budget"]) for s in event.data["budget_spent"]} == {(a.pk, 2, 1), (b.pk, 1, 1)}
    assert {s["job"]: s["until"][:16] for s in event.data["budget_spent"]} == {
        a.pk: (now - timedelta(hours=2) + timedelta(days=1)).isoformat()[:16],
        b.pk: (now - timedelta(hours=1) + timedelta(days=1)).isoformat()[:16]}


def test_a_budget_lowered_above_what_running_jobs_used_says_nothing_of_it(fleet, browser) -> None:
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now, priority_class=fleet.research)
    hold(job, [(fleet.nodes[0], 8)], now)
    _preempted(job, now - timedelta(hours=1))
    r = _save_budget(browser, fleet.research.pk, 2)
    assert r.status_code == 302
    assert not [m for m in get_messages(r.wsgi_request) if "already used" in str(m)]
    assert "budget_spent" not in Event.objects.filter(reason="PriorityClassChanged").latest("pk").data


def test_preemptions_that_left_the_window_spend_no_budget(fleet) -> None:
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now, priority_class=fleet.research)
    hold(job, [(fleet.nodes[0], 8)], now)
    _preempted(job, now - timedelta(hours=30), now - timedelta(hours=3))
    fleet.research.preemption_budget = 1
    [spent] = spent_budgets(fleet.research, now)
    assert (spent.job_id, spent.used) == (job.pk, 1)
    assert spent.until == now - timedelta(hours=3) + timedelta(days=1)
    fleet.research.preemption_budget = 2
    assert spent_budgets(fleet.research, now) == []


def test_a_job_over_its_budget_is_spent_until_enough_preemptions_leave_the_window(fleet) -> None:
    # Three preemptions 10 h, 5 h and 2 h ago under a budget of 2: under it again once the one
    # of 5 h ago leaves the day's window (the cycle's rule: snapshot._SpecReader._inside_window).
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now, priority_class=fleet.research)
    hold(job, [(fleet.nodes[0], 8)], now)
    _preempted(job, now - timedelta(hours=10), now - timedelta(hours=5), now - timedelta(hours=2))
    fleet.research.preemption_budget = 2
    [spent] = spent_budgets(fleet.research, now)
    assert (spent.used, spent.until) == (3, now - timedelta(hours=5) + timedelta(days=1))


def test_the_api_says_and_records_a_budget_lowered_under_use_as_the_admin_does(fleet) -> None:
    from tests.controlplane.fleet_fixture import client_for
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now, priority_class=fleet.research)
    hold(job, [(fleet.nodes[0], 8)], now)
    _preempted(job, now - timedelta(hours=1))

    r = client_for(fleet, "admin").patch(f"/api/v1/priority-classes/{fleet.research.pk}/", {"preemption_budget": 1},
                                         format="json")

    assert r.status_code == 200, r.content
    [said] = [w for w in r.json()["warnings"] if "already used" in w]
    until = (now - timedelta(hours=1) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    assert "from 3 to 1 per job per 1 d" in said and f"job {job.pk}: 1 used, spent until {until} UTC" in said
    event = Event.objects.filter(reason="PriorityClassChanged").latest("pk")
    assert [(s["job"], s["used"], s["budget"]) for s in event.data["budget_spent"]] == [(job.pk, 1, 1)]
    assert f"job {job.pk}: 1 used" in event.message


def test_a_requeued_job_waiting_to_run_again_is_said_too_and_a_finished_one_is_not(fleet, browser) -> None:
    """The rule the warning pins: every unfinished job of the class whose budget the new value
    spends, as the cycle counts them (snapshot._recent_requeues: every job not finished). A job
    preempted is requeued, so right after its preemption it waits: started again inside the
    window it is out of preemption's reach from its first second. Until 7 Dec the warning listed
    running jobs only, and the save said nothing of a job preempted an hour ago and waiting."""
    now = timezone.now()
    running = running_job(fleet.ml, gpus=8, started_at=now - timedelta(minutes=30), priority_class=fleet.research)
    hold(running, [(fleet.nodes[0], 8)], now - timedelta(minutes=30))
    _preempted(running, now - timedelta(hours=2))
    waiting = f.make_job(fleet.ml, fleet.research, gpus=8)
    _preempted(waiting, now - timedelta(hours=1))
    held = f.make_job(fleet.ml, fleet.research, gpus=8, hold="user")
    _preempted(held, now - timedelta(hours=3))
    ended = f.make_job(fleet.ml, fleet.research, gpus=8, state=JobState.FAILED, finished_at=now)
    _preempted(ended, now - timedelta(hours=1))

    r = _save_budget(browser, fleet.research.pk, 1)

    assert r.status_code == 302
    [said] = [str(m) for m in get_messages(r.wsgi_request) if "already used" in str(m)]
    until = {job.pk: (job.last_preempted_at + timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
             for job in Job.objects.filter(pk__in=[running.pk, waiting.pk, held.pk])}
    assert "3 jobs of it (1 running, 2 waiting) already used 1 or more in the current window" in said
    assert f"job {running.pk}: 1 used, spent until {until[running.pk]} UTC" in said
    assert f"job {waiting.pk} (waiting): 1 used, spent until {until[waiting.pk]} UTC" in said
    assert f"job {held.pk} (waiting): 1 used, spent until {until[held.pk]} UTC" in said
    assert f"job {ended.pk}" not in said
    assert "Until then each is, a waiting one from when it starts, never preempted" in said
    event = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="PriorityClassChanged").latest("pk")
    assert {s["job"]: s["waiting"] for s in event.data["budget_spent"]} == {
        running.pk: False, waiting.pk: True, held.pk: True}
