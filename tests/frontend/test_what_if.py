"""/what-if/: real jobs become a trace, the simulator replays it twice in the background, and the
page follows the replay to its comparison."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.template.loader import render_to_string
from django.utils import timezone

from controlplane.choices import JobState, NodeState
from controlplane.models import Job, MaintenanceWindow, Node, Quota
from controlplane.services.cycle import run_cycle
from controlplane.services.snapshot import read_snapshot, scheduler_config
from frontend import whatif
from frontend.replay_worker import run as run_replay
from frontend.views.whatif import result_context
from scheduler_core.sim.fleet import job_spec
from tests.controlplane.loop import chaos_cluster
from tests.frontend.what_if_steps import key_of, start_replay

pytestmark = pytest.mark.django_db


def wait_done(key: str, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = whatif.status(key)
        if state is not None and state["state"] in ("done", "failed"):
            return state
        time.sleep(0.1)
    raise AssertionError(f"replay {key} did not finish in {timeout_s} s: {whatif.status(key)}")


def test_the_replay_stands_on_the_real_fleet_and_quota_table(demo):
    fleet = whatif.real_fleet()
    assert len(fleet.nodes) == 16 and fleet.gpus_by_type == {"A100-40GB": 32, "H100-80GB": 96}
    assert {n.leaf for n in fleet.nodes} == {"leaf-h1", "leaf-h2", "leaf-h3", "leaf-a1"}
    vision = {q.gpu_type: q for q in fleet.quotas if q.team == "vision"}
    assert (vision["H100-80GB"].nominal_gpus, vision["H100-80GB"].borrowing_limit) == (40, 32)
    assert vision["H100-80GB"].cohort == "shared-fleet"
    assert [c.name for c in fleet.priority_classes] == ["batch", "best-effort", "production", "research"]


def test_the_quota_form_keeps_live_values_and_reads_changes(demo):
    fleet = whatif.real_fleet()
    cells, errors = whatif.quota_table(fleet, {})
    assert errors == {} and whatif.quotas_of(fleet, cells) == (None, "")
    cells, errors = whatif.quota_table(fleet, {"quota:vision:H100-80GB": "64", "quota:serving:A100-40GB": ""})
    quotas, note = whatif.quotas_of(fleet, cells)
    assert errors == {}
    table = {(q.team, q.gpu_type): q for q in quotas}
    assert table["vision", "H100-80GB"].nominal_gpus == 64 and table["vision", "H100-80GB"].borrowing_limit == 32
    assert ("serving", "A100-40GB") not in table and table["language", "H100-80GB"].nominal_gpus == 32
    assert note == "quotas changed: serving A100-40GB 8 → none; vision H100-80GB 40 → 64"


@pytest.mark.parametrize(("field", "raw", "message"), [
    ("quota:vision:H100-80GB", "lots", "quota of vision on H100-80GB: expected a whole number of GPUs"),
    ("quota:vision:H100-80GB", "97", "quota of vision on H100-80GB: expected 0 to 96"),
    ("quota:vision:A100-40GB", "-1", "expected 0 to 32"),
    ("quota:nobody:H100-80GB", "8", "quota:nobody:H100-80GB: no such team and GPU type"),
    ("borrowing:vision:H100-80GB", "97", "borrowing limit of vision on H100-80GB: expected 0 to 96"),
    ("lending:vision:H100-80GB", "some", "lending limit of vision on H100-80GB: expected a whole number of GPUs"),
    ("days", "0", "days: pick 1 to 30, got 0"),
    # A flag other than on or off was read as off: `?backfill=of` replayed without backfill,
    # unsaid, where a bad placement was refused (7 Dec, an operator's hand-edited link).
    ("backfill", "maybe", "backfill: choose on or off, got 'maybe'"),
    ("preemption", "", "preemption: choose on or off, got ''"),
])
def test_bad_form_input_is_a_400_naming_the_field(client_for, field, raw, message):
    response = client_for("alice").post("/what-if/", {"days": "1", field: raw})
    assert response.status_code == 400
    assert field in response.context["errors"] and message in response.context["errors"][field]
    assert message.split(":")[0] in response.content.decode() and "live_url" not in response.context


def test_a_live_quota_above_the_fleets_gpus_does_not_refuse_the_replay(client_for, submit_as):
    """A live quota or limit above the fleet's GPUs of its type (a node retired since, or a
    borrowing limit of 500 meaning "no real cap") is what the live run replays: the form,
    prefilled with it, must replay as sent. Before, every Replay was a 400 ("expected 0 to 96,
    got 500") and the browser would not even send the form past the inputs' max."""
    Quota.objects.filter(team__name="language", gpu_type__name="H100-80GB").update(nominal_gpus=120,
                                                                                 borrowing_limit=500)
    submit_as("alice", name="one", gpus=8, gpu_types=("H100-80GB",))
    client = client_for("admin")
    page = client.get("/what-if/").content.decode()
    sent = {name: value for name, value in re.findall(r'<input type="number" name="([^"]+)"[^>]*value="([^"]*)"', page)}
    assert sent["quota:language:H100-80GB"] == "120" and sent["borrowing:language:H100-80GB"] == "500"
    for name, top in (("quota:language:H100-80GB", 120), ("borrowing:language:H100-80GB", 500)):
        field = re.search(rf'<input type="number" name="{name}"[^>]*>', page).group(0)
        assert f'max="{top}"' in field, field  # the browser sends what it prefilled
    fleet = whatif.real_fleet()
    cells, errors = whatif.quota_table(fleet, sent)
    assert errors == {} and whatif.quotas_of(fleet, cells) == (None, "")
    url = start_replay(client, placement="spread", backfill="on", preemption="on", **sent)
    assert wait_done(key_of(url))["state"] == "done"
    # Lowering it, still above the fleet, is taken; going past the live value is refused as before.
    cells, errors = whatif.quota_table(fleet, {"borrowing:language:H100-80GB": "200"})
    assert errors == {} and "language H100-80GB borrowing limit 500 → 200" in whatif.quotas_of(fleet, cells)[1]
    _, errors = whatif.quota_table(fleet, {"quota:language:H100-80GB": "121"})
    assert errors == {"quota:language:H100-80GB": "quota of language on H100-80GB: expected 0 to 120 (its live "
                                                  "value; this fleet has 96 H100-80GB GPUs), got 121"}


def test_another_quota_table_changes_the_replay(demo, submit_as):
    # Vision may hold 40 + 32 = 72 H100s live; ten 8-GPU gangs ask for 80, so one waits for a
    # gang to end (its runtime limit, 4 h). With a nominal quota of 96 all ten start at once.
    now = timezone.now()
    for i in range(10):
        job = submit_as("alice", name=f"gang-{i}", gpus=8, gpu_types=("H100-80GB",))
        Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=12))
    fleet = whatif.real_fleet()
    cells, errors = whatif.quota_table(fleet, {"quota:vision:H100-80GB": "96"})
    quotas, note = whatif.quotas_of(fleet, cells)
    policy = dataclasses.replace(whatif.live_policy(scheduler_config()), quotas=quotas, quota_note=note)
    request = whatif.prepare(1, policy, fleet=fleet, now=now)
    assert request.work.runs[1].quotas == quotas and request.work.runs[0].quotas == fleet.quotas
    replay = run_replay(request.work)
    (live_label, live), (other_label, other) = replay.runs
    assert "live quotas" in live_label and "vision H100-80GB 40 → 96" in other_label
    assert live["wait_max_min"] == pytest.approx(240.0, abs=1) and other["wait_max_min"] == 0.0
    # per team: vision is the one that gains (one gang of ten waited 4 h: a mean of 24 min)
    assert replay.teams[0]["vision"]["wait_mean_min"] == pytest.approx(24.0, abs=0.5)
    assert replay.teams[1]["vision"]["wait_mean_min"] == 0.0
    # both runs finish all ten 4-hour gangs within the 12 hours replayed: the same GPU-hours
    assert replay.teams[0]["vision"]["allocated_gpu_hours"] == replay.teams[1]["vision"]["allocated_gpu_hours"] == 320.0


