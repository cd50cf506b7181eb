"""/what-if/ replays a requeued job run by run, as the database records its runs.

Until 7 Dec a requeued job was replayed as one run of its last run's length from its first
submission: the work its earlier runs kept at their checkpoints was dropped, a requeue someone
asked for while it ran was not replayed at all, and a job requeued after it ended lost that
earlier run and was taken to wait from its first submission. Now (whatif._requeued_runs): the
scheduler's own stops (preemptions, resizes) are the replayed policy's to make, so they are not
replayed, but the job needs the work each kept; a requeue someone asked for is demand, replayed
at its time; a run that ended before a requeue is a run of its own, and the job comes back at
its requeue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, Event, Job
from controlplane.services import holds, requeue, transitions
from frontend import whatif
from frontend.replay_worker import run as run_replay
from frontend.views.whatif import result_context
from scheduler_core.sim import TraceDependency, TraceHold
from scheduler_core.types import DependencyCondition
from tests.controlplane.job_runs_story import bind_at, idle_nodes, preempted_then_succeeded

pytestmark = pytest.mark.django_db

H100 = ("H100-80GB",)


def _eight(job: Job, at, node) -> Allocation:
    return bind_at(job, [(node, range(8), "")], at=at)


def _requeue_running(username: str, job: Job, allocation, *, at, hold: bool = False) -> None:
    """Requeue the running job as `qm requeue` does, its processes gone at `at`."""
    requeue.requeue(get_user_model().objects.get(username=username), job.pk, hold=hold)
    assert transitions.complete_release(allocation.pk, exit_code=143, at=at, actor="agent:test")
    Event.objects.filter(job=job, kind__in=(EventKind.JOB_STOPPING, EventKind.JOB_PREEMPTING)).update(created_at=at)


def test_a_job_preempted_and_requeued_needs_the_work_it_kept_and_is_not_preempted_again_by_the_replay(
        demo, submit_as):
    # preempted after 90 min keeping the hour to its checkpoint (2 GPUs x 1,830 s lost), then run
    # again 2 h to success: it needed 3 h of work, where the replay used to give it its last 2 h
    first, second = idle_nodes(2, "H100-80GB")
    job = submit_as("alice", name="long", gpus=2, gpu_types=H100, runtime_limit_s=4 * 3600, checkpoint_interval_s=3600)
    now = timezone.now()
    story = preempted_then_succeeded(job, first, second, now=now)
    Job.objects.filter(pk=job.pk).update(submitted_at=story.t0)

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    (trace,) = request.work.trace
    assert trace.duration_s == pytest.approx(3600 + 7200)
    assert (trace.submit_s, trace.requeued_at, trace.holds) == (0.0, (), ())
    for _, run in run_replay(request.work).runs:
        assert (run["jobs_done"], run["preemptions"], run["wait_max_min"]) == (1, 0, 0.0)


def test_a_job_requeued_while_it_ran_is_stopped_at_its_requeue_in_the_replay(demo, submit_as):
    # bound 4 h ago; alice requeued it an hour in (no checkpoint: all lost); bound again 2 h 30 ago
    # and done 2 h 30 later. The replay used to run its last run once from its submission.
    (node,) = idle_nodes(1, "H100-80GB")
    job = submit_as("alice", name="retry", gpus=8, gpu_types=H100, runtime_limit_s=4 * 3600)
    now = timezone.now()
    t0 = now - timedelta(hours=4)
    Job.objects.filter(pk=job.pk).update(submitted_at=t0)
    _requeue_running("alice", job, _eight(job, t0, node), at=t0 + timedelta(hours=1))
    again = _eight(job, t0 + timedelta(minutes=90), node)
    assert transitions.complete_release(again.pk, exit_code=0, at=now - timedelta(minutes=1), actor="agent:test")
    grace = job.priority_class.grace_period_s

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    (trace,) = request.work.trace
    assert trace.requeued_at == (3600.0,)
    assert trace.duration_s == pytest.approx(150 * 60 - 60)
    replay = run_replay(request.work)
    for _, run in replay.runs:
        # stopped at 1 h (after its grace), bound again at once: its whole last run from then
        assert (run["jobs_requeued"], run["jobs_done"], run["preemptions"]) == (1, 1, 0)
        assert run["allocated"] * run["horizon_min"] * 60 * replay.gpus == pytest.approx(
            8 * (3600 + grace + trace.duration_s), rel=1e-6)
    assert replay.requeued_jobs == 1
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert "a requeue someone asked for while the job ran (1 job) stops the job the replay runs then" in html
    assert '<tr><th scope="row">jobs stopped by a requeue</th><td>1</td><td>1</td></tr>' in html


def test_a_job_requeued_after_it_ended_replays_that_run_and_comes_back_at_its_requeue(demo, submit_as):
    # ran 1 h and failed (5 h to 4 h ago); requeued 3 h ago; ran again 2 h to 1 h ago and succeeded
    (node,) = idle_nodes(1, "H100-80GB")
    alice = get_user_model().objects.get(username="alice")
    job = submit_as("alice", name="flaky", gpus=8, gpu_types=H100, runtime_limit_s=4 * 3600)
    now = timezone.now()
    t0 = now - timedelta(hours=5)
    Job.objects.filter(pk=job.pk).update(submitted_at=t0)
    first = _eight(job, t0, node)
    assert transitions.complete_release(first.pk, exit_code=1, at=t0 + timedelta(hours=1), actor="agent:test")
    requeue.requeue(alice, job.pk)
    Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).update(created_at=t0 + timedelta(hours=2))
    again = _eight(job, t0 + timedelta(hours=3), node)
    assert transitions.complete_release(again.pk, exit_code=0, at=t0 + timedelta(hours=4), actor="agent:test")

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    earlier, latest = request.work.trace
    assert (earlier.job_id, earlier.submit_s, earlier.duration_s, earlier.succeeds) == (f"{job.pk}/1", 0.0, 3600.0,
                                                                                        False)
    assert (latest.job_id, latest.submit_s, latest.duration_s, latest.succeeds) == (str(job.pk), 7200.0, 3600.0, True)
    assert latest.depends_on == (TraceDependency(earlier.job_id, DependencyCondition.AFTER_ANY),)
    replay = run_replay(request.work)
    for _, run in replay.runs:
        # both runs done, each started at once: it waits from its requeue, not its first submission
        assert (run["jobs_total"], run["jobs_done"], run["wait_max_min"]) == (2, 2, 0.0)
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert ">1 job (2 runs) of the last 1 day," in html
    assert "a run that ended before its job was requeued is replayed as a run of its own (1 run)" in html


def test_a_job_requeued_held_after_it_ended_arrives_held_and_stops_nothing(demo, submit_as):
    # ran 30 min and failed; requeued held 3 h 30 ago; released 2 h ago and ran an hour
    (node,) = idle_nodes(1, "H100-80GB")
    alice = get_user_model().objects.get(username="alice")
    job = submit_as("alice", name="retry", gpus=8, gpu_types=H100, runtime_limit_s=7200)
    now = timezone.now()
    t0 = now - timedelta(hours=4)
    Job.objects.filter(pk=job.pk).update(submitted_at=t0)
    first = _eight(job, t0, node)
    assert transitions.complete_release(first.pk, exit_code=1, at=t0 + timedelta(minutes=30), actor="agent:test")
    requeue.requeue(alice, job.pk, hold=True, reason="fix the data loader")
    Event.objects.filter(job=job, kind__in=(EventKind.JOB_REQUEUED, EventKind.JOB_HELD)).update(
        created_at=now - timedelta(hours=3, minutes=30))
    holds.release(alice, job.pk, at=now - timedelta(hours=2))
    again = _eight(job, now - timedelta(hours=2), node)
    assert transitions.complete_release(again.pk, exit_code=0, at=now - timedelta(hours=1), actor="agent:test")

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    earlier, latest = request.work.trace
    assert (earlier.duration_s, earlier.holds) == (1800.0, ())
    assert (latest.submit_s, latest.holds) == (1800.0, (TraceHold(1800.0, 7200.0, "alice"),))
    replay = run_replay(request.work)
    for _, run in replay.runs:
        assert (run["jobs_done"], run["jobs_requeued_held"]) == (2, 0)
        assert run["wait_max_min"] == pytest.approx(90.0)  # held from its requeue to its release
    assert replay.requeued_held_jobs == 0


def test_a_job_requeued_after_a_cancel_while_it_waited_comes_back_at_its_requeue(demo, submit_as):
    # cancelled while waiting (never started), requeued 2 h ago, ran 1 h ago: that wait is no
    # run, and the job waits from its requeue (an hour), not from its first submission
    alice = get_user_model().objects.get(username="alice")
    (node,) = idle_nodes(1, "H100-80GB")
    job = submit_as("alice", name="again", gpus=8, gpu_types=H100, runtime_limit_s=3600)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=4))
    assert transitions.cancel_job(Job.objects.get(pk=job.pk), "user:alice", at=now - timedelta(hours=3))
    requeue.requeue(alice, job.pk)
    Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).update(created_at=now - timedelta(hours=2))
    again = _eight(job, now - timedelta(hours=1), node)
    assert transitions.complete_release(again.pk, exit_code=0, at=now - timedelta(minutes=30), actor="agent:test")

    (trace,) = whatif.prepare(1, whatif.Policy("pack", True, True), now=now).work.trace

    assert (trace.job_id, trace.submit_s, trace.duration_s) == (str(job.pk), 7200.0, 1800.0)
    assert trace.depends_on == ()


def test_a_job_requeued_after_it_ended_and_cancelled_since_keeps_the_run_it_had(demo, submit_as):
    # ran 1 h and succeeded, requeued, then cancelled while waiting: its run is replayed, the
    # demand that never ran is not (the replay used to leave the whole job out)
    (node,) = idle_nodes(1, "H100-80GB")
    alice = get_user_model().objects.get(username="alice")
    job = submit_as("alice", name="done", gpus=8, gpu_types=H100, runtime_limit_s=7200)
    now = timezone.now()
    t0 = now - timedelta(hours=3)
    Job.objects.filter(pk=job.pk).update(submitted_at=t0)
    first = _eight(job, t0, node)
    assert transitions.complete_release(first.pk, exit_code=0, at=t0 + timedelta(hours=1), actor="agent:test")
    requeue.requeue(alice, job.pk)
    Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).update(created_at=t0 + timedelta(hours=2))
    assert transitions.cancel_job(Job.objects.get(pk=job.pk), "user:alice", at=now - timedelta(minutes=30))
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED

    (trace,) = whatif.prepare(1, whatif.Policy("pack", True, True), now=now).work.trace

    assert (trace.job_id, trace.submit_s, trace.duration_s, trace.succeeds) == (f"{job.pk}/1", 0.0, 3600.0, True)
