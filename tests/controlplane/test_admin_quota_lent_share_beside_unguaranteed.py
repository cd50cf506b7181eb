"""The note under a lent share says where borrowed GPUs come from, and it holds when part of the
fleet is guaranteed to nobody: borrowers run first on those GPUs, and only the rest is lent by
the teams whose guarantees sit idle (quotas.lent_now, the accounting's rule). Until 7 Dec the
note said "the shares add up to the GPUs borrowed", and on the demo, after language's H100
nominal was lowered to 2, the quota list read language 74 borrowed beside lent shares of ≈13.2
and ≈14.8: the note said they should add up to 74."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.models import Quota
from controlplane.services.quota_text import LENT_SHARE_NOTE
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.test_admin_quota_list_lent import _list

pytestmark = pytest.mark.django_db


def test_lent_shares_below_the_gpus_borrowed_are_said_to_be_so(fleet, browser) -> None:  # type: ignore[no-untyped-def]
    # 32 H100: ml 2, vision 10, audio 10 guaranteed, 10 guaranteed to nobody; ml holds 17.
    Quota.objects.filter(team=fleet.ml).update(nominal_gpus=2)
    Quota.objects.filter(team=fleet.vision).update(nominal_gpus=10)
    f.make_quota(f.make_team("audio", cohort=fleet.ml.cohort, default_priority_class=fleet.research), fleet.h100, 10)
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=17, started_at=now), [(fleet.nodes[0], 8), (fleet.nodes[1], 8), (fleet.nodes[2], 1)],
         now)
    rows = _list(browser)
    assert rows[("ml", "H100-80GB")]["Above nominal (borrowed)"] == "15"
    # 10 of the 15 run on GPUs nobody is guaranteed; the other 5 are lent, half each
    assert [rows[(t, "H100-80GB")]["Lent now"] for t in ("audio", "vision")] == ["≈2.5", "≈2.5"]
    html = browser.get("/admin/controlplane/quota/").content.decode().replace("&#x27;", "'")
    assert LENT_SHARE_NOTE in html
    assert "add up to the GPUs borrowed." not in LENT_SHARE_NOTE
    assert "first on GPUs no team is guaranteed" in LENT_SHARE_NOTE