def test_the_quota_form_reads_borrowing_and_lending_limits(demo):
    fleet = whatif.real_fleet()
    live = {(q.team, q.gpu_type): q for q in fleet.quotas}
    lent = live["language", "H100-80GB"].lending_limit
    cells, errors = whatif.quota_table(fleet, {"borrowing:vision:H100-80GB": "56", "lending:language:H100-80GB": "0",
                                               "borrowing:serving:A100-40GB": ""})
    quotas, note = whatif.quotas_of(fleet, cells)

    assert errors == {}
    table = {(q.team, q.gpu_type): q for q in quotas}
    assert (table["vision", "H100-80GB"].nominal_gpus, table["vision", "H100-80GB"].borrowing_limit) == (40, 56)
    assert table["language", "H100-80GB"].lending_limit == 0
    assert table["serving", "A100-40GB"].borrowing_limit is None
    said = ("no limit" if lent is None else str(lent))
    assert f"language H100-80GB lending limit {said} → 0" in note and "vision H100-80GB borrowing limit 32 → 56" in note


def test_a_limit_with_no_quota_or_no_cohort_is_refused_naming_it(demo):
    fleet = whatif.real_fleet()
    _, errors = whatif.quota_table(fleet, {"quota:serving:A100-40GB": "", "borrowing:serving:A100-40GB": "4"})
    assert errors == {"borrowing:serving:A100-40GB": "borrowing limit of serving on A100-40GB: no quota to limit; "
                                                     "give serving nominal A100-40GB GPUs first"}
    alone = dataclasses.replace(fleet, cohort_of={**fleet.cohort_of, "vision": None})
    _, errors = whatif.quota_table(alone, {"lending:vision:H100-80GB": "8"})
    assert errors == {"lending:vision:H100-80GB": "lending limit of vision on H100-80GB: team vision is in no "
                                                  "cohort, so it lends to no one: a limit limits nothing"}


