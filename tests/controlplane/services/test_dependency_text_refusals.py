"""Slurm's dependency text with a slip in it gets a sentence about that slip: `afterok:0` (and
`afterok:-3`) said "'0' is not a job id (a number) ..." (0 is a number: job ids start at 1), `afterok:1,,` said
"'' is not TYPE:JOB[:JOB...]" and `afterok:1:` "'' is not a job id" (an empty quote, no hint
where). The same parser reads `qm -d`, the API's text and the jobs page's field."""

from __future__ import annotations

import pytest

from controlplane.services import dependency_text


def _refusal(text: str) -> str:
    with pytest.raises(dependency_text.BadDependencyText) as refused:
        dependency_text.parse(text)
    return str(refused.value)


@pytest.mark.parametrize("text", ["afterok:0", "afterok:12:000", "afterany:0?afterok:3", "afterok:-3", "afterok:1:-2"])
def test_job_id_zero_or_negative_says_ids_start_at_one(text) -> None:
    assert _refusal(text).endswith("is not a job id: job ids start at 1")


@pytest.mark.parametrize(("text", "joiner"), [
    ("afterok:1,,afterok:2", ","), ("afterok:1,", ","), (",afterok:1", ","), ("afterok:1??afterok:2", "?"),
])
def test_an_empty_dependency_between_separators_says_so(text, joiner) -> None:
    assert _refusal(text) == (f"an empty dependency: a '{joiner}' at an end or two together; write "
                              f"afterok:12{joiner}afterany:13")


@pytest.mark.parametrize("text", ["afterok:1:", "afterok::1", "afterany:4::5"])
def test_an_empty_job_id_says_where(text) -> None:
    kind = text.split(":")[0]
    assert _refusal(text) == f"'{text}' has an empty job id: a ':' at the end or two together; write {kind}:12:13"


def test_the_other_refusals_and_good_text_are_unchanged() -> None:
    assert _refusal("afterok:3-") == "'3-' is not a job id (a number) or a job array's id"
    assert _refusal("afterok") == "'afterok' names no job; write afterok:JOB (e.g. afterok:12)"
    assert dependency_text.parse("afterok:12:13,afterany:14") == [
        {"job": 12, "condition": "afterok"}, {"job": 13, "condition": "afterok"},
        {"job": 14, "condition": "afterany"}]
