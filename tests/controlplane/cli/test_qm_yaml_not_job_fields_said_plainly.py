"""A job file that holds no job fields is said to be what it is, in words, with what to write
instead: an empty file (or `qm submit -` given nothing) was "must be a mapping of job fields
(name, gpus, ...), got NoneType", Python's name for nothing; a list "got list", a lone number
"got int"."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.cli.client import CliError
from controlplane.cli.jobs.spec_files import load_spec_file

EXAMPLE = "write one job field a line, e.g. name: train and gpus: 8"


@pytest.mark.parametrize(("text", "said"), [
    ("", "is empty"),
    ("# only a comment\n", "is empty"),
    ("- name: a\n- name: b\n", "holds a list, not a job's fields (one job a file; --array for many)"),
    ("42\n", "holds one value (42), not a job's fields"),
    ("train.py\n", "holds one value (train.py), not a job's fields"),
])
def test_a_file_of_no_job_fields_says_what_it_holds(tmp_path: Path, text: str, said: str) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(text)

    with pytest.raises(CliError) as refused:
        load_spec_file(str(spec))

    assert str(refused.value) == f"{spec} {said}: {EXAMPLE}"
    assert "NoneType" not in str(refused.value) and "got " not in str(refused.value)