def test_another_borrowing_limit_changes_the_replay(demo, submit_as):
    """The engine replays the limits it enforces: vision may hold 40 + 32 = 72 H100s live, so one
    of ten 8-GPU gangs waits for another to end (4 h); allowed to borrow 56, all ten start."""
    now = timezone.now()
    for i in range(10):
        job = submit_as("alice", name=f"gang-{i}", gpus=8, gpu_types=("H100-80GB",))
        Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=12))
    fleet = whatif.real_fleet()
    cells, errors = whatif.quota_table(fleet, {"borrowing:vision:H100-80GB": "56"})
    quotas, note = whatif.quotas_of(fleet, cells)
    policy = dataclasses.replace(whatif.live_policy(scheduler_config()), quotas=quotas, quota_note=note)
    replay = run_replay(whatif.prepare(1, policy, fleet=fleet, now=now).work)
    (_, live), (other_label, other) = replay.runs
    assert other_label.endswith("quotas changed: vision H100-80GB borrowing limit 32 → 56)")
    assert live["wait_max_min"] == pytest.approx(240.0, abs=1) and other["wait_max_min"] == 0.0


def test_a_quota_table_under_which_a_job_can_never_run_says_so(demo, submit_as):
    """A 48-GPU gang of vision's runs under the live table (40 nominal + 32 borrowable H100s) and
    can never run under a nominal of 8 (8 + 32 = 40): the replay left it out of the waits and
    of the jobs submitted without a word, so the what-if read as vision waiting less."""
    now = timezone.now()
    job = submit_as("alice", name="wide", gpus=48, gpu_types=("H100-80GB",))
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=2))
    fleet = whatif.real_fleet()
    cells, _ = whatif.quota_table(fleet, {"quota:vision:H100-80GB": "8"})
    quotas, note = whatif.quotas_of(fleet, cells)
    policy = dataclasses.replace(whatif.live_policy(scheduler_config()), quotas=quotas, quota_note=note)
    replay = run_replay(whatif.prepare(1, policy, fleet=fleet, now=now).work)
    (_, live), (_, other) = replay.runs
    assert (live["jobs_never_runnable"], other["jobs_never_runnable"]) == (0, 1)

    html = render_to_string("frontend/_what_if_result.html", {"state": {"state": "done"}, "result": replay,
                                                              "charts": []})
    row = html.split('id="what-if-never-run"')[1].split("</tr>")[0]
    assert "jobs that could never run</th><td>0</td><td>1</td>" in row
    outcomes = next(c for c in result_context({"state": "done", "replay": replay})["charts"] if c.key == "outcomes")
    assert "could never run" in [trace_name for trace_name in outcomes.figure["data"][0]["x"]]


