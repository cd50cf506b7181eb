"""A job file's text fields are read as the text written. YAML reads `name: 1.10` as the number
1.1, `name: yes` as true, `name: 2026-11-29` as a date and `0.10` in a command's list as 0.1:
`qm submit` sent the number, and the API stored "1.1", a name nobody wrote (until 7 Dec; the
API now refuses a number where text goes, services/plain_text.py). Numbers and booleans of the
fields that are numbers and booleans (`gpus: 2`, `hold: true`) are read as before."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_a_text_field_is_submitted_as_written(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: 1.10\ngpus: 2\nhold: true\nhold-reason: 12:30\nproject: llm\n"
                    "command: [python, train.py, --lr, 0.10]\nenv:\n  VERSION: 1.10\n  DEBUG: yes\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 0, r.err
    job = Job.objects.get()
    assert job.name == "1.10"  # it was "1.1"
    assert job.command == "python train.py --lr 0.10"  # it was "--lr 0.1"
    assert job.env == {"VERSION": "1.10", "DEBUG": "yes"}  # refused as a number and a boolean
    assert job.hold_reason == "12:30"  # YAML 1.1's sexagesimal 750
    assert job.gpus == 2 and job.hold == "user"


def test_a_roles_name_and_a_date_are_their_text_too(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: 2026-11-29 10:00:00\nroles:\n  - name: 1.0\n    count: 1\n    gpus-per-member: 1\n"
                    "  - name: off\n    count: 2\n    gpus-per-member: 1\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 0, r.err
    job = Job.objects.get()
    assert job.name == "2026-11-29 10:00:00"  # it was the ISO text "2026-11-29T10:00:00"
    assert [role["name"] for role in job.roles] == ["1.0", "off"]


@pytest.mark.parametrize(("line", "seconds"), [
    ("time: 4:00:00", 4 * 3600),  # YAML 1.1's sexagesimal 14400, then taken as minutes: 10 days
    ("time: 1:30", 90),  # MM:SS, as `--time 1:30` and sbatch read it (it was 90 minutes)
    ("time: 30", 30 * 60),  # a bare number is minutes, as `--time 30`
    ("time: 1-12:00", 36 * 3600),
    ("runtime_limit_s: 2:00", 120),
    ("runtime_limit_s: 7200", 7200),
    ("checkpoint_every: 10:00", 600),
])
def test_a_duration_in_a_job_file_is_read_as_the_flag_reads_it(alice_qm, tmp_path, line: str, seconds: int) -> None:  # noqa: ANN001
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: t\ngpus: 1\n{line}\ncommand: [python, train.py]\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 0, r.err
    job = Job.objects.get()
    field = "checkpoint_interval_s" if line.startswith("checkpoint") else "runtime_limit_s"
    assert getattr(job, field) == seconds
