"""A job file's environment values are text; YAML reads `DEBUG: yes` as a boolean and
`VERSION: 1.10` as the number 1.1. `qm submit` said only "env.DEBUG: Not a valid string." (the
API's words); it now names what YAML read and says to quote the value, and submits nothing."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_unquoted_yaml_env_values_are_refused_with_the_fix(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: env\ngpus: 1\nenv:\n  DEBUG: yes\n  VERSION: 1.10\n  NAME: ok\n")

    r = alice_qm("submit", str(spec))

    assert r.code != 0
    assert "env.DEBUG: YAML read it as the boolean true; env.VERSION: YAML read it as the number 1.1" in r.err
    assert 'quote them in the file (DEBUG: "...")' in r.err
    assert "Traceback" not in r.err and not Job.objects.exists()


def test_quoted_env_values_pass_as_written(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: env\ngpus: 1\nenv:\n  DEBUG: 'yes'\n  VERSION: '1.10'\n")

    assert alice_qm("submit", str(spec)).code == 0
    assert Job.objects.get(name="env").env == {"DEBUG": "yes", "VERSION": "1.10"}