def test_trace_runs_finished_jobs_for_their_last_run_and_the_rest_to_their_limit(demo, submit_as):
    done = submit_as("alice", name="done", gpus=8, gpu_types=("H100-80GB",))
    waiting = submit_as("bob", name="waiting", gpus=2, runtime_limit_s=7200)
    never = submit_as("bob", name="cancelled-early", gpus=1)
    now = timezone.now()
    Job.objects.filter(pk=done.pk).update(submitted_at=now - timedelta(hours=3), started_at=now - timedelta(hours=2),
                                          finished_at=now - timedelta(hours=1), state=JobState.SUCCEEDED)
    Job.objects.filter(pk=never.pk).update(state=JobState.CANCELLED, finished_at=now)
    since = now - timedelta(days=1)
    trace = {t.job_id: t for t in whatif.build_trace(whatif.trace_rows(since, now), since)}
    assert set(trace) == {str(done.pk), str(waiting.pk)}
    assert trace[str(done.pk)].duration_s == 3600 and trace[str(done.pk)].gpu_type == "H100-80GB"
    assert trace[str(done.pk)].submit_s == pytest.approx(21 * 3600, abs=1)
    assert trace[str(waiting.pk)].duration_s == 7200 and trace[str(waiting.pk)].gpu_type == ""
    assert trace[str(waiting.pk)].priority == 500 and trace[str(waiting.pk)].team == "language"


def test_jobs_of_a_node_and_a_half_and_with_their_own_layout_replay_as_they_were_asked(demo, submit_as):
    # 12 GPUs on 8-GPU nodes is a whole node and 4 more; 16 GPUs in members of 4 may share nodes.
    # Either made every replay of its window fail before the simulator knew these shapes.
    odd = submit_as("alice", name="node-and-a-half", gpus=12, gpu_types=("H100-80GB",), runtime_limit_s=3600)
    laid_out = submit_as("alice", name="fours", gpus=16, gpus_per_node=4, gpu_types=("H100-80GB",),
                         runtime_limit_s=3600)
    now = timezone.now()
    Job.objects.filter(pk__in=[odd.pk, laid_out.pk]).update(submitted_at=now - timedelta(hours=6))
    since = now - timedelta(days=1)
    trace = {t.job_id: t for t in whatif.build_trace(whatif.trace_rows(since, now), since)}
    assert trace[str(laid_out.pk)].gpus_per_node == 4 and trace[str(odd.pk)].gpus_per_node is None
    replay = run_replay(whatif.prepare(1, whatif.Policy("pack", True, True), now=now).work)
    for _, run in replay.runs:
        assert run["jobs_total"] == 2 and run["jobs_done"] == 2


