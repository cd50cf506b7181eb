"""`qm maint list --all` asked the API for one page of windows (at most 1,000) and printed it as the
whole list: a fleet with years of maintenance behind it lost its latest windows from the table,
without a word. It now reads every page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import MaintenanceWindow

pytestmark = pytest.mark.slow


def test_maint_list_all_lists_every_window_past_the_apis_page(qm, fleet) -> None:  # noqa: ANN001
    now = timezone.now()
    windows = MaintenanceWindow.objects.bulk_create([
        MaintenanceWindow(start_at=now - timedelta(days=2000 - i), end_at=now - timedelta(days=2000 - i, hours=-1),
                          reason=f"monthly firmware {i}", created_at=now - timedelta(days=2001 - i))
        for i in range(1005)])
    MaintenanceWindow.nodes.through.objects.bulk_create(
        [MaintenanceWindow.nodes.through(maintenancewindow_id=w.pk, node_id=fleet.nodes[1].pk) for w in windows])
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    table = qm("maint", "list", "--all")
    as_json = qm("maint", "list", "--all", "--json")

    assert table.code == 0, table.err
    ids = [int(line.split()[0]) for line in table.out.splitlines()[1:] if line.split()[0].isdigit()]
    assert sorted(ids) == sorted(w.pk for w in windows), f"{len(ids)} of 1005 windows listed"
    assert len(as_json.json()["results"]) == 1005
