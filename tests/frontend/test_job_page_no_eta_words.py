"""A waiting job with no ETA: its page says why in the words `qm explain` and `qm status` say
(services/eta_text.py, one home). Of a job that can never run as asked the page said "none: as
asked, it will never start" and qm "none: it can never run as asked" (the researcher audit,
7 Dec); of one the last cycle gave no ETA the page said "no estimate this cycle: …" and qm
"unknown" (tests/controlplane/cli/test_qm_latest_start_never.py says qm's side)."""

from __future__ import annotations

import re

import pytest

from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _etas(client, job_id: int) -> list[str]:
    pages = [client.get(f"/jobs/{job_id}/").content.decode(),
             client.get(f"/ui/jobs/{job_id}.json").json()["html"]["job-status"]]
    return [re.sub(r"\s+", " ", page.split('<dd id="eta">', 1)[1].split("</dd>", 1)[0]).strip() for page in pages]


def test_a_job_that_can_never_run_has_qms_words_for_its_eta(client_for, submit_as) -> None:
    never = submit_as("alice", name="too-big", gpus=96, gpu_types=("H100-80GB",))
    run_cycle("test")
    never.refresh_from_db()
    assert never.pending_code == "CanNeverRun" and not never.pending_resolvable  # the premise

    assert _etas(client_for("alice"), never.pk) == ["none: it can never run as asked"] * 2


def test_a_job_no_cycle_estimated_says_so_as_qm_does(client_for, submit_as) -> None:
    waiting = submit_as("alice", name="fresh", gpus=8)  # no cycle has run since: no ETA yet

    assert _etas(client_for("alice"), waiting.pk) == [
        "no estimate this cycle: the scheduler cannot promise a start for it yet"] * 2
