"""Job-array specs: ASCII digits only, and overlapping ranges counted once.

Found by hand: `"array": "٣"` (an Arabic-Indic three) made a task with index 3, and
`"0-9999,0-9999"` (10,000 distinct tasks) was refused as more than 10,000."""

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


def test_overlapping_ranges_count_their_tasks_once() -> None:
    assert parse_array("0-9999,0-9999") == list(range(MAX_ARRAY_TASKS))
    assert parse_array("1-3,2-4,3") == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="at most 10000 tasks"):
        parse_array("0-9999,10000")
    with pytest.raises(ValueError, match="at most 10000 tasks"):
        parse_array("0-10000")
