"""A job file that is not valid YAML: `qm submit` printed the parser's first line only, "job.yaml
is not valid YAML: while parsing a flow sequence", neither where in the file nor what was wrong.
It now says the line and column and the problem (and where the construct left open began)."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("text", "said"), [
    ("name: x\ngpus: [1\n", "line 3, column 1: expected ',' or ']', but got '<stream end>' (a flow sequence from "
                            "line 2, column 7)"),
    ("name: x\n  gpus: 1\n", "line 2, column 7: mapping values are not allowed here"),
    ('name: "x\ngpus: 1\n', "line 3, column 1: found unexpected end of stream (a quoted scalar from line 1, column 7)"),
])
def test_a_yaml_error_names_the_line_column_and_problem(alice_qm, tmp_path, text, said) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(text)

    r = alice_qm("submit", str(spec))

    assert r.code == 2 and r.out == "", r.out
    assert r.err == f"error: {spec} is not valid YAML: {said}\n"
    assert not Job.objects.exists()
