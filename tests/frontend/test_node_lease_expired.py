"""A node whose agent lease has run out said "Agent lease: until 23:29:21 UTC (now)" on its page,
however long ago that was (seen on the demo 13 s after a simulated agent was killed; an hour
later it still said "now"), as if the lease were about to end rather than long gone. It now says
the lease expired, when, and how long ago; a live lease still says until when."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Node
from frontend.templatetags.qm import utc

pytestmark = pytest.mark.django_db


def _lease_line(html: str) -> str:
    start = html.index("<dt>Agent lease</dt>")
    return html[start:html.index("</dd>", start)]


def test_an_expired_lease_says_it_expired_and_how_long_ago(client_for):
    node = Node.objects.order_by("name").first()
    expired = timezone.now() - timedelta(minutes=10)
    Node.objects.filter(pk=node.pk).update(state=NodeState.QUARANTINED, agent_lease_expires_at=expired,
                                           last_heartbeat_at=expired - timedelta(seconds=20))

    line = _lease_line(client_for("admin").get(f"/nodes/{node.name}/").content.decode())
    live = client_for("admin").get(f"/ui/nodes/{node.name}.json").content.decode()

    assert "(now)" not in line and "until" not in line, line
    assert f"expired at {utc(expired)} (10 min ago)" in line, line
    assert "expired at" in live and "(now)" not in live


def test_a_live_lease_says_until_when(client_for):
    node = Node.objects.order_by("name").first()
    ends = timezone.now() + timedelta(seconds=19)
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=ends, last_heartbeat_at=timezone.now())

    line = _lease_line(client_for("admin").get(f"/nodes/{node.name}/").content.decode())

    assert f"until {utc(ends)} (in 1" in line, line  # in 19 s or 18 s, as the clock moves
