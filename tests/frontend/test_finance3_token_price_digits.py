"""Finance QA, round 3 (2 Dec): the showback page's "$ / 1M tokens" went through the money
filter, which gives cents from a cent up and six places below: on the demo one column read
$0.05 (for $0.0542) beside $0.003634, and TOTAL's $0.03 (for $0.0255) hid the digits its rows
showed. A unit price now reads to four significant digits, in fixed-point, every row alike.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from frontend.templatetags.qm import usd_unit_price
from tests.frontend.test_finance2_job_csv_names import run_mixed_project

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("value", "text"), [
    (0.0542, "$0.05420"), (0.003634, "$0.003634"), (0.025457, "$0.02546"), (0.0000012, "$0.000001200"),
    (12.345, "$12.35"), (627.759, "$627.76"), (1234.5, "$1,234.50"), (0, "$0.00"), (None, "–"),
])
def test_a_unit_price_has_four_significant_digits_never_scientific(value: float | None, text: str) -> None:
    assert usd_unit_price(value) == text


def test_the_page_shows_each_token_price_to_four_digits(client_for: Any, submit_as: Any) -> None:
    run_mixed_project(submit_as)
    response = client_for("finn").get("/showback/?window=24h&group_by=project")
    html = response.content.decode()
    rows = {r["name"]: r for r in response.context["rows"]}
    price = rows["language/llm-pretrain"]["usd_per_million_tokens"]
    assert price is not None  # $5.556: $40 of GPU time over 7.2M tokens
    # the name is held whole (a nobr span: it has a hyphen)
    cells = re.search(r'<th scope="row">(?:<span class="nobr">)?language/llm-pretrain(?:</span>)?</th>(.*?)</tr>', html, re.S)
    assert cells, html[:500]
    assert f"<td>{usd_unit_price(price)}</td>" in cells.group(1)
    assert usd_unit_price(price) == "$5.556"  # the money filter said $5.56
