"""The Celery entry points and their beat schedule; the embedded loop for the demo."""

from __future__ import annotations

import pytest

from controlplane.celery import app
from controlplane.models import AccountingCursor, UsageRollup
from controlplane.tasks_accounting import accounting_loop, apply_usage_retention, roll_up_usage
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import h100, hold, node, running_job

pytestmark = pytest.mark.django_db


def test_beat_schedules_the_rollup_and_the_retention() -> None:
    app.loader.import_default_modules()  # as a worker does
    assert {"qm.accounting.roll_up", "qm.accounting.retention"} <= set(app.tasks)
    tasks = {entry["task"]: entry for entry in app.conf.beat_schedule.values()}
    assert tasks["qm.accounting.roll_up"]["schedule"] == 15.0
    assert tasks["qm.accounting.roll_up"]["options"]["expires"] == 15.0
    assert "qm.accounting.retention" in tasks


def test_the_rollup_task_rolls_up_to_now_and_retention_runs_after_it() -> None:
    from django.utils import timezone

    now = timezone.now()
    job = running_job(f.make_team("ml"), gpus=2, started_at=now - timezone.timedelta(minutes=3))
    hold(job, [(node(h100()), 2)], now - timezone.timedelta(minutes=3))
    assert apply_usage_retention.apply().get() == "nothing rolled yet, or a rollup is running"
    assert roll_up_usage.apply().get().startswith("rolled until")
    assert AccountingCursor.objects.get().rolled_until >= now
    assert UsageRollup.objects.filter(job=job).exists()
    assert apply_usage_retention.apply().get().startswith("dropped 0 samples")


def test_the_embedded_loop_runs_the_same_rollup() -> None:
    loop = accounting_loop()
    assert loop.name == "accounting" and loop.interval_s == 15.0
    loop.steps[0]()
    assert AccountingCursor.objects.get().rolled_until is not None
