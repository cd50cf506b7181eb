"""The job page's cost line names what threw the work away: a job requeued off a lost node,
never preempted, read "$0.17 preemption waste" beside "Preempted 0 times" (demo, 4 Dec)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from controlplane.models import UsageRollup
from controlplane.models.usage import RollupBucket

pytestmark = pytest.mark.django_db


def _lost(job, usd: str) -> None:
    UsageRollup.objects.create(
        bucket=RollupBucket.DAY, start=timezone.now().replace(hour=0, minute=0, second=0, microsecond=0),
        job=job, team=job.team, priority_class=job.priority_class, gpu_type=job.team.quotas.first().gpu_type,
        capacity_tier="reserved", cost_usd=Decimal("1.00"), lost_cost_usd=Decimal(usd))


@pytest.mark.parametrize(("preempted", "requeued", "words"), [
    (0, 1, "of which $0.17 for work lost to requeues"),
    (1, 1, "of which $0.17 for work lost to preemptions</dd>"),
    (1, 3, "of which $0.17 for work lost to preemptions and requeues"),
])
def test_the_cost_of_lost_work_names_what_lost_it(client_for, submit_as, preempted, requeued, words) -> None:
    job = submit_as("alice", name="fenced")
    job.preemption_count, job.requeue_count = preempted, requeued
    job.save(update_fields=["preemption_count", "requeue_count"])
    _lost(job, "0.17")

    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert words in page
    assert "preemption waste" not in page
