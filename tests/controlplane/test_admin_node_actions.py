"""The admin's node list actions (cordon, drain, uncordon) say what they did.

Found in headless Chromium on /admin/controlplane/node/: selecting two nodes and running
"Cordon" cordoned them (two node.state events) but the page came back with no message at all,
the same as when nothing happened; only a refusal was said.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Node

pytestmark = pytest.mark.django_db


def _act(browser: Any, action: str, selected: list[Node], reason: str | None = None) -> dict[str, list[str]]:
    r = browser.post("/admin/controlplane/node/", {
        "action": action, "_selected_action": [n.pk for n in selected], "index": 0,
        **({"reason": reason} if reason is not None else {}),
    }, follow=True)
    assert r.status_code == 200
    said: dict[str, list[str]] = {}
    for m in get_messages(r.wsgi_request):
        said.setdefault(m.level_tag, []).append(str(m))
    return said


def test_cordon_says_which_nodes_moved_and_from_where(fleet, browser) -> None:
    a, b = fleet.nodes[1], fleet.nodes[4]

    said = _act(browser, "cordon", [a, b])

    assert said == {"success": ["Cordon: a100-0 (ready → cordoned), h100-1 (ready → cordoned)"]}
    assert set(Node.objects.filter(pk__in=[a.pk, b.pk]).values_list("state", flat=True)) == {NodeState.CORDONED}
    assert Event.objects.filter(kind=EventKind.NODE_STATE, reason="Cordoned").count() == 2


def test_a_node_already_there_and_a_refused_one_are_said_apart(fleet, browser) -> None:
    cordoned, ready, suspect = fleet.nodes[1], fleet.nodes[2], fleet.nodes[3]
    Node.objects.filter(pk=cordoned.pk).update(state=NodeState.CORDONED, unschedulable=True)
    Node.objects.filter(pk=suspect.pk).update(state=NodeState.SUSPECT)

    said = _act(browser, "uncordon", [cordoned, ready, suspect])

    assert said["success"] == ["Uncordon: h100-1 (cordoned → ready)"]
    assert said["info"] == ["Already there, nothing recorded: h100-2"]
    [refusal] = said["error"]
    assert refusal.startswith("node h100-3 is suspect; it can be uncordoned only from cordoned or draining")
    assert Event.objects.filter(kind=EventKind.NODE_STATE).count() == 1


def test_cordoning_a_quarantined_node_says_how_it_returns(fleet, browser) -> None:
    gone = fleet.nodes[3]
    Node.objects.filter(pk=gone.pk).update(state=NodeState.QUARANTINED)

    assert _act(browser, "cordon", [gone]) == {"success": ["Cordon: h100-3 (quarantined, returns cordoned)"]}
    assert _act(browser, "cordon", [gone]) == {"info": ["Already there, nothing recorded: h100-3"]}
    assert Node.objects.get(pk=gone.pk).state == NodeState.QUARANTINED


def test_uncordon_and_drain_say_so_too(fleet, browser) -> None:
    node = fleet.nodes[1]
    assert _act(browser, "drain", [node]) == {"success": ["Drain: h100-1 (ready → draining)"]}
    assert _act(browser, "uncordon", [node]) == {"success": ["Uncordon: h100-1 (draining → ready)"]}


def test_drain_of_a_busy_node_says_which_jobs_it_leaves_running(fleet, browser) -> None:
    from django.db import transaction
    from django.utils import timezone

    from controlplane.services import reconcile, transitions
    from tests.controlplane import factories as f

    node = fleet.nodes[1]
    job = f.make_job(fleet.ml, fleet.research, name="finetune", gpus=4)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=[0, 1, 2, 3])], lease=lease,
                             borrowed=False, at=timezone.now(), actor="test")

    said = _act(browser, "drain", [node, fleet.nodes[2]])

    assert said["success"] == ["Drain: h100-1 (ready → draining), h100-2 (ready → draining)"]
    [left] = said["info"]
    # "Node" first: Django's admin writes a message with its first letter capitalised, and said
    # "H100-1: ready → draining", a name no node has.
    assert left.startswith("Node h100-1: ready → draining: no new work goes there; 1 job runs there until it ends (by ")
    assert f"job {job.pk} finetune (4 GPUs here; its runtime limit ends " in left


# Found by a fleet admin's review (6 Dec): the API, `qm nodes drain --reason` and Slurm's
# `Reason=` say why a node is out of service, but the admin's list actions took no reason, so a
# node drained there read an empty `cordon_reason` in `qm nodes` and its event said no why.


def test_the_list_takes_a_reason_beside_the_action(fleet, browser) -> None:
    page = browser.get("/admin/controlplane/node/").content.decode()

    assert 'name="reason"' in page and "Reason (cordon, drain)" in page


def test_a_drain_from_the_list_records_its_reason(fleet, browser) -> None:
    from controlplane.services import nodes

    node = fleet.nodes[1]

    said = _act(browser, "drain", [node], reason="XID 79 on GPU 3")

    assert said == {"success": ["Drain: h100-1 (ready → draining)"]}
    [event] = Event.objects.filter(kind=EventKind.NODE_STATE, node=node)
    assert event.data["reason"] == "XID 79 on GPU 3" and "XID 79 on GPU 3" in event.message, event.message
    assert Node.objects.annotate(why=nodes.cordon_reason()).get(pk=node.pk).why == "XID 79 on GPU 3"


def test_a_reason_with_an_action_that_takes_none_is_refused_and_nothing_done(fleet, browser) -> None:
    node = fleet.nodes[1]
    Node.objects.filter(pk=node.pk).update(state=NodeState.CORDONED, unschedulable=True)

    said = _act(browser, "uncordon", [node], reason="fixed")

    assert said == {"error": ["Reason: only Cordon and Drain take one (it says why a node is taken out of "
                              "service); nothing was done. Clear it to Uncordon."]}
    assert Node.objects.get(pk=node.pk).state == NodeState.CORDONED
    assert not Event.objects.filter(kind=EventKind.NODE_STATE).exists()


def test_a_reason_of_two_lines_is_refused_and_nothing_done(fleet, browser) -> None:
    node = fleet.nodes[1]

    said = _act(browser, "cordon", [node], reason="bad\nDIMM")

    [refusal] = said["error"]
    assert refusal.startswith("Reason: contains a control character (U+000A, a new line) at position 4: it is one "
                              "line of text"), refusal
    assert refusal.endswith("nothing was done."), refusal
    assert Node.objects.get(pk=node.pk).state == NodeState.READY
    assert not Event.objects.filter(kind=EventKind.NODE_STATE).exists()


def test_a_new_reason_for_a_node_already_cordoned_is_said_recorded_not_nothing_recorded(fleet, browser) -> None:
    """Found in the demo: cordoning h100-12, cordoned already, with the reason "again" recorded a
    node.state event with it (its reason now, as Slurm's `scontrol update reason=`), and the page
    said "Already there, nothing recorded: h100-12" beside "its reason is now: again"."""
    from controlplane.services import nodes

    node, other = fleet.nodes[1], fleet.nodes[2]
    Node.objects.filter(pk__in=[node.pk, other.pk]).update(state=NodeState.CORDONED, unschedulable=True)

    said = _act(browser, "cordon", [node, other], reason="XID 79 on GPU 3")

    assert said["info"][0] == "Already there, its reason now recorded (XID 79 on GPU 3): h100-1, h100-2", said
    assert not [m for m in said["info"] if "nothing recorded" in m], said
    assert Event.objects.filter(kind=EventKind.NODE_STATE, data__reason="XID 79 on GPU 3").count() == 2
    assert Node.objects.annotate(why=nodes.cordon_reason()).get(pk=node.pk).why == "XID 79 on GPU 3"
    # With no reason given, nothing is recorded, and the page says so.
    assert _act(browser, "cordon", [node]) == {"info": ["Already there, nothing recorded: h100-1"]}