def test_the_replay_asks_the_engine_for_each_job_as_the_control_loop_does(demo, submit_as):
    # Members on distinct nodes, a topology, heterogeneous roles, several GPU types and the
    # per-GPU needs and an array's task limit all change where and when the engine places a job:
    # a replay that dropped any of them replayed a packed, any-topology, homogeneous job instead.
    jobs = [
        submit_as("alice", name="spread", gpus=4, gpus_per_node=1, members_on_distinct_nodes=True,
                  gpu_types=("H100-80GB",), runtime_limit_s=3600),
        submit_as("alice", name="one-leaf", gpus=16, topology="same_leaf", gpu_types=("H100-80GB",),
                  runtime_limit_s=3600),
        submit_as("alice", name="gang", gpus=10, runtime_limit_s=3600, roles=(
            {"name": "learner", "count": 1, "gpus_per_member": 8, "gpu_types": ["H100-80GB"]},
            {"name": "actor", "count": 2, "gpus_per_member": 1, "cpus_per_gpu": 4, "memory_gb_per_gpu": 16},
        )),
        submit_as("alice", name="needs", gpus=2, gpu_types=("H100-80GB", "A100-40GB"), min_gpu_memory_gb=40,
                  cpus_per_gpu=8, memory_gb_per_gpu=64, workload="serving", runtime_limit_s=3600),
        submit_as("alice", name="one-at-a-time", gpus=1, array="0-2%1", gpu_types=("A100-40GB",),
                  runtime_limit_s=3600),
    ]
    jobs += list(Job.objects.filter(array_id=jobs[-1].array_id).exclude(pk=jobs[-1].pk))
    now = timezone.now()
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(submitted_at=now - timedelta(hours=6))
    since = now - timedelta(days=1)
    trace = {t.job_id: t for t in whatif.build_trace(whatif.trace_rows(since, now), since)}
    live = {spec.id: spec for spec in read_snapshot(now, 0).snapshot.pending}
    shape = ("gpus", "workload", "gpus_per_node", "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu",
             "memory_gb_per_gpu", "topology", "min_gpus", "max_gpus", "roles", "members_on_distinct_nodes",
             "array_id", "array_task_limit", "runtime_limit_s")
    dropped = [(job.name, name) for job in jobs for name in shape
               if getattr(job_spec(trace[str(job.pk)]), name) != getattr(live[str(job.pk)], name)]
    assert dropped == []
    replay = run_replay(whatif.prepare(1, whatif.Policy("pack", True, True), now=now).work)
    for _, run in replay.runs:
        assert run["jobs_total"] == len(jobs) and run["jobs_done"] == len(jobs)


def test_nothing_to_replay_is_refused_with_a_reason(demo):
    with pytest.raises(whatif.ReplayRefused, match="No job was submitted in the last 3 days"):
        whatif.prepare(3, whatif.Policy("spread", True, True))


def test_days_out_of_range_are_refused(demo):
    with pytest.raises(whatif.ReplayRefused, match="days: pick 1 to 30"):
        whatif.prepare(31, whatif.Policy("spread", True, True))


def test_replay_runs_in_the_background_and_the_page_shows_both_runs(client_for, submit_as):
    for i in range(6):
        submit_as("alice" if i % 2 else "bob", name=f"j{i}", gpus=4 * (1 + i % 2))
    run_cycle("test")
    client = client_for("alice")
    location = start_replay(client, days="1", placement="spread", backfill="off", preemption="on")
    first = client.get(location)
    assert first.status_code == 200
    key = key_of(location)
    if first.context.get("live_url"):  # still running when the page rendered: follow it as the page does
        assert first.context["state"]["state"] == "running"
        assert wait_done(key)["state"] == "done"
        live = client.get("/ui/what-if.json", {"key": key}).json()
        assert live["stop"] is True and 'data-replay="done"' in live["html"]["what-if-result"]
    page = client.get(location)
    result = page.context["result"]
    assert result.jobs == 6
    labels = [label for label, _ in result.runs]
    assert labels[0].startswith("live policy (pack") and labels[1] == "what-if (spread, backfill off, preemption on, live quotas)"
    assert {c.key for c in page.context["charts"]} == {"wait", "allocation", "stranded", "outcomes", "team_waits",
                                                      "team_gpu_hours"}
    assert all(r["jobs_total"] == 6 for _, r in result.runs)
    # no job waited, so no ETA was told to judge, and the table says so rather than "0%"
    assert all(r["eta_checked"] == 0 for _, r in result.runs)
    assert page.content.decode().count("no job waited with an ETA") == 2
    # The jobs were submitted moments before the window's end and none waited: the allocation
    # chart compares what they held with what they would have held in the window had none
    # waited — the same — not with their whole runtime limits past the window (their "offered
    # load", several times more, which read as a fleet that could not keep up).
    allocation = next(c for c in page.context["charts"] if c.key == "allocation").figure["data"]
    for trace, (_, r) in zip(allocation, result.runs, strict=True):
        allocated, compared = trace["y"]
        assert r["wait_max_min"] == 0.0 and r["offered_load"] > 3 * r["allocated"]
        assert compared == pytest.approx(allocated, abs=0.02), (allocated, compared)


