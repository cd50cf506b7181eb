"""The admin's team and node pages never write what the control loop and the agents own.

Found in headless Chromium on /admin/controlplane/team/<id>/change/: "Decayed gpu seconds",
"Decayed cpu seconds", "Decayed memory gb seconds" and "Usage as of" were editable inputs. The
scheduling loop folds them forward every cycle, so saving the page for anything (a description,
a quota in its inline) wrote back the values shown when the page was opened, throwing away every
cycle's usage since — and an admin could type any number, negative included, and move the
team's fair share at will, leaving no audit event.

The node page likewise saved the whole row: a heartbeat, a lease renewal or a state change
(suspect, cordoned) committed while an admin's save ran was overwritten with the values read at
its start.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.signals import pre_save
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Node, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

USAGE_FIELDS = ("decayed_gpu_seconds", "decayed_cpu_seconds", "decayed_memory_gb_seconds", "usage_as_of")


def test_the_team_page_shows_the_decayed_usage_without_an_input_for_it(fleet, browser) -> None:
    page = browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/change/")

    assert page.status_code == 200
    form = page.context["adminform"].form
    assert not set(USAGE_FIELDS) & set(form.fields)
    html = page.content.decode()
    assert 'name="decayed_gpu_seconds"' not in html
    assert "Fair-share usage (decayed)" in html  # still shown, read-only


def test_saving_the_team_page_keeps_the_usage_the_loop_folded_in_meanwhile(fleet, browser) -> None:
    path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    opened_at = timezone.now()
    Team.objects.filter(pk=fleet.ml.pk).update(decayed_gpu_seconds=100.0, usage_as_of=opened_at)
    page = browser.get(path)
    form = {k: v for k, v in f.admin_change_form(page).items() if v is not False}
    # What the page would have sent back before (its inputs), and a hand-typed value.
    form.update({"description": "vision research", "decayed_gpu_seconds": "-1000000000",
                 "decayed_cpu_seconds": "0", "decayed_memory_gb_seconds": "0",
                 "usage_as_of_0": opened_at.strftime("%Y-%m-%d"), "usage_as_of_1": opened_at.strftime("%H:%M:%S")})
    # Meanwhile a cycle folds in what ran.
    folded_at = opened_at + timedelta(seconds=2)
    Team.objects.filter(pk=fleet.ml.pk).update(decayed_gpu_seconds=5000.0, decayed_cpu_seconds=7.0,
                                              usage_as_of=folded_at)

    r = browser.post(path, form)

    assert r.status_code == 302, r.context["errors"] if r.context else r.content[:500]
    team = Team.objects.get(pk=fleet.ml.pk)
    assert team.description == "vision research"
    assert (team.decayed_gpu_seconds, team.decayed_cpu_seconds, team.usage_as_of) == (5000.0, 7.0, folded_at)


def test_saving_a_node_page_keeps_the_state_and_lease_written_while_it_ran(fleet, browser) -> None:
    node = fleet.nodes[1]
    path = f"/admin/controlplane/node/{node.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form["leaf_switch"] = "leaf-z"
    renewed = timezone.now() + timedelta(seconds=20)

    def meanwhile(sender, instance, **kwargs):  # type: ignore[no-untyped-def]
        # After the admin read the row, before it writes: the loop and the agent commit.
        pre_save.disconnect(meanwhile, sender=Node)
        Node.objects.filter(pk=node.pk).update(state=NodeState.SUSPECT, agent_lease_expires_at=renewed,
                                              last_heartbeat_at=renewed - timedelta(seconds=20))

    pre_save.connect(meanwhile, sender=Node)
    try:
        r = browser.post(path, form)
    finally:
        pre_save.disconnect(meanwhile, sender=Node)

    assert r.status_code == 302, r.context["errors"] if r.context else r.content[:500]
    stored = Node.objects.get(pk=node.pk)
    assert stored.leaf_switch == "leaf-z"
    assert (stored.state, stored.agent_lease_expires_at) == (NodeState.SUSPECT, renewed)


def test_the_team_page_reads_fair_share_usage_in_hours_with_its_half_life(fleet, browser) -> None:
    """Before: "Decayed gpu seconds: 11997.86134982022", a raw float with no unit an admin reads."""
    Team.objects.filter(pk=fleet.ml.pk).update(decayed_gpu_seconds=12_600.0, decayed_cpu_seconds=360.0,
                                               decayed_memory_gb_seconds=0.0)
    html = browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/change/").content.decode()
    assert "3.5 GPU-hours, 0.1 CPU-hours, 0.0 GB-hours of memory; past use counts half after 7 days" in html
    assert "12600" not in html
