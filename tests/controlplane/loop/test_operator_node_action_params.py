"""Node actions take no query parameter, and say so naming it.

Found on the operator's night drill: `POST nodes/17/cordon/?pool=a100` (a script that cordons
"the a100 nodes" by id, with a stray filter) answered 404 "No Node matches the given query." for
a node that exists, since the list's filters were applied to the action's lookup; and
`POST nodes/17/cordon/?force=1` was refused with "this list takes: capacity_tier, format,
gpu_type, …", the list's filters, as if the action took them. Either is now a 400 naming the
parameter and saying the action takes only `format`; the node is left as it was."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.choices import NodeState, Role
from controlplane.models import Event, Node
from tests.controlplane import factories
from tests.controlplane.loop_fixtures import LoopFleet, register_node


@pytest.mark.parametrize("verb", ["cordon", "drain", "uncordon"])
@pytest.mark.parametrize("query", ["pool=a100", "force=1"])
def test_operator_a_node_action_with_a_query_parameter_is_400_naming_it(fleet: LoopFleet, verb: str, query: str) -> None:
    node, _ = register_node("gpu-01")
    if verb == "uncordon":
        Node.objects.filter(pk=node.pk).update(state=NodeState.CORDONED, unschedulable=True)
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Token {factories.token_for(factories.make_user('root', role=Role.ADMIN))}")
    events = Event.objects.count()

    response = admin.post(f"/api/v1/nodes/{node.pk}/{verb}/?{query}")

    assert response.status_code == 400, response.content
    name = query.split("=")[0]
    assert list(response.json()["errors"]) == [name]
    assert "takes: format." in response.json()["errors"][name][0]
    assert Event.objects.count() == events
    assert admin.post(f"/api/v1/nodes/{node.pk}/{verb}/").status_code == 200
