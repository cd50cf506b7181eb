"""sbatch reads `--time 30` as 30 minutes; qm read it as 30 seconds, so a Slurm user's job was
killed half a minute in. `--time` (and a job file's `time:`) now reads a bare number as minutes;
`runtime_limit_s:` and `--checkpoint-every` keep seconds, as their names and help say."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_a_bare_time_is_minutes_as_sbatch_reads_it(alice_qm) -> None:
    r = alice_qm("submit", "--name", "bare", "--gpus", "1", "--time", "30", "--checkpoint-every", "600",
                 "--", "python", "train.py")

    assert r.code == 0, r.err
    assert "limit 30 min" in r.out
    job = Job.objects.get(name="bare")
    assert (job.runtime_limit_s, job.checkpoint_interval_s) == (1800, 600)

    assert alice_qm("update", str(job.pk), "-t", "45").code == 0
    assert Job.objects.get(pk=job.pk).runtime_limit_s == 2700


@pytest.mark.parametrize(("line", "seconds"), [
    ("time: 30", 1800), ("time: '30'", 1800), ("time: 30m", 1800), ("time: '1:00:00'", 3600),
    ("runtime_limit_s: 30", 30),
], ids=["time-int", "time-text", "time-unit", "time-clock", "runtime_limit_s"])
def test_a_job_files_time_reads_as_the_flag_and_runtime_limit_s_as_seconds(alice_qm, tmp_path, line, seconds):
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: filed\ngpus: 1\n{line}\ncommand: python train.py\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 0, r.err
    assert Job.objects.get(name="filed").runtime_limit_s == seconds