def test_a_second_replay_waits_while_one_runs(demo, submit_as):
    submit_as("alice")
    store = whatif.Store()
    store.set(whatif.LOCK_KEY, "someone-else", 5)
    try:
        request = whatif.prepare(1, whatif.Policy("spread", True, True))
        state, thread = whatif.start(request, store)
        assert state["state"] == "busy" and thread is None
    finally:
        store.delete(whatif.LOCK_KEY)


def test_an_unknown_or_stale_replay_says_it_stopped(client_for):
    body = client_for("alice").get("/ui/what-if.json?key=qm:what-if:" + "0" * 64).json()
    assert body["stop"] is True and 'data-replay="lost"' in body["html"]["what-if-result"]
    assert whatif.status("not-a-key") is None


def test_the_page_replays_the_quota_table_typed_in_the_form(client_for, submit_as):
    submit_as("alice", name="one", gpus=8, gpu_types=("H100-80GB",))
    client = client_for("alice")
    url = start_replay(client, days="1", placement="pack", backfill="on", preemption="on",
                       **{"quota:vision:H100-80GB": "64"})
    first = client.get(url)
    assert first.status_code == 200
    form = first.content.decode()
    assert 'name="quota:vision:H100-80GB"' in form and 'value="64"' in form
    wait_done(key_of(url))
    labels = [label for label, _ in client.get(url).context["result"].runs]
    assert labels[0].endswith("live quotas)")
    assert labels[1] == "what-if (pack, backfill on, preemption on, quotas changed: vision H100-80GB 40 → 64)"


def test_the_replay_runs_from_the_windows_first_submission_not_its_edge(demo, submit_as):
    # A fleet two hours old asked for "the last 7 days": its hours spread over a week read
    # 0.01 % allocated for both policies. The replay spans the time it had jobs.
    jobs = [submit_as("alice", name=f"gang{i}", gpus=8, gpu_types=("H100-80GB",), runtime_limit_s=7200)
            for i in range(4)]
    now = timezone.now()
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(submitted_at=now - timedelta(hours=2))
    request = whatif.prepare(7, whatif.Policy("pack", True, True), now=now)
    assert request.work.replayed_from == now - timedelta(hours=2)
    assert all(t.submit_s == 0.0 for t in request.work.trace)
    replay = run_replay(request.work)
    assert replay.horizon_s == pytest.approx(7200)
    for _, run in replay.runs:
        # four 8-GPU jobs on 128 GPUs for the whole two hours replayed
        assert run["allocated"] == pytest.approx(32 / 128, abs=0.01)


def _window(nodes, start, end, cancelled=None, created=None):
    window = MaintenanceWindow.objects.create(start_at=start, end_at=end, reason="firmware",
                                              created_at=created or start, cancelled_at=cancelled)
    window.nodes.set(nodes)
    return window


def test_the_replay_keeps_the_maintenance_windows_in_force_then(demo, submit_as):
    # every H100 node was in maintenance from 3 h ago to 1 h ago: an H100 job submitted 3 h ago
    # with a 1 h limit could only start when the window ended, in the replay as on the fleet
    job = submit_as("alice", name="h", gpus=8, gpu_types=("H100-80GB",), runtime_limit_s=3600)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=3))
    h100 = list(Node.objects.filter(gpu_type__name="H100-80GB"))
    window = _window(h100, now - timedelta(hours=3), now - timedelta(hours=1))
    _window(h100, now - timedelta(hours=1), now, cancelled=now - timedelta(hours=2))     # never began
    half = _window(h100[:1], now - timedelta(minutes=50), now, cancelled=now - timedelta(minutes=20))
    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)
    windows = {w.id: w for w in request.work.maintenance}
    assert set(windows) == {str(window.pk), str(half.pk)}
    assert (windows[str(window.pk)].start_at, windows[str(window.pk)].end_at) == (0.0, 7200.0)
    assert windows[str(window.pk)].nodes == tuple(sorted(n.name for n in h100))
    assert windows[str(half.pk)].end_at == pytest.approx(3 * 3600 - 20 * 60)   # up to its cancellation
    replay = run_replay(request.work)
    assert replay.maintenance_windows == 2
    for _, run in replay.runs:
        assert run["wait_max_min"] == pytest.approx(120.0)
        assert run["maintenance_gpu_hours"] > 0
    MaintenanceWindow.objects.all().delete()
    again = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)
    assert again.key != request.key and again.work.maintenance == ()
    for _, run in run_replay(again.work).runs:
        assert run["wait_max_min"] == 0.0


