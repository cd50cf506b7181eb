"""What a quota "lends now" (quotas.lent_now: the API's `lent_gpus`, the admin's quota list and
the teams page) is what the engine charges to the lenders: scheduler_core's QuotaLedger admits a
team's GPUs above its nominal only against what its cohort's other teams lend (their unused
nominal), whatever the fleet holds beyond the guarantees, down or cordoned nodes included.

Until 7 Dec the figure took every GPU of the fleet not retired beyond the guarantees for
capacity nobody is guaranteed, borrowed first: on the demo a team borrowed 30 H100 GPUs while
the page said no team lent any, with only 88 H100s in service, and the engine had charged all
30 to the lenders (they could lend 30 fewer)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Node, Quota
from controlplane.services import quotas
from scheduler_core.quota import QuotaLedger
from scheduler_core.types import QuotaInfo
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db


def _engine_ledger() -> QuotaLedger:
    """The engine's own quota ledger over the quotas and what runs now, as the cycle builds it."""
    ledger = QuotaLedger(QuotaInfo(team=str(t), gpu_type=str(g), nominal_gpus=n, borrowing_limit=b,
                                   lending_limit=lend, cohort=str(c) if c is not None else None)
                         for t, g, n, b, lend, c in Quota.objects.values_list(
                             "team_id", "gpu_type_id", "nominal_gpus", "borrowing_limit", "lending_limit",
                             "team__cohort_id"))
    for (team, gpu_type), n in quotas.held_now().items():
        ledger.charge(str(team), str(gpu_type), n)
    return ledger


def test_gpus_borrowed_are_lent_by_the_cohort_with_nodes_down_and_cordoned(fleet) -> None:
    # 32 H100 in the fleet, 16 in service (one node down, one cordoned); ml nominal 2, vision 16:
    # 14 GPUs beyond the guarantees, which the old figure took for unguaranteed capacity.
    Quota.objects.filter(team=fleet.ml).update(nominal_gpus=2)
    Node.objects.filter(pk=fleet.nodes[2].pk).update(state=NodeState.DOWN)
    Node.objects.filter(pk=fleet.nodes[3].pk).update(state=NodeState.CORDONED)
    now = timezone.now()
    for node in fleet.nodes[0:2]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)

    ledger = _engine_ledger()
    cohort = (str(fleet.ml.cohort_id), str(fleet.h100.pk))
    # The engine: ml's 14 above nominal take 14 of vision's 16 lendable; ml may borrow 2 more.
    assert ledger.cohort_borrowed[cohort] == 14
    assert ledger.check(str(fleet.ml.pk), str(fleet.h100.pk), 2).admitted
    assert not ledger.check(str(fleet.ml.pk), str(fleet.h100.pk), 3).admitted

    lent = quotas.lent_now()
    assert lent[(fleet.vision.pk, fleet.h100.pk)] == 14.0
    assert lent[(fleet.ml.pk, fleet.h100.pk)] == 0.0
    figures = {q["team"]: q["lent_gpus"] for q in client_for(fleet, "admin").get("/api/v1/quotas/").json()["results"]}
    assert figures == {"ml": 0.0, "vision": 14.0}


def test_the_lent_shares_add_up_to_what_the_engine_charges_the_lenders_beyond_the_guarantees(fleet) -> None:
    # Every node in service, 32 GPUs for guarantees of 2 + 10 + 10: ml's 15 above nominal are
    # charged by the engine to vision's and audio's unused nominal, 7.5 each in the split.
    from tests.controlplane import factories as f
    Quota.objects.filter(team=fleet.ml).update(nominal_gpus=2)
    Quota.objects.filter(team=fleet.vision).update(nominal_gpus=10)
    f.make_quota(f.make_team("audio", cohort=fleet.ml.cohort, default_priority_class=fleet.research), fleet.h100, 10)
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=17, started_at=now), [(fleet.nodes[0], 8), (fleet.nodes[1], 8), (fleet.nodes[2], 1)],
         now)

    ledger = _engine_ledger()
    lent = quotas.lent_now()
    assert sum(lent.values()) == ledger.cohort_borrowed[(str(fleet.ml.cohort_id), str(fleet.h100.pk))] == 15
    assert {t: lent[(tid, fleet.h100.pk)] for t, tid in (("vision", fleet.vision.pk), ("ml", fleet.ml.pk))} == \
        {"vision": 7.5, "ml": 0.0}
