"""`qm submit --time 0` and `--gpus 0` relayed DRF's "Ensure this value is greater than or equal
to 1." under the flag: neither what the 1 counts nor in what unit. The API now says each job
field's bound in its unit and meaning, and qm relays it naming the flag typed (exit 1: the
server's refusal). Nothing is submitted."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("args", "line"), [
    (["--gpus", "0"], "gpus (--gpus 0): a job needs at least 1 GPU"),
    (["--gpus", "1", "--time", "0"], "runtime_limit_s (--time 0): a runtime limit is at least 1 s"),
    (["--gpus", "1", "--checkpoint-every", "0"], "checkpoint_interval_s (--checkpoint-every 0): a checkpoint interval is at least 1 s"),
    (["--gpus", "8", "--gpus-per-node", "0"], "gpus_per_node (--gpus-per-node 0): at least 1 GPU on each node of the gang"),
    (["--gpus", "1", "--cpus-per-gpu", "-1"], "cpus_per_gpu (--cpus-per-gpu -1): host CPUs per GPU: 0 (none asked for) or more"),
], ids=["gpus", "time", "checkpoint", "gpus-per-node", "cpus-per-gpu"])
def test_a_bound_is_relayed_in_its_unit_naming_the_flag(alice_qm, fleet, args, line) -> None:
    run = alice_qm("submit", "--name", "x", *args, "--", "true")

    assert run.code == 1, run
    assert f"\n  {line}\n" in run.err + "\n", run.err
    assert "Ensure this value" not in run.err
    assert not Job.objects.exists()
