"""qm submit's and qm update's memory flags (--mem-per-gpu, --memory-per-gpu, --min-gpu-memory)
take a size as sbatch --mem-per-gpu does, with its unit: 32G, 32GB, 1T, 16384M, in any case; a
bare number stays GB, qm's unit. A Slurm user's `--mem-per-gpu 32G` was refused by argparse
("invalid int value: '32G'") with qm's whole usage; a size that is no whole number of GB
(16000M) is refused naming the flag and the whole GB nearest above, never rounded silently."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("typed", "gb"), [("32", 32), ("32G", 32), ("32gb", 32), ("32GiB", 32),
                                            ("16384M", 16), ("1T", 1024)])
def test_mem_per_gpu_takes_slurms_units(alice_qm, fleet, typed, gb) -> None:
    run = alice_qm("submit", "-G", "1", "--mem-per-gpu", typed, "--min-gpu-memory", "40G", "--parsable",
                   "--", "true")

    assert run.code == 0, run.err
    job = Job.objects.get(pk=int(run.out))
    assert (job.memory_gb_per_gpu, job.min_gpu_memory_gb) == (gb, 40)


def test_update_takes_the_same_units(alice_qm, fleet) -> None:
    submitted = alice_qm("submit", "-G", "1", "--hold", "--parsable", "--", "true")
    assert submitted.code == 0, submitted.err

    changed = alice_qm("update", submitted.out.strip(), "--memory-per-gpu", "64G")

    assert changed.code == 0, changed.err
    assert Job.objects.get(pk=int(submitted.out)).memory_gb_per_gpu == 64


@pytest.mark.parametrize(("typed", "said"), [
    ("16000M", "'16000M' is not a whole number of GB (15.6 GB): give 16G"),
    ("32X", "'32X' is not a size: give GB as a number (32) or with its unit, as sbatch takes it: 32G, 16384M, 1T"),
    ("1K", "'1K' is less than 1 GB: give 1G"),
    ("G", "'G' is not a size"),
    ("٣٢G", "'٣٢G' is not a size"),  # Arabic-Indic digits, which int() reads as 32
    ("-4G", "'-4G' is not a size"),
])
def test_a_size_qm_cannot_take_is_refused_naming_the_flag(alice_qm, fleet, typed, said) -> None:
    run = alice_qm("submit", "-G", "1", f"--mem-per-gpu={typed}", "--", "true")

    assert run.code == 2
    assert "argument --memory-per-gpu/--mem-per-gpu: " + said in run.err
    assert "invalid int value" not in run.err
    assert not Job.objects.exists()