def test_the_replay_knows_a_window_only_from_when_it_was_created(demo, submit_as):
    # an H100 job with a 2 h limit submitted 3 h ago; every H100 node in maintenance from 2 h
    # ago to 1 h ago. Created 2.5 h ago, after the job was submitted, the window was unknown
    # when the job started: the replay starts it at once and it runs into the window for an
    # hour, as on the fleet; created before the replayed time, the job waits for its end
    job = submit_as("alice", name="h", gpus=8, gpu_types=("H100-80GB",), runtime_limit_s=7200)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=3))
    h100 = list(Node.objects.filter(gpu_type__name="H100-80GB"))
    window = _window(h100, now - timedelta(hours=2), now - timedelta(hours=1), created=now - timedelta(hours=2.5))
    request = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)
    (late,) = request.work.maintenance
    assert (late.id, late.announced_at, late.start_at, late.end_at) == (str(window.pk), 1800.0, 3600.0, 7200.0)
    replay = run_replay(request.work)
    for _, run in replay.runs:
        assert run["wait_max_min"] == 0.0
        assert (run["maintenance_overrun_jobs"], run["maintenance_overrun_gpu_hours"]) == (1, 8.0)
        assert run["jobs_done"] == 1
    html = render_to_string("frontend/_what_if_result.html", result_context({"state": "done", "replay": replay}))
    assert "keep from when each was created" in html
    assert '<tr><th scope="row">jobs run into a maintenance window</th><td>1</td><td>1</td></tr>' in html
    MaintenanceWindow.objects.filter(pk=window.pk).update(created_at=now - timedelta(days=2))
    known = whatif.prepare(1, whatif.Policy("pack", True, True), now=now)
    assert known.key != request.key and known.work.maintenance[0].announced_at is None
    for _, run in run_replay(known.work).runs:
        assert run["wait_max_min"] == pytest.approx(120.0)
        assert run["maintenance_overrun_jobs"] == 0


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis `make test` starts")
def test_a_replay_asked_for_while_redis_is_away_is_a_503_that_says_so(client_for, submit_as, settings):
    submit_as("alice")
    client = client_for("alice")
    settings.REDIS_URL = f"redis://127.0.0.1:{chaos_cluster.free_port()}/0"  # nobody listens there
    page = client.post("/what-if/", {"days": "1", "placement": "spread", "backfill": "on", "preemption": "on"})
    assert page.status_code == 503
    error = page.context["error"]
    assert "The replay did not start" in error and "Redis" in error and "is unreachable" in error
    assert "live_url" not in page.context  # nothing to follow: no replay was started
    settings.REDIS_URL = os.environ["REDIS_URL"]
    assert whatif.Store().get(whatif.LOCK_KEY) is None  # and no lock was left behind


def test_a_result_of_other_code_is_never_served(demo, submit_as, monkeypatch):
    # a result cached by the previous deploy (another engine, another result shape) lives on
    # for RESULT_TTL_S; until 5 Dec 2026 the same request found it and the page read 0 jobs
    # that could never run, a figure that result did not have
    submit_as("alice", name="x", gpus=1, runtime_limit_s=600)
    now = timezone.now()
    policy = whatif.Policy("pack", True, True)
    before = whatif.prepare(1, policy, now=now)
    whatif.Store().set(before.key, {"state": "done", "replay": "an older result"}, whatif.RESULT_TTL_S)
    assert whatif.prepare(1, policy, now=now).key == before.key  # the same code: served
    monkeypatch.setattr(whatif, "code_fingerprint", lambda: "0" * 64)
    after = whatif.prepare(1, policy, now=now)
    assert after.key != before.key and whatif.status(after.key) is None


