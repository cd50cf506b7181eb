"""The priority-class list says what each class does when it comes to preemption, in words and
units: before, it showed a bare "preemption budget 3" with no window and no minimum runtime, so
an admin could not read what protects a running job."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _cells(html: str, name: str) -> list[str]:
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        if f">{name}</a>" in row:
            return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    raise AssertionError(f"no row for {name}")


def test_the_priority_class_list_reads_budget_window_minimum_runtime_and_limits(fleet, browser) -> None:
    f.make_priority_class("nightly", 50, preemption_budget=1, budget_window_s=7 * 86400, min_runtime_s=900,
                          grace_period_s=90, default_runtime_limit_s=2 * 3600, max_runtime_limit_s=2 * 86400)
    html = browser.get("/admin/controlplane/priorityclass/").content.decode()
    assert _cells(html, "nightly")[-4:] == ["90 s", "15 min", "1 preemption per job per 7 d", "2 h / 2 d"]


def test_a_class_not_preemptible_says_so_beside_the_budget_its_reclaims_keep(fleet, browser) -> None:
    # Not preemptible by priority, but its borrowed GPUs are reclaimed within its budget: until
    # 6 Dec the cell read "not preemptible" and hid it (test_priority_class_budget_of_zero.py).
    f.make_priority_class("critical", 5000, preemptible=False, preemption_budget=3)
    html = browser.get("/admin/controlplane/priorityclass/").content.decode()
    assert _cells(html, "critical")[-2] == "not by priority; of borrowed GPUs, 3 preemptions per job per 1 d"


def _save_value(browser, pc, value: int):  # type: ignore[no-untyped-def]
    path = f"/admin/controlplane/priorityclass/{pc.pk}/change/"
    form = f.opened_admin_form(browser, path)
    form["value"] = value
    r = browser.post(path, form, follow=True)
    assert r.status_code == 200 and r.redirect_chain, r.content[:2000]
    return [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]


def test_a_value_shared_with_another_class_is_saved_with_a_warning(fleet, browser) -> None:
    """Two classes with one value are peers: neither preempts the other, nor goes first in the
    queue. Allowed (Kubernetes and Slurm allow it), and said when it is saved (6 Dec: nothing
    was said; tests/controlplane/api/test_priority_class_shared_value.py)."""
    [warning] = _save_value(browser, fleet.research, 1000)

    assert warning.startswith("Priority class research has the same value (1000) as production: no job of either "
                              "preempts another's for priority")
    fleet.research.refresh_from_db()
    assert fleet.research.value == 1000


def test_a_value_of_its_own_saves_without_a_warning(fleet, browser) -> None:
    assert _save_value(browser, fleet.research, 999) == []
