"""`qm list -n NAME` lists the jobs of that whole name, the ones `qm cancel -n NAME` cancels (as
squeue -n and scancel -n both read it): it listed every name containing the text (`-n t`: any
name with a "t"), so a researcher previewing with `qm list -n` and then cancelling with
`qm cancel -n` acted on another set than the one shown."""

from __future__ import annotations

import re

import pytest

from controlplane.choices import JobState
from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _ids(out: str) -> set[int]:
    return {int(m.group(1)) for m in re.finditer(r"^\s*(\d+)\s", out, re.M)}


def test_list_by_name_shows_what_cancel_by_name_then_cancels(alice_qm, fleet) -> None:
    alice = fleet.users["owner"]
    train = f.make_job(fleet.ml, name="train", submitter=alice)
    f.make_job(fleet.ml, name="pretrain-7b", submitter=alice)
    f.make_job(fleet.ml, name="Train", submitter=alice)
    f.make_job(fleet.ml, name="t", submitter=alice)

    previewed = alice_qm("list", "-n", "train")

    assert previewed.code == 0, previewed.err
    assert _ids(previewed.out) == {train.pk}
    assert alice_qm("--json", "squeue", "--name", "train").json()["count"] == 1
    cancelled = alice_qm("cancel", "-n", "train")
    assert cancelled.code == 0, cancelled.err
    assert set(Job.objects.filter(state=JobState.CANCELLED).values_list("pk", flat=True)) == _ids(previewed.out)


def test_list_help_says_the_whole_name(alice_qm, fleet) -> None:
    said = " ".join(alice_qm("list", "--help").out.split())

    assert "whole name" in said and "contains" not in said