def test_the_code_fingerprint_changes_with_the_engines_code():
    import scheduler_core

    probe = Path(scheduler_core.__file__).parent / "_fingerprint_probe.py"
    whatif.code_fingerprint.cache_clear()
    before = whatif.code_fingerprint()
    try:
        probe.write_text("# a deploy that added an engine module\n")
        whatif.code_fingerprint.cache_clear()
        assert whatif.code_fingerprint() != before
    finally:
        probe.unlink(missing_ok=True)
        whatif.code_fingerprint.cache_clear()
    assert whatif.code_fingerprint() == before


def test_a_get_never_starts_a_replay(client_for, submit_as):
    """`/what-if/?run=1` started a replay on a GET: a link or an <img> in any page a signed-in
    user opened could start replays in their name. A GET now shows the form, prefilled, and
    says the Replay button starts it; nothing is stored, no lock is taken."""
    submit_as("alice")
    client = client_for("alice")
    query = {"run": "1", "days": "1", "placement": "spread", "backfill": "on", "preemption": "on"}
    key = whatif.prepare(1, whatif.Policy("spread", True, True)).key

    page = client.get("/what-if/", query)

    assert page.status_code == 200 and "live_url" not in page.context and not page.context["asked"]
    assert "starts from the Replay button only" in page.content.decode()
    assert whatif.status(key) is None and whatif.Store().get(whatif.LOCK_KEY) is None
    form = page.content.decode().split('id="what-if-form"', 1)[0].rsplit("<form", 1)[1]
    assert 'method="post"' in form


def test_starting_a_replay_is_a_post_with_the_csrf_token(demo, submit_as):
    from django.contrib.auth import get_user_model
    from django.test import Client

    submit_as("alice")
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.get(username="alice"))
    form = {"days": "1", "placement": "spread", "backfill": "off", "preemption": "off"}
    key = whatif.prepare(1, whatif.Policy("spread", False, False)).key

    refused = client.post("/what-if/", form)  # a cross-site form has no token: nothing starts
    assert refused.status_code == 403 and whatif.status(key) is None

    page = client.get("/what-if/", form)
    token = page.context["csrf_token"]
    assert f'name="csrfmiddlewaretoken" value="{token}"' in page.content.decode()
    started = client.post("/what-if/", {**form, "csrfmiddlewaretoken": str(token)})
    assert started.status_code == 303
    assert key_of(started["Location"]) == key and whatif.status(key) is not None
    wait_done(key)
    shown = client.get(started["Location"])  # the GET that shows the finished replay
    assert shown.status_code == 200 and shown.context["state"]["state"] == "done"
    assert "what-if (spread, backfill off, preemption off" in shown.context["result"].runs[1][0]


def test_a_replay_that_cannot_start_is_said_on_the_post(client_for, submit_as):
    client = client_for("alice")
    form = {"days": "1", "placement": "spread", "backfill": "on", "preemption": "on"}
    empty = client.post("/what-if/", form)  # nothing submitted in the window
    assert empty.status_code == 409 and "No job was submitted in the last 1 day" in empty.content.decode()
    submit_as("alice")
    store = whatif.Store()
    store.set(whatif.LOCK_KEY, "someone-else", 5)
    try:
        busy = client.post("/what-if/", form)
    finally:
        store.delete(whatif.LOCK_KEY)
    assert busy.status_code == 409 and 'data-replay="busy"' in busy.content.decode()
    assert "Another replay is running" in busy.content.decode() and "live_url" not in busy.context


def test_a_fleet_whose_every_node_is_retired_is_said_so_not_unregistered(demo):
    Node.objects.update(state=NodeState.RETIRED)

    with pytest.raises(whatif.ReplayRefused) as refused:
        whatif.real_fleet()

    said = str(refused.value)
    assert said.startswith(f"Every node of the fleet is retired ({Node.objects.count()}): there is no fleet")
    assert "registered" not in said
