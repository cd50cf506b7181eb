"""The teams page says a team's "lent" that is no whole GPU as `qm quotas` says it: marked `≈`,
with a note that it is a share (quota_text.lent_said and LENT_SHARE_NOTE, one rule for both).
GPUs are lent whole, but not by one team: the GPUs a team borrows run on the idle guarantees of
every lending team of its cohort together, and the accounting splits them in proportion to what
each may lend. Until 2 Dec the page read "4.6 lent", as if 4.6 GPUs were lent."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.models import Node, Team
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _quota_cells(html: str) -> dict[str, str]:
    """Each team's quota cell, as text."""
    body = re.search(r'<table class="teams">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body, html[:2000]
    cells = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
        tds = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", td)).strip() for td in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
        cells[tds[0]] = tds[3]
    return cells


def _vision_holds(gpus_per_node: list[int]) -> None:
    now = timezone.now()
    nodes = list(Node.objects.filter(name__startswith="h100").order_by("name"))
    job = running_job(Team.objects.get(name="vision"), gpus=sum(gpus_per_node), started_at=now)
    hold(job, [(node, n) for node, n in zip(nodes, gpus_per_node, strict=False) if n], now)


def test_a_lent_share_is_marked_and_said_to_be_one(client_for) -> None:
    # 96 H100s, all guaranteed (vision 40, language 32, serving 24): vision's 8 above its 40 are
    # lent by language and serving together, 8 × 32/56 and 8 × 24/56
    _vision_holds([8, 8, 8, 8, 8, 8])
    html = client_for("admin").get("/teams/").content.decode()
    cells = _quota_cells(html)
    assert "H100-80GB: 32 / 48 — uses 0, ≈4.6 lent" in cells["language"], cells
    assert "H100-80GB: 24 / 8 — uses 0, ≈3.4 lent" in cells["serving"], cells
    assert "uses 48, 8 borrowed" in cells["vision"] and "lent" not in cells["vision"].split("A100")[0]
    note = re.search(r'<p class="note" id="lent-share-note">(.*?)</p>', html, re.S)
    assert note and "≈: a share, not a count of GPUs" in note.group(1)
    assert "in proportion to what each may lend" in note.group(1)


def test_whole_gpus_lent_are_said_without_a_mark_or_note(client_for) -> None:
    # 56 borrowed: all of language's 32 and serving's 24, whole
    _vision_holds([8] * 12)
    html = client_for("admin").get("/teams/").content.decode()
    cells = _quota_cells(html)
    assert "32 lent" in cells["language"] and "24 lent" in cells["serving"]
    assert "≈" not in html and 'id="lent-share-note"' not in html
