"""/what-if/ replays holds and dependencies as the control plane applies them, and says so.

Until 7 Dec the trace carried neither: a job that waited for another's success (``afterok``)
replayed as free to start beside it, and a job held for hours started at once, so the replay
told of waits and starts that could not happen."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from controlplane.services import holds, requeue, transitions
from controlplane.services.transitions import cancel_job
from frontend import whatif
from frontend.replay_worker import run as run_replay
from frontend.views.whatif import result_context
from scheduler_core.sim import TraceDependency, TraceHold
from scheduler_core.types import DependencyCondition
from tests.controlplane.job_runs_story import bind_at, idle_nodes

pytestmark = pytest.mark.django_db

H100 = ("H100-80GB",)


def _ran(job: Job, submitted: timedelta, started: timedelta, finished: timedelta, state: str, now) -> None:
    Job.objects.filter(pk=job.pk).update(submitted_at=now - submitted, started_at=now - started,
                                         finished_at=now - finished, state=state)


def test_a_dependent_job_starts_in_the_replay_only_once_its_upstream_job_has_ended(demo, submit_as):
    # prep ran 3 h ago to 2 h ago; train waited for it to succeed (afterok), then ran an hour.
    # The fleet has room for both at once: the replay used to start train at once, beside prep.
    prep = submit_as("alice", name="prep", gpus=8, gpu_types=H100, runtime_limit_s=7200)
    train = submit_as("alice", name="train", gpus=8, gpu_types=H100, runtime_limit_s=7200,
                      dependencies=({"job": prep.pk, "condition": "afterok"},))
    now = timezone.now()
    _ran(prep, timedelta(hours=3), timedelta(hours=3), timedelta(hours=2), JobState.SUCCEEDED, now)
    _ran(train, timedelta(hours=3), timedelta(hours=2), timedelta(hours=1), JobState.SUCCEEDED, now)

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    replay = run_replay(request.work)
    for _, run in replay.runs:
        assert run["wait_max_min"] == pytest.approx(60.0)  # train starts when prep ends, as on the fleet
        assert (run["jobs_done"], run["jobs_dependency_never_met"]) == (2, 0)
    assert replay.dependent_jobs == 1
    trace = {t.job_id: t for t in request.work.trace}
    assert trace[str(train.pk)].depends_on == (TraceDependency(str(prep.pk), DependencyCondition.AFTER_OK, None),)
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert "the 1 job that depends on others starts only once its dependencies are met in the replayed timeline" in html


def test_a_dependency_never_met_in_the_replay_cancels_its_job_as_on_the_fleet(demo, submit_as):
    # eval waits for train to succeed; train failed on the fleet, after eval had been submitted:
    # eval was cancelled there and is not replayed (it never started). Its failure-handler
    # (afternotok) ran: in the replay it runs once train ends, not before.
    train = submit_as("alice", name="train", gpus=8, gpu_types=H100, runtime_limit_s=7200)
    handler = submit_as("alice", name="handler", gpus=8, gpu_types=H100, runtime_limit_s=7200,
                        dependencies=({"job": train.pk, "condition": "afternotok"},))
    now = timezone.now()
    _ran(train, timedelta(hours=3), timedelta(hours=3), timedelta(hours=2), JobState.FAILED, now)
    _ran(handler, timedelta(hours=3), timedelta(hours=2), timedelta(hours=1), JobState.SUCCEEDED, now)

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    trace = {t.job_id: t for t in request.work.trace}
    assert trace[str(train.pk)].succeeds is False and trace[str(handler.pk)].succeeds is True
    for _, run in run_replay(request.work).runs:
        assert run["wait_max_min"] == pytest.approx(60.0)


def test_a_job_on_an_upstream_job_outside_the_window_starts_when_that_was_met(demo, submit_as):
    old = submit_as("alice", name="old", gpus=8, gpu_types=H100, runtime_limit_s=7200)
    late = submit_as("alice", name="late", gpus=8, gpu_types=H100, runtime_limit_s=3600,
                     dependencies=({"job": old.pk, "condition": "afterany"},))
    now = timezone.now()
    # old was submitted before the replayed day and ended 2 h ago; late waited from 3 h ago
    _ran(old, timedelta(days=2), timedelta(days=2), timedelta(hours=2), JobState.SUCCEEDED, now)
    Job.objects.filter(pk=late.pk).update(submitted_at=now - timedelta(hours=3))
    late.dependencies.update(satisfied_at=now - timedelta(hours=2))

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    (only,) = request.work.trace
    assert only.depends_on == (TraceDependency(str(old.pk), DependencyCondition.AFTER_ANY, 3600.0),)
    for _, run in run_replay(request.work).runs:
        assert run["wait_max_min"] == pytest.approx(60.0)


def test_a_held_job_stays_held_in_the_replay_and_one_released_starts_then(demo, submit_as):
    # still: submitted held 3 h ago and never released. released: submitted 3 h ago, held by
    # alice at once, released 1 h ago. The replay used to start both at once.
    alice = get_user_model().objects.get(username="alice")
    still = submit_as("alice", name="still", gpus=8, gpu_types=H100, runtime_limit_s=3600, hold=True)
    released = submit_as("alice", name="released", gpus=8, gpu_types=H100, runtime_limit_s=3600)
    now = timezone.now()
    Job.objects.filter(pk__in=[still.pk, released.pk]).update(submitted_at=now - timedelta(hours=3))
    Job.objects.filter(pk=still.pk).update(held_at=now - timedelta(hours=3))
    holds.hold(alice, released.pk, reason="dataset v3", at=now - timedelta(hours=3))
    holds.release(alice, released.pk, at=now - timedelta(hours=1))

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    replay = run_replay(request.work)
    for _, run in replay.runs:
        assert run["wait_max_min"] == pytest.approx(180.0)  # still: held to the end
        assert (run["jobs_done"], run["jobs_running_at_horizon"]) == (0, 1)   # released runs from 1 h ago
        assert (run["jobs_pending_at_horizon"], run["jobs_held_at_horizon"]) == (1, 1)
    assert replay.held_jobs == 2
    trace = {t.job_id: t for t in request.work.trace}
    assert trace[str(still.pk)].holds == (TraceHold(0.0, None, "alice"),)
    assert trace[str(released.pk)].holds == (TraceHold(0.0, 7200.0, "alice"),)
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert "the 2 jobs held at some time are held in both runs as on the fleet, from each hold to its release" in html
    assert '<tr><th scope="row">jobs still held at the end</th><td>1</td><td>1</td></tr>' in html


def test_a_job_submitted_held_and_released_is_held_from_its_submission(demo, submit_as):
    alice = get_user_model().objects.get(username="alice")
    job = submit_as("alice", name="held", gpus=8, gpu_types=H100, runtime_limit_s=3600, hold=True)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=3), held_at=now - timedelta(hours=3))
    holds.release(alice, job.pk, at=now - timedelta(hours=2))

    (trace,) = whatif.prepare(1, whatif.Policy("pack", True, True), now=now).work.trace

    assert trace.holds == (TraceHold(0.0, 3600.0, "alice"),)


def test_a_replay_with_neither_says_so(demo, submit_as):
    job = submit_as("alice", name="plain", gpus=8, gpu_types=H100, runtime_limit_s=3600)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=1))

    replay = run_replay(whatif.prepare(1, whatif.Policy("pack", True, True), now=now).work)

    assert (replay.held_jobs, replay.dependent_jobs) == (0, 0)
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert "no job was held or waited on another" in html


def test_a_singleton_waits_for_the_job_of_its_name_before_it_in_the_replay_and_before_the_window(demo, submit_as):
    # three "sweep" singletons of alice: one from two days ago that ran until 2 h ago, and two
    # submitted 3 h ago that ran one after the other on the fleet. The replay used to start both
    # new ones at once, beside the old one.
    old = submit_as("alice", name="sweep", gpus=8, gpu_types=H100, runtime_limit_s=7200,
                    dependencies=({"condition": "singleton"},))
    first = submit_as("alice", name="sweep", gpus=8, gpu_types=H100, runtime_limit_s=7200,
                       dependencies=({"condition": "singleton"},))
    second = submit_as("alice", name="sweep", gpus=8, gpu_types=H100, runtime_limit_s=7200,
                        dependencies=({"condition": "singleton"},))
    now = timezone.now()
    _ran(old, timedelta(days=2), timedelta(days=2), timedelta(hours=2), JobState.SUCCEEDED, now)
    _ran(first, timedelta(hours=3), timedelta(hours=2), timedelta(hours=1, minutes=30), JobState.SUCCEEDED, now)
    _ran(second, timedelta(hours=3), timedelta(hours=1, minutes=30), timedelta(hours=1), JobState.SUCCEEDED, now)

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    replay = run_replay(request.work)
    for _, run in replay.runs:
        # first waits for the old one (to 1 h in), second for first's 30 min run after it
        assert run["wait_max_min"] == pytest.approx(90.0)
        assert run["jobs_done"] == 2
    assert replay.dependent_jobs == 2
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert "the 2 jobs that depend on others start only once their dependencies are met" in html
    assert "a singleton starts only when no job of its submitter and name runs or waits ahead of it" in html
    trace = {t.job_id: t for t in request.work.trace}
    assert trace[str(first.pk)].depends_on == (TraceDependency(str(old.pk), DependencyCondition.AFTER_ANY, 3600.0),)


# ------------------------------------------------------------------- every hold the database knows
#
# Until 7 Dec the replay read a job's holds from its job.held and job.released events and the
# hold it has now: a hold placed at submission (sbatch -H, said by the job.submitted event, no
# job.held one) was replayed from the first job.held event after it (a reword, an admin's hold
# over it), and one cleared by a requeue (no job.released) not at all.


def test_a_job_submitted_held_is_held_from_its_submission_though_held_again_before_its_release(demo, submit_as):
    admin, alice = (get_user_model().objects.get(username=name) for name in ("admin", "alice"))
    over = submit_as("alice", name="over", gpus=8, gpu_types=H100, runtime_limit_s=3600, hold=True)
    reworded = submit_as("alice", name="reworded", gpus=8, gpu_types=H100, runtime_limit_s=3600, hold=True,
                         hold_reason="dataset v2")
    now = timezone.now()
    Job.objects.filter(pk__in=[over.pk, reworded.pk]).update(submitted_at=now - timedelta(hours=3),
                                                               held_at=now - timedelta(hours=3))
    holds.hold(admin, over.pk, reason="maintenance", at=now - timedelta(hours=2))  # an admin's over alice's
    holds.release(admin, over.pk, at=now - timedelta(hours=1))
    holds.hold(alice, reworded.pk, reason="dataset v3", at=now - timedelta(hours=2))  # only its reason changes
    holds.release(alice, reworded.pk, at=now - timedelta(hours=1))

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    trace = {t.job_id: t for t in request.work.trace}
    assert trace[str(over.pk)].holds == (TraceHold(0.0, 7200.0, "alice"),)
    assert trace[str(reworded.pk)].holds == (TraceHold(0.0, 7200.0, "alice"),)
    for _, run in run_replay(request.work).runs:
        assert run["wait_max_min"] == pytest.approx(120.0)  # both start at their release, 1 h ago


def test_a_hold_cleared_by_a_requeue_is_held_from_its_submission_to_the_requeue(demo, submit_as):
    # submitted held 4 h ago, cancelled while held 3 h ago, requeued (not held) 2 h ago, then ran
    # 1 h ago for 30 min: no job.released event ends its hold, the requeue cleared it. The job
    # comes back at its requeue (tests/frontend/test_what_if_requeues.py), where it is not held.
    alice = get_user_model().objects.get(username="alice")
    job = submit_as("alice", name="held", gpus=8, gpu_types=H100, runtime_limit_s=3600, hold=True)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=4), held_at=now - timedelta(hours=4))
    assert cancel_job(Job.objects.get(pk=job.pk), "user:alice", at=now - timedelta(hours=3))
    requeue.requeue(alice, job.pk)
    Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).update(created_at=now - timedelta(hours=2))
    _ran(job, timedelta(hours=4), timedelta(hours=1), timedelta(minutes=30), JobState.SUCCEEDED, now)
    since = now - timedelta(hours=4)

    assert whatif.hold_spans(whatif.trace_rows(since, now), since, now) == {job.pk: (TraceHold(0.0, 7200.0, "alice"),)}
    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)
    (trace,) = request.work.trace
    assert (trace.submit_s, trace.holds) == (7200.0, ())
    for _, run in run_replay(request.work).runs:
        assert run["wait_max_min"] == pytest.approx(0.0)


def test_a_requeue_held_stops_the_job_the_replay_runs_then_as_on_the_fleet(demo, submit_as):
    # On the fleet: bound 4 h ago; alice requeued it held 30 min in, released it 2 h ago, and it
    # ran an hour. The replay runs it (its last run's hour) from its submission: at the requeue
    # held it runs, and the control plane's requeue would stop it, as it did there.
    alice = get_user_model().objects.get(username="alice")
    (node,) = idle_nodes(1, "H100-80GB")
    job = submit_as("alice", name="retry", gpus=8, gpu_types=H100, runtime_limit_s=7200)
    now = timezone.now()
    t0 = now - timedelta(hours=4)
    Job.objects.filter(pk=job.pk).update(submitted_at=t0)
    first = bind_at(job, [(node, range(8), "")], at=t0)
    requeue.requeue(alice, job.pk, hold=True, reason="fix the data loader")
    assert transitions.complete_release(first.pk, exit_code=143, at=t0 + timedelta(minutes=30), actor="agent:test")
    holds.release(alice, job.pk, at=now - timedelta(hours=2))
    again = bind_at(job, [(node, range(8), "")], at=now - timedelta(hours=2))
    assert transitions.complete_release(again.pk, exit_code=0, at=now - timedelta(hours=1), actor="agent:test")
    grace = job.priority_class.grace_period_s

    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)

    (trace,) = request.work.trace
    assert trace.holds == (TraceHold(1800.0, 7200.0, "alice", requeues=True),)
    replay = run_replay(request.work)
    for _, run in replay.runs:
        assert run["jobs_requeued_held"] == 1
        # stopped at 30 min (after its grace period), back in line at its release; done an hour later
        assert run["wait_max_min"] == pytest.approx((7200 - 1800 - grace) / 60)
        assert (run["jobs_done"], run["jobs_running_at_horizon"]) == (1, 0)
    assert replay.requeued_held_jobs == 1
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert ("a hold placed after the replay started the job does not stop it, as the control plane holds only "
            "waiting jobs, but a requeue held (1 job was requeued held on the fleet) stops a job the replay runs "
            "then, after its grace period, and it starts again once released, from its last checkpoint") in html
    assert '<tr><th scope="row">jobs stopped by a requeue held</th><td>1</td><td>1</td></tr>' in html
