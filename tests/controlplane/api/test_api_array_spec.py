"""Job-array specs: ASCII digits only, and each index given once.

Found by hand: `"array": "٣"` (an Arabic-Indic three) made a task with index 3, and
`"0-9999,0-9999"` was refused as more than 10,000 tasks; from 29 Nov overlapping ranges were
counted once, and from 7 Dec an index given twice is refused naming it (`0-3,2`: a range's end
mistyped, or a list that is not what its writer meant; tests/controlplane/api/test_api_text_fields.py)."""

from __future__ import annotations

import pytest

from controlplane.services.jobs import MAX_ARRAY_TASKS, parse_array

pytestmark = pytest.mark.django_db
ARRAYS = "/api/v1/job-arrays/"


@pytest.mark.parametrize("spec", ["٣", "1-٣", "０-3", "1,²"])
def test_an_array_spec_with_digits_other_than_ascii_is_a_400(fleet, alice, spec) -> None:
    r = alice.post(ARRAYS, {"name": "sweep", "gpus": 1, "array": spec}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["array"]


def test_overlapping_ranges_are_refused_naming_the_index_given_twice() -> None:
    with pytest.raises(ValueError, match="^index 0 is given twice: give each index once$"):
        parse_array("0-9999,0-9999")
    with pytest.raises(ValueError, match="^index 2 is given twice, in 1-3 and in 2-4: give each index once$"):
        parse_array("1-3,2-4,3")
    assert parse_array("0-4999,5000-9999") == list(range(MAX_ARRAY_TASKS))
    with pytest.raises(ValueError, match="at most 10000 tasks"):
        parse_array("0-9999,10000")
    with pytest.raises(ValueError, match="at most 10000 tasks"):
        parse_array("0-10000")
