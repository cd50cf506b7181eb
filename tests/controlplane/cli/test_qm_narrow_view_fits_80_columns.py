"""On an 80-column terminal a table shows the columns a user needs most and fits (kubectl's
default view, squeue's and sinfo's): `qm history` was 118 columns wide, `qm runs` 155,
`qm showback` 150 and more, `qm quotas` 92, `qm sinfo` 93 and the fleet's `qm events` past 100,
by their fixed columns alone, so every row wrapped. `--wide`, a pipe or file without COLUMNS and
`--json` show every column; showback's narrow view keeps finance's money and GPU-hour columns,
their figures as the wide view says them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.services import transitions
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import both_teams_held_one_gpu
from tests.controlplane.job_runs_story import bind_at

pytestmark = pytest.mark.slow

AT_80 = {"COLUMNS": "80"}


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def _headers(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def _admin(qm) -> None:
    assert qm("login", "--username", "root", "--password-stdin", stdin="root\n").code == 0


def test_history_fits_80_columns_and_wide_shows_every_column(alice_qm, fleet) -> None:
    now = timezone.now()
    f.make_job(fleet.ml, name="eval-llama", submitter=fleet.users["owner"], state=JobState.CANCELLED,
               started_at=now - timedelta(minutes=50), finished_at=now - timedelta(minutes=1))

    narrow = alice_qm("history", extra_env=AT_80)
    wide = alice_qm("history", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    assert _widest(narrow.out.split("\n1 job ended")[0]) <= 80, narrow.out
    shown = _headers(narrow.out.splitlines()[0])
    assert shown[:2] == ["JOBID", "NAME"] and {"STATE", "ELAPSED", "GPU-H"} <= set(shown), narrow.out
    assert _headers(wide.out.splitlines()[0]) == ["JOBID", "NAME", "TEAM", "USER", "STATE", "EXIT", "START (UTC)",
                                                 "ELAPSED", "GPUS", "GPU-H", "LOST-GPU-H", "COST $", "NODES"]
    assert "eval-llama" in narrow.out and "cut to fit" not in narrow.err


def test_runs_fit_80_columns_and_wide_shows_every_column(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="twice", gpus=1)
    at = timezone.now() - timedelta(hours=1)
    for i in range(2):
        run = bind_at(job, [(fleet.nodes[1], [0], "")], at=at + timedelta(minutes=10 * i))
        if i == 0:
            assert transitions.signal_stop(run.pk, run.generation, reason=transitions.RELEASE_PREEMPTED,
                                           grace_period_s=30, at=at + timedelta(minutes=5), actor="scheduler",
                                           message="Preempted to make room for job 9 of team vision")
        assert transitions.complete_release(run.pk, exit_code=0, at=at + timedelta(minutes=10 * i + 6),
                                            actor="agent:test")

    narrow = alice_qm("runs", str(job.pk), extra_env=AT_80)
    wide = alice_qm("runs", str(job.pk), "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    table = narrow.out.split("\nrun 1:")[0].split("\n2 runs")[0]
    assert _widest(table) <= 80, narrow.out
    assert {"RUN", "HOW IT ENDED", "GPU-H", "COST"} <= set(_headers(narrow.out.splitlines()[0])), narrow.out
    assert len(_headers(wide.out.splitlines()[0])) == 15, wide.out


def test_showback_fits_80_columns_with_finances_figures_as_the_wide_view(qm, fleet) -> None:
    window = both_teams_held_one_gpu(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    for by in ("team", "job", "project"):
        narrow = qm("showback", "--by", by, "--window", window, extra_env=AT_80)
        wide = qm("showback", "--by", by, "--window", window, "--wide", extra_env=AT_80)

        assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
        lines = narrow.out.splitlines()
        end = next(i for i, line in enumerate(lines) if line.startswith("TOTAL"))
        assert max(len(line) for line in lines[1:end + 1]) <= 80, narrow.out
        wide_rows = [_headers(line) for line in wide.out.splitlines()[1:]]
        wide_cells = dict(zip(wide_rows[0], zip(*[r for r in wide_rows[1:] if len(r) == len(wide_rows[0])],
                                                  strict=False), strict=False))
        narrow_rows = [_headers(line) for line in lines[1:end + 1]]
        narrow_cells = dict(zip(narrow_rows[0], zip(*narrow_rows[1:], strict=False), strict=False))
        # The money and GPU-hour columns finance reads, figure for figure the wide view's.
        for full, short in (("GPU-H ALLOC", "GPU-H"), ("COST $", "COST $"), ("$/GPU-H", "$/GPU-H"),
                            ("PREEMPTION WASTE $", "WASTE $")):
            assert narrow_cells[short] == wide_cells[full], (by, short, narrow.out, wide.out)
        if by == "team":
            assert narrow_cells["IDLE RSV $"] == wide_cells["IDLE RESERVED $"], narrow.out


def test_quotas_fit_80_columns_and_wide_shows_every_column(qm, fleet) -> None:
    _admin(qm)

    narrow = qm("quotas", extra_env=AT_80)
    wide = qm("quotas", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    assert _widest(narrow.out) <= 80, narrow.out
    assert {"TEAM", "GPU TYPE", "NOMINAL", "HELD NOW"} <= set(_headers(narrow.out.splitlines()[0])), narrow.out
    assert _headers(wide.out.splitlines()[0]) == ["TEAM", "COHORT", "GPU TYPE", "NOMINAL", "MAY BORROW", "MAY LEND",
                                                 "HELD NOW", "BORROWED", "LENT NOW"]


def test_sinfo_fits_80_columns_and_wide_shows_every_column(alice_qm, fleet) -> None:
    narrow = alice_qm("sinfo", extra_env=AT_80)
    wide = alice_qm("sinfo", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    table = narrow.out.split("\nQueue:")[0]
    assert _widest(table) <= 80, narrow.out
    assert {"POOL", "GPU TYPE", "FREE", "AWAY", "STRANDED"} <= set(_headers(table.splitlines()[0])), narrow.out
    assert len(_headers(wide.out.splitlines()[0])) == 11, wide.out


def test_fleet_events_fit_80_columns_and_wide_shows_every_column(qm, fleet) -> None:
    _admin(qm)
    reason = "XID 79 on GPU 3: fell off the bus during the nightly burn-in, RMA ticket 4471 opened"
    assert qm("nodes", "cordon", "h100-1", "--reason", reason).code == 0

    narrow = qm("events", extra_env=AT_80)
    wide = qm("events", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    assert _widest(narrow.out) <= 80, narrow.out
    assert {"TIME (UTC)", "EVENT", "WHAT"} <= set(_headers(narrow.out.splitlines()[0])), narrow.out
    assert _headers(wide.out.splitlines()[0]) == ["TIME (UTC)", "EVENT", "JOB", "NODE", "TEAM", "BY", "WHAT"]
    assert reason in wide.out


def test_a_pipe_without_columns_shows_every_column(alice_qm, fleet) -> None:
    """A script's `qm sinfo | awk …` reads the columns it always read."""
    piped = alice_qm("sinfo")
    assert len(_headers(piped.out.splitlines()[0])) == 11, piped.out


