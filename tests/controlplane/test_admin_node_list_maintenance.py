"""The admin's node list says which nodes are in maintenance now, or have a window coming.

Found 7 Dec: the list had no such column, so an admin looking at a node there (ready, no
jobs) could not tell it took no work because a window held it, nor that one was about to: the
Nodes page, the API (`maintenance_window`) and the fleet's figures said it, the admin did not.
The column and its filter read the windows by the rule the others use (services/maintenance.py:
`active_at`, and `in_state` for the upcoming ones), and the list stays a fixed number of queries.
"""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.models import MaintenanceWindow
from controlplane.services import maintenance
from frontend import heatmap
from tests.controlplane.fleet_fixture import Fleet

URL = "/admin/controlplane/node/"


def _rows(browser: Client, query: str = "") -> dict[str, str]:
    """Each listed node's name and its maintenance cell, in words."""
    page = browser.get(URL + query)
    assert page.status_code == 200
    html = page.content.decode()
    table = re.search(r'<table id="result_list">(.*?)</table>', html, re.S)
    assert table is not None, html[:2000]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S):
        cells = {field: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", cell)).strip()
                 for field, cell in re.findall(r'<t[hd] class="field-(\w+)[^"]*"[^>]*>(.*?)</t[hd]>', row, re.S)}
        if cells:
            rows[cells["name"]] = cells["maintenance"]
    return rows


def _windows(fleet: Fleet) -> tuple[MaintenanceWindow, MaintenanceWindow]:
    root = fleet.users["admin"]
    now = timezone.now()
    active = maintenance.create(root, nodes=["h100-1"], start_at=now, duration_s=4 * 3600, reason="firmware")
    maintenance.create(root, nodes=["h100-1"], start_at=now + timedelta(days=2), duration_s=3600, reason="later")
    upcoming = maintenance.create(root, nodes=["a100-0"], start_at=(now + timedelta(hours=3)).replace(second=0),
                                  duration_s=90 * 60, reason="rack move")
    cancelled = maintenance.create(root, nodes=["h100-2"], start_at=now + timedelta(hours=1), duration_s=3600,
                                   reason="called off")
    maintenance.cancel(cancelled.pk, root)
    ended = maintenance.create(root, nodes=["h100-3"], start_at=now + timedelta(hours=1), duration_s=3600,
                               reason="done")
    MaintenanceWindow.objects.filter(pk=ended.pk).update(start_at=now - timedelta(hours=3),
                                                         end_at=now - timedelta(hours=1))
    return active, upcoming


def test_the_list_says_the_window_in_force_else_the_next(browser: Client, fleet: Fleet) -> None:
    active, upcoming = _windows(fleet)

    rows = _rows(browser)

    assert rows["h100-1"] == f"in maintenance until {maintenance.when(active.end_at)}: firmware"
    assert rows["a100-0"] == f"from {maintenance.when(upcoming.start_at)} for 1 h 30 min: rack move"
    # cancelled, ended, or none at all: nothing to say
    assert rows["h100-2"] == rows["h100-3"] == rows["h100-0"] == rows["a100-1"] == "-"
    # sorted by it (the column's header): the window in force first, then the next to begin
    assert list(_rows(browser, "?o=8"))[:2] == ["h100-1", "a100-0"]


def test_the_filter_and_the_fleets_figures_read_the_same_rule(browser: Client, fleet: Fleet) -> None:
    _windows(fleet)

    now = set(_rows(browser, "?maintenance=now"))
    assert now == {"h100-1"}
    # the Nodes page's chart and the fragmentation figures (heatmap.fleet_counts) leave out the same
    held = {c.id for c in heatmap.fleet_counts() if c.in_maintenance}
    assert now == {n.name for n in fleet.nodes if n.pk in held}
    assert set(_rows(browser, "?maintenance=upcoming")) == {"a100-0"}
    assert set(_rows(browser, "?maintenance=none")) == {"h100-0", "h100-2", "h100-3", "a100-1"}


def test_the_list_costs_the_same_queries_however_many_windows(browser: Client, fleet: Fleet) -> None:
    root = fleet.users["admin"]
    start = timezone.now() + timedelta(hours=1)
    maintenance.create(root, nodes=["h100-0"], start_at=start, duration_s=3600, reason="one")
    browser.get(URL)
    with CaptureQueriesContext(connection) as few:
        _rows(browser)
    _windows(fleet)
    maintenance.create(root, nodes=["a100-1"], start_at=start, duration_s=3600, reason="two")
    with CaptureQueriesContext(connection) as more:
        rows = _rows(browser)
    assert sum(cell != "-" for cell in rows.values()) == 4
    assert len(more) == len(few)
