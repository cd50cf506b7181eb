"""A job waiting on nodes that are not ready names the states they are in.

Before, a job whose only capable nodes were quarantined read "not ready (down, cordoned or
draining)": quarantined (and suspect) were missing from the list, so an operator looking for
a down node found none."""

from __future__ import annotations

import pytest
from engine_builders import make_cluster, make_job, why

from scheduler_core import NodeState, ReasonCode


@pytest.mark.parametrize(
    ("states", "words"),
    [
        ((NodeState.QUARANTINED,), "the only node that could host it is not ready (quarantined)"),
        ((NodeState.SUSPECT,), "the only node that could host it is not ready (suspect)"),
        ((NodeState.QUARANTINED, NodeState.QUARANTINED, NodeState.DOWN),
         "all 3 nodes that could host it are not ready (1 down, 2 quarantined)"),
        ((NodeState.CORDONED, NodeState.DRAINING),
         "all 2 nodes that could host it are not ready (1 cordoned, 1 draining)"),
    ],
    ids=["one-quarantined", "one-suspect", "quarantined-and-down", "cordoned-and-draining"],
)
def test_a_job_on_nodes_that_are_not_ready_names_their_states(states, words):
    cluster = make_cluster().node("a0")
    for k, state in enumerate(states):
        cluster = cluster.node(f"h{k}", gpu_type="h100", state=state)
    explanation = why(cluster.pending(make_job("j").gpus(2).types("h100")).plan(), "j")
    assert explanation.code is ReasonCode.NODE_NOT_READY
    assert words in explanation.message
    assert "down, cordoned or draining" not in explanation.message
