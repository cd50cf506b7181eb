"""`qm quotas` asked the API for one page of quotas (at most 1,000) and printed it as the whole
list: an admin or finance account of an organisation with 500 teams and two GPU types lost the
last teams' quotas from the table without a word. It now reads every page."""

from __future__ import annotations

import pytest

from controlplane.models import Quota, Team

pytestmark = pytest.mark.slow


def test_qm_quotas_lists_every_quota_past_the_apis_page(qm, fleet) -> None:  # noqa: ANN001
    teams = Team.objects.bulk_create([Team(name=f"team-{i:03d}") for i in range(500)])
    Quota.objects.bulk_create([Quota(team=team, gpu_type=gpu_type, nominal_gpus=8)
                               for team in teams for gpu_type in (fleet.h100, fleet.a100)])
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    table = qm("quotas")
    as_json = qm("quotas", "--json").json()

    assert table.code == 0, table.err
    rows = [line for line in table.out.splitlines()[1:] if line.startswith("team-")]
    assert len(rows) == 1000 and rows[-1].startswith("team-499"), f"{len(rows)} of 1000 quotas of team-NNN listed"
    assert as_json["count"] == 1002 and len(as_json["results"]) == 1002
