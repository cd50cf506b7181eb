"""Finance QA, round 3 (2 Dec): an empty parameter was read as left out. `?month=` (a script's
unset variable) answered 200 with the default seven days, `?group_by=` the team grouping, and
the utilization API's `?team=` the whole fleet's figures instead of a team's. Each is now a 400
naming the parameter, as a misspelt one is.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

SHOWBACK = "/api/v1/showback/"
UTILIZATION = "/api/v1/metrics/utilization/"


@pytest.mark.parametrize(("path", "params", "field"), [
    (SHOWBACK, {"month": ""}, "month"),
    (SHOWBACK, {"window": ""}, "window"),
    (SHOWBACK, {"window": "  "}, "window"),
    (SHOWBACK, {"group_by": "", "window": "1d"}, "group_by"),
    (SHOWBACK, {"window": "1d", "format": ""}, "format"),
    (UTILIZATION, {"team": ""}, "team"),
    (UTILIZATION, {"window": "1h", "bucket": ""}, "bucket"),
])
def test_an_empty_parameter_is_a_400_naming_it(clients: dict[str, APIClient], path: str, params: dict[str, str],
                                               field: str) -> None:
    response = clients["finance"].get(path, params)

    assert response.status_code == 400, response.content[:300]
    assert field in response.json()["errors"], response.json()


def test_left_out_parameters_still_take_their_defaults(clients: dict[str, APIClient]) -> None:
    assert clients["finance"].get(SHOWBACK).json()["requestedWindow"] == "7d"
    assert clients["finance"].get(UTILIZATION).status_code == 200
