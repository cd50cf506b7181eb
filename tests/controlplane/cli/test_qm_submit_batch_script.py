"""`qm submit job.sh`, a batch script as sbatch takes one (`#!/bin/bash`, `#SBATCH` lines): refused
saying it is a script, with the qm command that runs it: its directives as flags, the job named
after the script as sbatch names it, its text as the command (`--wrap`; what sbatch sends too).
It was read as YAML: "job.sh must be a mapping of job fields (name, gpus, ...), got str"."""

from __future__ import annotations

import re
import shlex

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow

SCRIPT = """\
#!/bin/bash
#SBATCH --gpus=2
#SBATCH -t 30:00
python train.py --lr 3e-4
"""


def test_a_batch_script_is_refused_with_the_command_that_runs_it(alice_qm, fleet, tmp_path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT)

    refused = alice_qm("submit", str(script))

    assert refused.code == 2 and refused.out == ""
    assert refused.err.startswith(f"error: {script} is a shell script, not a YAML file of job fields: "
                                  "qm reads no #SBATCH lines.")
    suggested = re.search(r"e\.g\. qm (submit .*) \(or -- bash PATH", refused.err)
    assert suggested, refused.err
    words = [SCRIPT if word == f"$(cat {script})" else word for word in shlex.split(suggested.group(1))]
    assert words[:5] == ["submit", "-J", "job.sh", "--gpus=2", "-t"]
    assert not Job.objects.exists()

    ran = alice_qm(*words, "--parsable")

    assert ran.code == 0, ran.err
    job = Job.objects.get(pk=int(ran.out))
    assert (job.name, job.gpus, job.runtime_limit_s, job.command) == ("job.sh", 2, 30 * 60, SCRIPT)


def test_a_script_on_standard_input_is_said_to_be_one(alice_qm, fleet) -> None:
    refused = alice_qm("submit", "-", stdin="#!/bin/sh\npython x.py\n")

    assert refused.code == 2
    assert refused.err.startswith("error: standard input is a shell script, not a YAML file of job fields")
    assert '--gpus N --wrap "$(cat SCRIPT)"' in refused.err
