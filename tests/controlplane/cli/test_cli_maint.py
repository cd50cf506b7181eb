"""`qm maint add|list|show|edit|cancel`: maintenance windows from the command line, as a real
subprocess against a live server. Times are given as Slurm gives them (now+2h, +2h, an ISO
time); a refusal names the flag as typed; the running jobs a window affects are listed."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from controlplane.models import MaintenanceWindow, Node
from controlplane.services import reconcile, transitions
from tests.controlplane import factories as f


def _root(qm) -> None:  # noqa: ANN001
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0


def _running(fleet, node: str, gpus: int, limit_s: int, name: str) -> int:  # noqa: ANN001
    job = f.make_job(fleet.ml, fleet.research, name=name, gpus=gpus, runtime_limit_s=limit_s)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=Node.objects.get(name=node).pk,
                                                         gpu_indices=list(range(gpus)))],
                             lease=lease, borrowed=False, at=timezone.now(), actor="test")
    return job.pk


def test_an_admin_adds_a_window_and_is_told_which_running_jobs_it_affects(qm, fleet) -> None:  # noqa: ANN001
    _root(qm)
    job = _running(fleet, "h100-1", 4, 10 * 3600, "long-train")
    before = datetime.now(UTC)

    r = qm("maint", "add", "--nodes", "h100-1,h100-2", "--start", "now+2h", "--duration", "4h",
           "--reason", "firmware upgrade")

    assert r.code == 0, r.err
    window = MaintenanceWindow.objects.get()
    assert sorted(n.name for n in window.nodes.all()) == ["h100-1", "h100-2"]
    assert timedelta(hours=2) <= window.start_at - before < timedelta(hours=2, minutes=1)
    assert window.end_at - window.start_at == timedelta(hours=4) and window.reason == "firmware upgrade"
    lines = r.out.splitlines()
    assert lines[0].startswith(f"Maintenance window {window.pk} scheduled: h100-1,h100-2 from ")
    assert lines[0].endswith("(4 h): firmware upgrade.")
    assert lines[1].startswith("1 running job will still hold GPUs on its nodes when it begins, by its runtime limit")
    assert lines[2].split()[:2] == ["JOB", "NAME"]
    row = lines[3]
    assert row.split()[0] == str(job)
    assert "long-train" in row and "h100-1" in row
    assert f"qm maint cancel {window.pk}" in r.out


def test_list_show_edit_and_cancel(qm, fleet) -> None:  # noqa: ANN001
    _root(qm)
    start = (timezone.now() + timedelta(hours=3)).astimezone(UTC).replace(microsecond=0)
    added = qm("maint", "add", "--pool", "a100", "--start", start.strftime("%Y-%m-%dT%H:%M:%S"), "--end", "+5h",
               "--reason", "rack move", "--json")
    assert added.code == 0, added.err
    window_id = added.json()["id"]
    # --end +5h: five hours from now, two after the start given.
    assert added.json()["nodes"] == ["a100-0", "a100-1"] and abs(added.json()["duration_s"] - 2 * 3600) < 60

    listed = qm("maint", "list")
    assert listed.code == 0, listed.err
    header, row = listed.out.splitlines()[:2]
    assert header.split()[:3] == ["ID", "STATE", "START"]
    assert row.split()[:2] == [str(window_id), "upcoming"] and "a100-0,a100-1" in row and "rack move" in row

    shown = qm("maint", "show", str(window_id))
    assert shown.code == 0, shown.err
    assert any(line.startswith("Reason:") and line.endswith(" rack move") for line in shown.out.splitlines())
    assert "Created:" in shown.out and "by root" in shown.out

    edited = qm("maint", "edit", str(window_id), "--nodes", "a100-0", "--reason", "rack move, row 4")
    assert edited.code == 0, edited.err
    assert edited.out.startswith(f"Maintenance window {window_id} now: a100-0 from ")
    assert [n.name for n in MaintenanceWindow.objects.get(pk=window_id).nodes.all()] == ["a100-0"]

    cancelled = qm("maint", "cancel", str(window_id))
    assert cancelled.code == 0, cancelled.err
    assert "its nodes take any work again from the next scheduling cycle" in cancelled.out
    assert "No maintenance window active or upcoming" in qm("maint", "list").out
    every = json.loads(qm("maint", "list", "--all", "--json").out)
    assert [(w["id"], w["state"]) for w in every["results"]] == [(window_id, "cancelled")]


def test_refusals_name_the_flag_and_members_cannot_add(qm, fleet) -> None:  # noqa: ANN001
    _root(qm)
    bad = qm("maint", "add", "--nodes", "h100-1,ghost", "--start", "+1h", "--duration", "20d", "--reason", "fw")
    bare = qm("maint", "add", "--nodes", "h100-1", "--start", "2h", "--duration", "1h", "--reason", "fw")

    assert bad.code == 1 and bad.err.startswith("error: Invalid request.")
    assert "nodes (--nodes h100-1,ghost): no node named 'ghost'" in bad.err
    assert "duration_s (--duration 20d): 20 d long: a window lasts at most 14 d" in bad.err
    assert bare.code == 2 and "--start: '2h' is a length, not a time: say +2h" in bare.err
    assert not MaintenanceWindow.objects.exists()

    assert qm("logout").code == 0
    assert qm("login", "-u", "alice", "--password-stdin", stdin="alice\n").code == 0
    member = qm("maint", "add", "--nodes", "h100-1", "--start", "+1h", "--duration", "1h", "--reason", "fw")
    assert member.code == 1 and "Only admins may change this resource" in member.err
    assert qm("maint", "list").code == 0


def test_a_window_in_the_past_or_over_another_is_refused_in_words(qm, fleet) -> None:  # noqa: ANN001
    _root(qm)
    past = (timezone.now() - timedelta(hours=1)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
    early = qm("maint", "add", "--nodes", "h100-1", "--start", past, "--duration", "1h", "--reason", "fw")
    first = qm("maint", "add", "--nodes", "h100-1,h100-2", "--start", "+2h", "--duration", "4h", "--reason",
               "firmware upgrade", "--json")
    over = qm("maint", "add", "--nodes", "h100-2,h100-3", "--start", "+3h", "--duration", "1h", "--reason", "cabling")
    after = qm("maint", "add", "--nodes", "h100-2", "--start", "+6h", "--duration", "1h", "--reason", "next", "--json")

    assert early.code == 1 and early.err.startswith("error: Invalid request.")
    assert f"start_at (--start {past}): it starts at {past.replace('T', ' ')} UTC, before now (" in early.err
    assert "to take nodes out at once, start it now" in early.err
    assert first.code == 0, first.err
    window = first.json()["id"]
    assert over.code == 1 and over.err.startswith("error: Invalid request.")
    assert (f"nodes (--nodes h100-2,h100-3): h100-2 is already in maintenance window {window} (firmware upgrade, "
            "from ") in over.err
    assert f"extend or change window {window} instead (`qm maint edit {window}`" in over.err
    # Back to back (+2h for 4h, then +6h): the start given as +6h is a moment later than the first's end.
    assert after.code == 0, after.err
    moved = qm("maint", "edit", str(after.json()["id"]), "--start", "+5h")
    assert moved.code == 1 and f"h100-2 is already in maintenance window {window}" in moved.err
    assert sorted(MaintenanceWindow.objects.values_list("reason", flat=True)) == ["firmware upgrade", "next"]


def test_windows_stored_overlapping_before_the_rule_are_named_by_list_and_show(qm, fleet) -> None:  # noqa: ANN001
    _root(qm)
    now = timezone.now()
    stored = []
    for start_h, end_h, nodes in ((1, 4, ["h100-1", "h100-2"]), (3, 5, ["h100-2"]), (6, 7, ["h100-2"])):
        window = MaintenanceWindow.objects.create(start_at=now + timedelta(hours=start_h),
                                                  end_at=now + timedelta(hours=end_h), reason="fw", created_at=now)
        window.nodes.set(Node.objects.filter(name__in=nodes))
        stored.append(window.pk)
    first, second, third = stored

    listed = qm("maint", "list")
    assert listed.code == 0, listed.err
    notes = [line for line in listed.out.splitlines() if line.startswith("Window ")]
    assert notes == [f"Window {first} overlaps window {second} on a shared node (stored before overlapping windows "
                     "were refused): merge them, `qm maint edit` one and `qm maint cancel` the other.",
                     f"Window {second} overlaps window {first} on a shared node (stored before overlapping windows "
                     "were refused): merge them, `qm maint edit` one and `qm maint cancel` the other."]
    shown = qm("maint", "show", str(first))
    assert shown.code == 0, shown.err
    assert any(line.startswith("Overlaps:") and f"overlaps window {second} on a shared node" in line
               for line in shown.out.splitlines())
    alone = qm("maint", "show", str(third))
    assert alone.code == 0 and "Overlaps" not in alone.out


def test_a_window_starting_now_says_what_runs_inside_it_now(qm, fleet) -> None:  # noqa: ANN001
    """`--start now`: the jobs on its nodes are inside the window already; the words said they
    "will still hold GPUs on its nodes when it begins" (and "drain the nodes", which frees
    nothing once it has begun)."""
    _root(qm)
    job = _running(fleet, "h100-1", 2, 3600, "inside")

    r = qm("maint", "add", "--nodes", "h100-1", "--start", "now", "--duration", "1h", "--reason", "PSU swap")
    empty = qm("maint", "add", "--nodes", "h100-2", "--start", "now", "--duration", "1h", "--reason", "fan")

    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[1] == ("1 running job holds GPUs on its nodes now, inside the window, until the end of its runtime "
                        "limit at the latest (the scheduler stops none: cancel or requeue them to free the nodes):")
    assert lines[3].split()[0] == str(job)
    assert empty.out.splitlines()[1] == "No job holds GPUs on its nodes now."
    # Its closing words too: the window has begun ("Jobs that would still run on its nodes when
    # it begins wait" read on the demo, 7 Dec, for a window begun a second before).
    for said in (r.out, empty.out):
        assert "when it begins" not in said, said
        assert ("No job starts on its nodes until it ends (jobs that could only run there wait, reason "
                "MaintenanceWindow).") in said, said


def test_a_windows_length_is_said_whole_as_the_server_says_it(qm, fleet) -> None:  # noqa: ANN001
    """A window of 1 d 2 h 30 min: `qm maint add`, `show` and `list` said "1d2h" (two units, the
    half hour cut off), where the window's own sentences say "1 d 2 h 30 min" (services/maintenance.span)."""
    from controlplane.services.maintenance import span

    _root(qm)
    added = qm("maint", "add", "--nodes", "h100-1", "--start", "+2h", "--duration", "1d2h30m", "--reason", "rack")
    assert added.code == 0, added.err
    window = MaintenanceWindow.objects.get()
    said = span((window.end_at - window.start_at).total_seconds())
    assert said == "1 d 2 h 30 min"

    assert added.out.splitlines()[0].endswith(f"({said}): rack.")
    assert re.search(rf"^Length:\s+{said}$", qm("maint", "show", str(window.pk)).out, re.M)
    assert f"  {said}  " in qm("maint", "list").out
