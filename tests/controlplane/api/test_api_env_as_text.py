"""`env` may be given as text, one NAME=value a line (a docker --env-file's, `qm submit --env`'s
words), as well as a mapping: the jobs page's submit form sends its Environment box so, and the
submit and the form's live check read it in one place (api/serializers/fields.env_from_text).
Before, the form had no way to say a job's environment, and a string was refused as "Expected a
dictionary of items"."""

from __future__ import annotations

import pytest

from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def test_env_as_lines_is_stored_as_the_mapping(fleet, alice) -> None:
    text = "WANDB_PROJECT=sweeps\n\n# a comment says nothing\nLR=3e-4\nARGS=--x=1 --y 2 \nEMPTY=\n"
    r = alice.post(J, {"name": "env-text", "gpus": 1, "command": "true", "env": text}, format="json")

    assert r.status_code == 201, r.content
    env = {"WANDB_PROJECT": "sweeps", "LR": "3e-4", "ARGS": "--x=1 --y 2 ", "EMPTY": ""}
    assert r.json()["env"] == env and Job.objects.get().env == env


@pytest.mark.parametrize(("text", "problem"), [
    ("LR=3e-4\nWANDB_PROJECT\n", "line 2 ('WANDB_PROJECT') is not NAME=value: one variable a line, as "
                                 "WANDB_PROJECT=sweeps"),
    ("=x\n", "line 1 ('=x') is not NAME=value: one variable a line, as WANDB_PROJECT=sweeps"),
    ("LR=1\nLR=2\n", "line 2 sets LR again (line 1 set it): one variable a line, as WANDB_PROJECT=sweeps"),
    ("2LR=1\n", "'2LR': variable names are letters, digits and _, not starting with a digit"),
    ("RANK=3\n", "env RANK is set by Quartermaster for each process; choose another name"),
], ids=["no-equals", "no-name", "twice", "bad-name", "reserved-name"])
def test_a_line_that_says_no_variable_is_a_400_naming_env_and_the_line(fleet, alice, text, problem) -> None:
    r = alice.post(J, {"name": "env-text", "gpus": 1, "env": text}, format="json")

    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {"env": [problem]}
    assert not Job.objects.exists() and not f.trail().exists()

