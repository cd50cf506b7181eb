"""An admin who changes a priority class's grace period while jobs of that class are stopping is
told that those stops keep the deadline they were given.

Found on the demo: research's grace period went from 120 s to 5 s while job 8 (research) was
being preempted with "It has 120 s to checkpoint and stop". The admin page said only "changed
successfully", though the stop's deadline is fixed when it is ordered (Allocation.
release_deadline): job 8 still had its 120 s, and only later stops got 5 s.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from controlplane.choices import AllocationState
from controlplane.models import Allocation, PriorityClass
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _change_grace(browser: Any, klass: PriorityClass, grace: int) -> list[str]:
    path = f"/admin/controlplane/priorityclass/{klass.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form["grace_period_s"] = grace
    r = browser.post(path, form, follow=True)
    assert r.status_code == 200 and r.redirect_chain, r.content[:3000]
    assert PriorityClass.objects.get(pk=klass.pk).grace_period_s == grace
    return [str(m) for m in get_messages(r.wsgi_request)]


def test_jobs_stopping_now_keep_the_grace_they_were_given(fleet, browser) -> None:
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=1), priority_class=fleet.research)
    allocation = hold(job, [(fleet.nodes[1], 8)], now - timedelta(hours=1))
    deadline = (now + timedelta(seconds=20)).replace(microsecond=0)
    Allocation.objects.filter(pk=allocation.pk).update(state=AllocationState.RELEASING, release_deadline=deadline)
    hold(running_job(fleet.ml, gpus=8, started_at=now, priority_class=fleet.research), [(fleet.nodes[2], 8)], now)

    said = _change_grace(browser, fleet.research, 300)

    assert (f"1 job of class research is stopping now (job {job.pk}, by {deadline:%H:%M:%S} UTC): it keeps the "
            "grace it was given; the new 300 s applies to stops ordered from now on.") in said


def test_nothing_said_when_no_job_of_the_class_is_stopping(fleet, browser) -> None:
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=8, started_at=now, priority_class=fleet.research), [(fleet.nodes[2], 8)], now)

    said = _change_grace(browser, fleet.research, 300)

    assert not [m for m in said if "stopping now" in m]


def test_making_the_class_not_preemptible_says_the_stops_under_way_go_ahead(fleet, browser) -> None:
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=1), priority_class=fleet.research)
    allocation = hold(job, [(fleet.nodes[1], 8)], now - timedelta(hours=1))
    deadline = (now + timedelta(seconds=20)).replace(microsecond=0)
    Allocation.objects.filter(pk=allocation.pk).update(state=AllocationState.RELEASING, release_deadline=deadline)
    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False and k != "preemptible"}

    r = browser.post(path, form, follow=True)

    assert r.status_code == 200 and not PriorityClass.objects.get(pk=fleet.research.pk).preemptible
    said = [str(m) for m in get_messages(r.wsgi_request)]
    assert (f"1 job of class research is stopping now (job {job.pk}, by {deadline:%H:%M:%S} UTC): its stop goes "
            "ahead; the change applies to stops ordered from now on.") in said
