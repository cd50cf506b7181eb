"""Each row of a heat map of nodes ends with a number: that node's free GPUs. The overview's
caption said so; the job page's "Where it runs" and the node page's map drew the same numbers
("0 0 0 0 1" beside a running job's nodes) under captions that did not, so a researcher read a
column of unlabelled figures. Whatever the caption, the map says what they are when it draws
them, and does not when it leaves them out (more than 160 rows)."""

from __future__ import annotations

import pytest

from controlplane.models import Job
from controlplane.services.cycle import run_cycle
from frontend import figures
from tests.frontend.test_figures import node

pytestmark = pytest.mark.django_db

SAID = "The number at the right of a row is that node's free GPUs (– on a node that takes no work)."


@pytest.mark.parametrize("caption", [None, "The nodes holding this job's GPUs.", "Each GPU slot of this node."])
def test_a_map_that_draws_the_free_counts_says_what_they_are(caption: str | None) -> None:
    chart = figures.fleet_heatmap([node("n1", [None, None])], caption=caption)
    assert chart.figure["data"][1]["text"] == ["2"]
    assert chart.caption.endswith(SAID) and chart.caption.count(SAID) == 1


def test_a_map_without_the_counts_does_not_speak_of_them() -> None:
    chart = figures.fleet_heatmap([node(f"n{i}", [None]) for i in range(161)])
    assert len(chart.figure["data"]) == 1
    assert "number at the right" not in chart.caption


def test_the_job_and_node_pages_say_what_the_numbers_beside_their_maps_are(client_for, submit_as) -> None:
    job = submit_as("alice", name="train", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    job = Job.objects.get(pk=job.pk)
    client = client_for("alice")
    where = job.allocations.get().gpus.first().node.name

    for path in (f"/jobs/{job.pk}/", f"/nodes/{where}/"):
        html = client.get(path).content.decode()
        assert SAID.replace("'", "&#x27;") in html, path  # the template escapes the apostrophe
