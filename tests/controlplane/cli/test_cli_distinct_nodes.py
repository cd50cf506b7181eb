"""`qm submit --distinct-nodes` (sbatch --ntasks-per-node=1 with --gpus-per-node) asks each member
of the gang on a node of its own, `qm status` says it in the job's shape, `qm update` turns it on
or off while the job waits, and a shape it says nothing of is refused naming the flag typed."""

from __future__ import annotations

from controlplane.models import Job


def test_qm_submit_distinct_nodes_is_stored_and_qm_status_says_it(alice_qm, fleet) -> None:
    run = alice_qm("submit", "--name", "spread", "--gpus", "8", "--gpus-per-node", "4", "--distinct-nodes",
                   "--json")

    assert run.code == 0, run.err
    job = Job.objects.get(pk=run.json()["id"])
    assert job.members_on_distinct_nodes is True
    status = alice_qm("status", str(job.pk))
    assert status.code == 0, status.err
    assert "8 GPUs, 4 per node, members on distinct nodes\n" in status.out

    packed = alice_qm("submit", "--name", "packed", "--gpus", "8", "--gpus-per-node", "4", "--json")
    assert Job.objects.get(pk=packed.json()["id"]).members_on_distinct_nodes is False
    assert "distinct" not in alice_qm("status", str(packed.json()["id"])).out


def test_qm_submit_distinct_nodes_of_one_member_is_refused_naming_the_flag(alice_qm, fleet) -> None:
    before = Job.objects.count()

    run = alice_qm("submit", "--name", "one", "--gpus", "4", "--gpus-per-node", "4", "--distinct-nodes")

    assert run.code == 1
    assert run.err.splitlines() == [
        "error: Invalid request.",
        "  members_on_distinct_nodes (--distinct-nodes): gpus 4 with gpus_per_node 4 is a single member, on one "
        "node; members on distinct nodes needs at least two (gpus more than gpus_per_node)"], run.err
    assert Job.objects.count() == before


def test_qm_update_turns_it_on_and_off_while_the_job_waits(alice_qm, fleet) -> None:
    job = alice_qm("submit", "--name", "later", "--gpus", "8", "--gpus-per-node", "4", "--json").json()["id"]

    on = alice_qm("update", str(job), "--distinct-nodes")
    assert on.code == 0, on.err
    assert on.out == f"Job {job} changed: members on distinct nodes no → yes.\n"
    assert Job.objects.get(pk=job).members_on_distinct_nodes is True

    off = alice_qm("update", str(job), "--no-distinct-nodes")
    assert off.code == 0, off.err
    assert Job.objects.get(pk=job).members_on_distinct_nodes is False


def test_slurms_ntasks_per_node_is_refused_with_the_flag_that_says_it(alice_qm, fleet) -> None:
    run = alice_qm("submit", "-G", "8", "--gpus-per-node", "4", "--ntasks-per-node=1", "--", "python", "train.py")

    assert run.code == 2
    assert ("  --ntasks-per-node: give --gpus N, --gpus-per-node M and --distinct-nodes: each member of M GPUs on a "
            "node of its own (without it, members are packed)") in run.err.splitlines(), run.err
    assert not Job.objects.exists()
