"""A job file's keys qm does not know are named before anything else: `gpu: 2` answered "a job
needs --gpus", qm's own check of a field left out, while the typo beside it went unsaid (the API
would have named it, had qm sent the file). Each unknown key is named, with the field meant
when one is close."""

from __future__ import annotations

import pytest

from controlplane.api.serializers.job_requests import JobArraySubmitSerializer
from controlplane.cli.client import CliError
from controlplane.cli.jobs.spec_files import JOB_FIELDS, load_spec_file
from controlplane.models import Job


@pytest.mark.slow
def test_a_misspelled_key_is_named_before_the_field_it_leaves_out(alice_qm) -> None:
    r = alice_qm("submit", "-", stdin="name: x\ngpu: 2\ncommand: y\n")

    assert r.code == 2 and r.out == ""
    assert "gpu: unknown field; did you mean gpus?" in r.err
    assert "needs --gpus" not in r.err
    assert not Job.objects.exists()


@pytest.mark.slow
def test_every_unknown_key_is_named_and_one_unlike_any_lists_the_fields(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ngpus: 1\nprority: high\nzzz: 1\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 2
    assert "prority: unknown field; did you mean priority?" in r.err
    assert "zzz: unknown field; the job fields are" in r.err and "gpus_per_node" in r.err
    assert str(spec) in r.err
    assert not Job.objects.exists()


@pytest.mark.slow
def test_the_flags_spellings_and_dashes_are_known(alice_qm, fleet) -> None:
    r = alice_qm("submit", "-", stdin="name: x\ngpus: 1\ntime: 30\npriority: research\ngpus-per-node: 1\n")

    assert r.code == 0, r.err


def test_the_fields_qm_knows_are_the_apis_submit_fields() -> None:
    writable = {name for name, field in JobArraySubmitSerializer().fields.items() if not field.read_only}

    assert writable == set(JOB_FIELDS)


def _refusal(tmp_path, text: str) -> str:
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    with pytest.raises(CliError) as refused:
        load_spec_file(str(spec))
    return str(refused.value)


@pytest.mark.parametrize("key", ["distinct_nodes", "distinct-nodes", "on_distinct_nodes"])
def test_a_key_of_two_words_or_more_in_one_fields_name_suggests_that_field(tmp_path, key: str) -> None:
    """Found by QA (7 Dec): `distinct_nodes:` was refused with the whole list of fields, its
    likeness to members_on_distinct_nodes just under difflib's cutoff."""
    said = _refusal(tmp_path, f"name: x\ngpus: 2\n{key}: true\n")

    assert f"{key}: unknown field; did you mean members_on_distinct_nodes?" in said


def test_a_json_job_file_gets_the_suggestion_too(tmp_path) -> None:
    said = _refusal(tmp_path, '{"name": "x", "gpus": 2, "distinct_nodes": true}')

    assert "distinct_nodes: unknown field; did you mean members_on_distinct_nodes?" in said


@pytest.mark.parametrize("key", ["nodes", "limit", "memory", "per_gpu", "distinct", "node_count"])
def test_a_single_word_or_a_part_of_several_fields_suggests_nothing(tmp_path, key: str) -> None:
    """`nodes:` (Slurm's node count) is no members_on_distinct_nodes, and `per_gpu:` is as much
    cpus_per_gpu as memory_gb_per_gpu: the fields are listed, no one guessed."""
    said = _refusal(tmp_path, f"name: x\ngpus: 2\n{key}: 1\n")

    assert f"{key}: unknown field; the job fields are" in said and "did you mean" not in said