def test_a_very_wide_state_makes_the_cut_name_give_way(alice_qm, fleet) -> None:
    long = "llama-3-70b-instruct-finetune-lr3e-4-warmup2000-cosine-seq8192-run17"
    job = f.make_job(fleet.ml, name=long, submitter=fleet.users["owner"], gpus=8)
    job.hold = "admin"
    job.save(update_fields=["hold"])

    r = alice_qm("list", extra_env=AT_80)

    assert r.code == 0, r.err
    row = next(line for line in r.out.splitlines() if "pending (held by admin)" in line)
    assert len(row) <= 80 and "…" in row, r.out


def test_sshare_fits_80_columns_with_a_team_named_at_length(alice_qm, fleet) -> None:
    """A team slug of 20 characters (`foundation-models-eu`) made sshare 90 columns wide."""
    f.make_team("foundation-models-eu")

    narrow = alice_qm("sshare", extra_env=AT_80)
    wide = alice_qm("sshare", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    table = narrow.out.split("\nSHARE:")[0]
    assert "foundation-models-eu" in table and _widest(table) <= 80, narrow.out
    assert {"TEAM", "SHARE", "OF", "GPU SHARE", "GPUS HELD"} <= set(_headers(table.splitlines()[0])), narrow.out
    assert len(_headers(wide.out.splitlines()[0])) == 8, wide.out


def test_a_long_waiting_reason_is_cut_after_the_name_to_fit_80_columns(alice_qm, fleet) -> None:
    """Found by QA (7 Dec): on the demo `qm list` was 81 columns with a WaitingForReservation
    job, its name already cut to 10; InsufficientContiguousGpus made it 86. The REASON gives
    way once the NAME is at its shortest, keeping enough of the code to tell it."""
    long = "llama-3-70b-instruct-finetune-run17"
    f.make_job(fleet.ml, name=long, submitter=fleet.users["owner"], gpus=16, queue_position=12,
               eta=timezone.now() + timedelta(hours=2), pending_code="InsufficientContiguousGpus")

    narrow = alice_qm("list", extra_env=AT_80)
    wide = alice_qm("list", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    row = next(line for line in narrow.out.splitlines() if "llama" in line)
    assert len(row) <= 80, narrow.out
    assert re.search(r"InsufficientC\S*…\S*Gpus$", row), row
    assert "NAME, REASON cut to fit 80 columns: --wide shows them whole." in narrow.err
    assert long in wide.out and "InsufficientContiguousGpus" in wide.out


def test_sprio_fits_80_columns_and_wide_shows_the_class_value(alice_qm, fleet) -> None:
    """Found by QA (7 Dec): `qm sprio` on the demo was 82 columns (team language, class
    research), 85 with best-effort, its NAME already cut to 10. The narrow view leaves the class's
    value (`= CLASS`) to --wide: PRIORITY is the class's value plus AGE, the CLASS named beside."""
    from controlplane.models import Membership

    language = f.make_team("language")
    Membership.objects.create(user=fleet.users["owner"], team=language)
    best_effort = f.make_priority_class("best-effort", value=10)
    f.make_job(language, best_effort, name="sweep-trial-114", submitter=fleet.users["owner"], gpus=2)

    narrow = alice_qm("sprio", extra_env=AT_80)
    wide = alice_qm("sprio", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    table = ("ORDER" + narrow.out.split("\nORDER", 1)[1]).splitlines()[:2]  # under the queue order's lines
    assert _widest("\n".join(table)) <= 80, narrow.out
    assert _headers(table[0]) == ["ORDER", "ID", "NAME", "TEAM", "CLASS", "PRIORITY", "AGE", "SHARE", "LIMIT"]
    assert _headers(wide.out.splitlines()[1]) == ["ORDER", "ID", "NAME", "TEAM", "CLASS", "PRIORITY", "= CLASS",
                                                 "+ AGE", "SHARE", "LIMIT"]
