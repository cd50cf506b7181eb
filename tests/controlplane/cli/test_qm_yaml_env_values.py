"""A job file's environment values are text. YAML reads `DEBUG: yes` as a boolean and
`VERSION: 1.10` as the number 1.1: `qm submit` said only "env.DEBUG: Not a valid string." (the
API's words), then from 5 Dec named what YAML read and said to quote the value; since 7 Dec the
file's text fields are read as written (tests/controlplane/cli/test_qm_yaml_text_as_written.py),
so an unquoted value passes as written, and only a value left empty is refused with the fix."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_unquoted_yaml_env_values_pass_as_written(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: env\ngpus: 1\nenv:\n  DEBUG: yes\n  VERSION: 1.10\n  NAME: ok\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 0, r.err
    assert Job.objects.get(name="env").env == {"DEBUG": "yes", "VERSION": "1.10", "NAME": "ok"}


def test_an_empty_env_value_is_refused_with_the_fix(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: env\ngpus: 1\nenv:\n  DEBUG:\n")

    r = alice_qm("submit", str(spec))

    assert r.code != 0
    assert 'env.DEBUG has no value: give one (DEBUG: "" for an empty one)' in r.err
    assert "Traceback" not in r.err and not Job.objects.exists()


def test_quoted_env_values_pass_as_written(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: env\ngpus: 1\nenv:\n  DEBUG: 'yes'\n  VERSION: '1.10'\n")

    assert alice_qm("submit", str(spec)).code == 0
    assert Job.objects.get(name="env").env == {"DEBUG": "yes", "VERSION": "1.10"}
