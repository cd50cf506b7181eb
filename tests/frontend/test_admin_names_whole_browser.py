"""In Chromium, at 1,280 and 1,000 px, signed in as an admin: a node's name in an event's message
or actor or in a maintenance window's reason and nodes, and a team's name in the lists that show
one (teams, quotas, jobs, notification hooks, users' roles), is drawn on one line, never broken at
one of its hyphens.

Found walking the admin (5 Dec), measured by this test on 6 Dec before the fix: the events' list
broke a node's name in a message and in an actor at its hyphens ("agent:gpu-a100-" / "017") while
the product's pages hold such words together (the `whole_words` filter); the quota, job and hook
lists' team column read "recommendation-" / "systems", as did the users' roles; the maintenance
windows' nodes and reason broke their node names too."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, GpuType, Membership, NotificationHook
from controlplane.services import maintenance
from tests.controlplane import factories as f
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_pages_fit_laptops_browser import MEASURE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NODES = ("gpu-a100-017", "gpu-a100-018", "gpu-h100-0042")
TEAMS = ("recommendation-systems", "speech-recognition-research")
LISTS = ("controlplane/event", "controlplane/team", "controlplane/quota", "controlplane/job",
         "controlplane/notificationhook", "auth/user", "controlplane/maintenancewindow")


def _hyphenated_names() -> None:
    """Nodes and teams named with hyphens, and events whose messages name the nodes at every
    offset a line may end at (each message a word longer than the one before)."""
    h100 = GpuType.objects.get(name="H100-80GB")
    nodes = [f.make_node(h100, name) for name in NODES]
    for name in TEAMS:
        team = f.make_team(name, cohort=None)
        f.make_quota(team, h100, 8)
        f.make_job(team, name="train")
        NotificationHook.objects.create(user=user("admin"), team=team, url="https://hooks.example.com/qm",
                                        events=["failed"], secret="s", created_at=timezone.now())
        Membership.objects.create(user=user("alice"), team=team, role="member")
    now = timezone.now()
    for hours in (1, 3):  # two windows, each naming the three nodes
        maintenance.create(user("admin"), start_at=now + timezone.timedelta(hours=hours), duration_s=3600,
                           reason="firmware upgrade on the gpu-a100-017 rack", nodes=list(NODES))
    Event.objects.bulk_create(
        Event(created_at=now - timezone.timedelta(seconds=i), kind=EventKind.NODE_STATE, actor=f"agent:{node.name}",
              reason="NodeCordoned", node=node,
              message=f"Node {node.name} cordoned by admin{' for' * (i // 3)}: took no new work while "
                      f"{node.name}:0,1,2,3 ran the gang bound on {nodes[(i + 1) % 3].name}")
        for i, node in ((i, nodes[i % 3]) for i in range(24)))


def test_node_and_team_names_in_admin_lists_stay_whole(session: Any) -> None:  # noqa: F811
    _hyphenated_names()
    admin = session("admin")
    page = admin.page
    broken: dict[str, Any] = {}
    for width in (1280, 1000):
        page.set_viewport_size({"width": width, "height": 900})
        for name in LISTS:
            page.goto(f"{admin.base}/admin/{name}/")
            seen = page.evaluate(MEASURE, [*NODES, *TEAMS])
            assert page.locator("#result_list tbody tr").count() >= 2, name
            if seen["broken"] or seen["wide"]:
                broken[f"{width} /admin/{name}"] = {k: seen[k] for k in ("broken", "wide") if seen[k]}
            admin.screenshot(f"admin-names-{name.replace('/', '-')}-{width}")
    assert not broken, "names broken at a hyphen (or lists scrolling sideways):\n" + "\n".join(
        f"{where}: {what}" for where, what in broken.items())
