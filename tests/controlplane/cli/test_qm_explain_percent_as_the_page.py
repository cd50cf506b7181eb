"""A percentage says the same on the job page and in `qm explain`: at most two decimals, trailing
zeros dropped (`services/percent_text.percent`, the one home of the rule). The page said
"100.0%" and "17.14%", `qm explain` "100%" and "17%" of the same ETA record (demo walk, 5 Dec)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.services.percent_text import percent
from tests.controlplane import factories as f
from tests.controlplane.cli.test_qm_explain_likely_start import _started

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("fraction, text", [
    (1, "100%"), (0.1714, "17.14%"), (0.17142857, "17.14%"), (0.5, "50%"), (0.05, "5%"), (0.0047, "0.47%"),
    (0.105, "10.5%"), (0, "0%"), (0.00001, "< 0.01%"), (1.5, "150%"),
])
def test_the_rule(fraction: float, text: str) -> None:
    assert percent(fraction) == text


def test_explain_and_the_job_page_say_the_eta_records_percentages_alike(alice_qm, fleet) -> None:
    _started(fleet.ml, shares=[0.05] * 30, gpus=1)
    _started(fleet.ml, shares=[0.25] * 10 + [0.5, 0.5] + [1.25] * 10, gpus=16)
    waiting = f.make_job(fleet.ml, gpus=16, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=4))
    explained = alice_qm("explain", str(waiting.pk)).out
    # 42 of 52 on time, 12 of the 22 of its size
    assert re.search(r"last 7 days, 80\.77% started by the first one told, the median one after 5% of the wait told; "
                     r"of them, 22 jobs of 8\+ GPUs, as this one: 54\.55% by it, the median one after 50%$",
                     explained, re.M), explained
    page = Client()
    page.force_login(fleet.users["owner"])
    html = page.get(f"/jobs/{waiting.pk}/").content.decode()
    assert "80.77% started by the first ETA they were told, the median one after 5% of the wait it was told" in html
    assert "as this one: 54.55% started by their first ETA, the median one after 50% of the wait it was told" in html
