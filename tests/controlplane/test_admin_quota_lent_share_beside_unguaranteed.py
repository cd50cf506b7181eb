"""The note under a lent share says where borrowed GPUs come from, and it holds when part of the
fleet is guaranteed to nobody: the engine admits borrowing only against what the cohort's teams
lend (scheduler_core's QuotaLedger), so the GPUs beyond the guarantees lend nothing and the
shares add up to the GPUs borrowed (quotas.lent_now, usage_tiers.idle_guarantees).

Until 7 Dec the note said "the shares add up to the GPUs borrowed" while the figure let
borrowers run first on GPUs no team is guaranteed (≈13.2 and ≈14.8 beside 74 borrowed on the
demo); on 7 Dec the note was changed to say so, and later that day the figure was made to follow
the engine, which charged all 74 to the lenders (tests/controlplane/
test_quota_lent_follows_the_engine.py)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.models import Quota
from controlplane.services.quota_text import LENT_SHARE_NOTE
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.test_admin_quota_list_lent import _list

pytestmark = pytest.mark.django_db


def test_lent_shares_add_up_to_the_gpus_borrowed_beside_gpus_nobody_is_guaranteed(fleet, browser) -> None:  # type: ignore[no-untyped-def]
    # 32 H100: ml 2, vision 10, audio 10 guaranteed, 10 guaranteed to nobody; ml holds 17.
    Quota.objects.filter(team=fleet.ml).update(nominal_gpus=2)
    Quota.objects.filter(team=fleet.vision).update(nominal_gpus=10)
    f.make_quota(f.make_team("audio", cohort=fleet.ml.cohort, default_priority_class=fleet.research), fleet.h100, 10)
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=17, started_at=now), [(fleet.nodes[0], 8), (fleet.nodes[1], 8), (fleet.nodes[2], 1)],
         now)
    rows = _list(browser)
    assert rows[("ml", "H100-80GB")]["Above nominal (borrowed)"] == "15"
    # The engine charges all 15 to the unused guarantees of audio and vision (10 lendable each):
    # half each, though 10 of the fleet's GPUs are guaranteed to nobody.
    assert [rows[(t, "H100-80GB")]["Lent now"] for t in ("audio", "vision")] == ["≈7.5", "≈7.5"]
    html = browser.get("/admin/controlplane/quota/").content.decode().replace("&#x27;", "'")
    assert LENT_SHARE_NOTE in html
    assert "add up to the GPUs the cohort's teams borrow." in LENT_SHARE_NOTE
    assert "no team is guaranteed" not in LENT_SHARE_NOTE
