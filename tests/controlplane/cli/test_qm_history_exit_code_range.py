"""`qm history --exit-code N` takes a code a job can end with, 0 to 255, and refuses any other
naming the flag, before any request (exit 2)."""

from __future__ import annotations

import pytest

from controlplane.cli.main import main


@pytest.mark.parametrize("typed", ["300", "-1", "x", "1.5"])
def test_history_refuses_an_exit_code_no_job_can_have_naming_the_flag(capsys, typed: str) -> None:
    """`qm history --exit-code 300` (and -1) said "No job matching --exit-code 300 ended …", exit 0,
    as if none had, where no job can end with it (found on the researcher's walk, 7 Dec)."""
    with pytest.raises(SystemExit) as ended:
        main(["history", "--exit-code", typed])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert (f"qm history: error: argument --exit-code: '{typed}' is not a whole number from 0 to 255 (an exit "
            "code; a signal's death is 128 + its number: 137 of SIGKILL)") in err, err
