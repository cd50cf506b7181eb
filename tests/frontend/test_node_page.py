"""`/nodes/<name>/`: one node — its state, inventory, heartbeat, the jobs holding its GPUs and
what happened to it — for everyone signed in; other teams' jobs appear only as their team."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from controlplane.choices import EventKind, JobState
from controlplane.models import AllocationGpu, Node
from controlplane.services.cycle import run_cycle
from controlplane.services.nodes import cordon
from controlplane.services.transitions import record_event

pytestmark = pytest.mark.django_db


def node_of(job) -> Node:
    return Node.objects.get(pk=AllocationGpu.objects.filter(allocation__job=job, live=True).values("node_id")[:1])


def started_on(job, node: Node) -> None:
    """What the node's agent records when the job's processes start there."""
    record_event(EventKind.JOB_STARTED, f"agent:{node.name}", job=job, node=node, reason="Started",
                 message=f"Generation 1 started on {node.name}")


#: An event kind as the node page's events write it: it may break after its dot (qm.kind_words).
STARTED = "job.<wbr>started"


def test_a_node_page_names_the_jobs_on_it_and_its_history(client_for, submit_as):
    job = submit_as("alice", name="on-the-node", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    node = node_of(job)
    started_on(job, node)
    page = client_for("alice").get(f"/nodes/{node.name}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'href="/jobs/{job.pk}/"' in html and "on-the-node" in html
    assert "8 × H100-80GB" in html and node.leaf_switch in html and node.spine in html
    assert STARTED in html  # its events, newest first
    assert "On-demand" in html or "Reserved" in html or "Spot" in html  # the tier's label, not its code
    # the nodes list links every node to its page
    assert f'href="/nodes/{node.name}/"' in client_for("alice").get("/nodes/").content.decode()
    # the job page links the nodes it runs on
    assert f'href="/nodes/{node.name}/"' in client_for("alice").get(f"/jobs/{job.pk}/").content.decode()


def test_another_teams_job_on_a_node_shows_as_its_team_only(client_for, submit_as):
    job = submit_as("alice", name="vision-secret", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    node = node_of(job)
    started_on(job, node)
    assert STARTED in client_for("alice").get(f"/nodes/{node.name}/").content.decode()
    html = client_for("bob").get(f"/nodes/{node.name}/").content.decode()
    assert "vision-secret" not in html and f"/jobs/{job.pk}/" not in html
    assert "a job of team vision" in html
    # nor do its events leak: the node's own events (registration, state) are everyone's
    assert STARTED not in html and "job.started" not in html


def test_an_admin_cordons_from_the_node_page_and_it_says_who_did(client_for):
    node = Node.objects.order_by("name").first()
    admin = client_for("admin")
    html = admin.get(f"/nodes/{node.name}/").content.decode()
    assert f'data-api-post="/api/v1/nodes/{node.pk}/cordon/"' in html
    cordon(node, get_user_model().objects.get(username="admin"))
    html = admin.get(f"/nodes/{node.name}/").content.decode()
    assert "Cordoned" in html and "user:admin" in html
    assert f'data-api-post="/api/v1/nodes/{node.pk}/uncordon/"' in html
    live = admin.get(f"/ui/nodes/{node.name}.json").json()
    assert "Cordoned" in live["html"]["node-status"] and "placement" in live["charts"]
    # members get no buttons
    assert "data-api-post" not in client_for("alice").get(f"/nodes/{node.name}/").content.decode()


def test_an_unknown_node_is_a_404(client_for):
    assert client_for("alice").get("/nodes/no-such-node/").status_code == 404
    assert client_for("alice").get("/ui/nodes/no-such-node.json").status_code == 404
    # a name PostgreSQL cannot even compare (a NUL byte) is no node either, not a 500
    assert client_for("alice").get("/nodes/a%00b/").status_code == 404


def test_a_node_that_is_away_offers_the_cordon_for_its_return_and_says_how_it_returns(client_for):
    """A quarantined or down node keeps its health state; an admin decides whether it comes
    back cordoned (services/nodes.py, Node.unschedulable). Before, the pages offered nothing."""
    node = Node.objects.order_by("name").first()
    Node.objects.filter(pk=node.pk).update(state="quarantined")
    admin = client_for("admin")
    page = admin.get(f"/nodes/{node.name}/").content.decode()
    listing = admin.get("/nodes/").content.decode()
    assert "returns ready when its agent registers again" in page and "returns ready" in listing
    assert f'data-api-post="/api/v1/nodes/{node.pk}/cordon/"' in page
    assert f'data-api-post="/api/v1/nodes/{node.pk}/cordon/"' in listing

    cordon(node, get_user_model().objects.get(username="admin"))

    page = admin.get(f"/nodes/{node.name}/").content.decode()
    assert "returns cordoned when its agent registers again" in page
    assert f'data-api-post="/api/v1/nodes/{node.pk}/uncordon/"' in page
    assert "returns cordoned" in admin.get("/nodes/").content.decode()
