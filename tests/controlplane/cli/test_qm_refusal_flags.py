"""A refused `qm submit` named the API's fields, not the flags typed: `qm submit --time 8d` said
"runtime_limit_s: 691200 s is beyond the maximum of priority class 'research' (604800 s)", a
field the user never wrote. Where a flag is spelled otherwise than its field, the line now
names the flag and what was given; fields named as typed (a YAML file's) read as before."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_a_refusal_names_the_flag_the_user_typed(alice_qm) -> None:
    too_long = alice_qm("submit", "--name", "x", "--gpus", "1", "--time", "8d")
    no_class = alice_qm("submit", "--name", "x", "--gpus", "1", "--priority", "nope")

    assert too_long.code == 1 and no_class.code == 1
    assert too_long.err.splitlines()[0] == "error: Invalid request."
    assert too_long.err.splitlines()[1].startswith("  runtime_limit_s (--time 8d): "), too_long.err
    assert no_class.err.splitlines()[1].startswith(
        "  priority_class (--priority nope): unknown priority class 'nope'"), no_class.err


def test_a_yaml_files_fields_read_as_written(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ngpus: 1\nruntime_limit_s: 0\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 1 and "  runtime_limit_s: " in r.err and "--time" not in r.err


@pytest.mark.parametrize(("typed", "said"), [
    ("99999d", "8639913600 s (99999 d)"), ("30d", "2592000 s (30 d)"), ("200000h", "720000000 s (8333 d 8 h)"),
])
def test_a_time_too_long_is_refused_in_days_naming_the_flag(alice_qm, typed, said) -> None:
    """`qm submit -t 99999d` was told "Ensure this value is less than or equal to 2147483647."
    (seconds, and no maximum of any class), `-t 30d` "2592000 s (720.0 h) ... which is 168.0 h"."""
    r = alice_qm("submit", "--name", "x", "--gpus", "1", "-t", typed, "--", "true")

    assert r.code == 1 and r.out == ""
    assert r.err == (f"error: Invalid request.\n  runtime_limit_s (-t {typed}): {said} is beyond the maximum of "
                     "priority class 'research' (604800 s), which is 7 d\n")


def test_a_flag_spelled_as_its_field_is_named_too(alice_qm) -> None:
    """`qm submit --gpus 0` said `gpus: …` where `--time 8d` said `runtime_limit_s (--time 8d): …`."""
    r = alice_qm("submit", "--name", "x", "--gpus", "0", "--", "true")

    assert r.code == 1
    assert r.err.splitlines()[1].startswith("  gpus (--gpus 0): "), r.err


def test_a_refusal_names_the_flag_as_typed_of_its_spellings(alice_qm) -> None:
    """`--mem-per-gpu 99999` (sbatch's spelling) was refused as `memory_gb_per_gpu (--memory-per-gpu
    99999)`, a flag the user never typed; each spelling is named as typed, `-t` too."""
    slurm = alice_qm("submit", "--name", "x", "--gpus", "1", "--mem-per-gpu", "99999", "--", "true")
    qm_own = alice_qm("submit", "--name", "x", "--gpus", "1", "--memory-per-gpu=99999", "--", "true")
    short = alice_qm("submit", "--name", "x", "--gpus", "1", "-t", "8d", "--", "true")
    attached = alice_qm("submit", "--name", "x", "--gpus", "1", "-t8d", "--", "true")

    assert slurm.code == 1 and "\n  memory_gb_per_gpu (--mem-per-gpu 99999): asks 99999 GB" in slurm.err, slurm.err
    assert qm_own.code == 1 and "\n  memory_gb_per_gpu (--memory-per-gpu 99999): " in qm_own.err, qm_own.err
    assert "\n  runtime_limit_s (-t 8d): 691200 s (8 d) is beyond" in short.err, short.err
    assert "\n  runtime_limit_s (-t 8d): " in attached.err, attached.err


@pytest.mark.parametrize("command", [["submit", "--name", "x", "--gpus", "1"], ["list"]])
def test_p_typed_as_slurms_partition_is_told_it_is_the_priority_class(alice_qm, command) -> None:
    """sbatch's and squeue's -p is the partition; qm's the priority class: `qm submit -p gpu` was
    refused with the class list alone, which left a Slurm user guessing how to pick a pool."""
    r = alice_qm(*command, "-p", "gpu", *(["--", "true"] if command[0] == "submit" else []))

    assert r.code == 1 and r.out == ""
    lines = r.err.splitlines()
    assert lines[1].startswith("  priority_class (-p gpu): "), r.err
    assert lines[2] == ("  -p is qm's priority class (--priority), not Slurm's partition: to choose a pool, give "
                        "--gpu-type TYPE: each pool is one GPU type (qm sinfo lists them)"), r.err
    # Typed as --priority, it is the class that was meant: no word of partitions.
    long = alice_qm(*command, "--priority", "gpu", *(["--", "true"] if command[0] == "submit" else []))
    assert "partition" not in long.err and len(long.err.splitlines()) == 2, long.err


def test_a_gpu_type_in_the_wrong_case_is_refused_naming_the_type_meant(alice_qm) -> None:
    r = alice_qm("submit", "--name", "x", "--gpus", "1", "--gpu-type", "h100-80gb", "--", "true")

    assert r.code == 1
    assert "unknown GPU type 'h100-80gb'; known types: " in r.err and r.err.rstrip().endswith(
        "; did you mean H100-80GB?"), r.err
