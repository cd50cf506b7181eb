"""In Chromium, on the Nodes page and on a node's page: a maintenance window's node names, its
times and the running jobs it affects break only between whole parts, at 1,366 px and on a
phone. Found walking the demo as an operator (7 Dec): at 1,366 px a window on h100-01 and h100-02
read "h100-01, h100-" / "02" in its Nodes column, its times "2026-12-07 14:27:00" / "UTC" and
its state "in 59" / "min"; the jobs it affects name their nodes and the end of their limit the
same way."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import AllocationGpu
from controlplane.services import maintenance
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_times_and_nodes_break_whole_browser import LINES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _inside_a_part(lines: list[str]) -> list[str]:
    """The lines that end inside a node's name or a date (at a hyphen) or a clock (at a colon)."""
    return [line for line in lines[:-1] if line.endswith(("-", ":"))]


def _inside_a_span(lines: list[str]) -> list[str]:
    """The lines that end with a number whose unit starts the next ("in 59" / "min")."""
    return [line for line in lines[:-1] if line[-1:].isdigit()]


@pytest.mark.parametrize("width", [1366, 400])
def test_a_windows_nodes_times_and_jobs_break_whole(session: Any, width: int) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="finetune", gpus=16, gpus_per_node=8, runtime_limit_s=8 * 3600)).job
    run_cycle("test", now=timezone.now())
    held = sorted(set(AllocationGpu.objects.filter(allocation__job=job, live=True).values_list("node__name", flat=True)))
    assert len(held) == 2
    maintenance.create(user("admin"), nodes=held, start_at=timezone.now() + timedelta(hours=1),
                       duration_s=4 * 3600, reason="firmware upgrade")
    tab = session("admin")
    tab.page.set_viewport_size({"width": width, "height": 900})

    for path, cells in (("/nodes/", ".window-nodes, .window-affected"), (f"/nodes/{held[1]}/", ".window-affected")):
        tab.open(path)
        row = "table.maintenance-windows tbody tr"
        seen = {
            "cells": tab.page.evaluate(LINES, f"{row} :is({cells})"),
            "times": tab.page.evaluate(LINES, f"{row} td.window-time"),
            "state": tab.page.evaluate(LINES, f"{row} td.window-state small"),
        }
        tab.screenshot(f"maintenance-windows-{width}-{path.strip('/').replace('/', '-')}")
        assert len(seen["times"]) == 2 and len(seen["state"]) == 1, seen
        assert any(held[1] in "".join(lines) for lines in seen["cells"]), seen
        assert not [lines for lines in seen["cells"] + seen["times"] if _inside_a_part(lines)], (path, seen)
        assert not [lines for lines in seen["state"] if _inside_a_span(lines)], (path, seen)
    assert tab.errors == []
