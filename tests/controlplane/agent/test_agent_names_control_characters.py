"""An agent's registration refuses control characters in its node's name, pool, leaf switch and
spine with a 400 naming the field, as the API's `nodes/` and the admin do
(tests/controlplane/api/test_fleet_names_control_characters.py), and writes nothing. Until 5 Dec
a pool or switch name with an escape sequence or a bell in it was stored as sent; the service
checks the same for callers that do not come through the API (the embedded demo's agents)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.models import Node
from controlplane.services import agent_protocol
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, agent_client, inventory

pytestmark = pytest.mark.django_db
REGISTER = "/api/v1/agent/register"


def _body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {"name": "cc-gpu-01", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8,
                               "cpus": 96, "memory_gb": 1024, "leaf_switch": "leaf-1", "spine": "spine-1"}
    body.update(overrides)
    return body


@pytest.mark.parametrize(("field", "value", "said"), [
    ("pool", "h100\x1b[31m", "contains a control character (U+001B, an escape) at position 5"),
    ("leaf_switch", "leaf\x07", "contains a control character (U+0007) at position 5"),
    ("spine", "spine\n2", "contains a control character (U+000A, a new line) at position 6: it is one line of text"),
    ("pool", "a\x9bb", "contains a control character (U+009B) at position 2"),
])
def test_a_registration_with_a_control_character_in_a_topology_name_is_a_400_on_its_field(
        fleet: LoopFleet, field: str, value: str, said: str) -> None:
    r = agent_client(BOOTSTRAP).post(REGISTER, _body(**{field: value}), format="json")

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {field: [said]}, r.json()
    assert not Node.objects.filter(name="cc-gpu-01").exists()


@pytest.mark.parametrize("field", ["pool", "leaf_switch", "spine"])
def test_a_nul_in_a_topology_name_is_a_400_on_its_field(fleet: LoopFleet, field: str) -> None:
    r = agent_client(BOOTSTRAP).post(REGISTER, _body(**{field: "x\x00y"}), format="json")

    assert r.status_code == 400, r.content[:300]
    assert list(r.json()["errors"]) == [field], r.json()


def test_a_reregistration_cannot_bring_one_in_either(fleet: LoopFleet) -> None:
    assert agent_client(BOOTSTRAP).post(REGISTER, _body(), format="json").status_code == 201

    r = agent_client(BOOTSTRAP).post(REGISTER, _body(leaf_switch="leaf-1\x1b]0;x\x07"), format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["leaf_switch"], r.json()
    assert Node.objects.get(name="cc-gpu-01").leaf_switch == "leaf-1"


@pytest.mark.parametrize("name", ["cc\x1bgpu", "cc gpu", "-cc"])
def test_a_node_name_with_anything_but_letters_digits_dots_dashes_underscores_is_a_400(fleet: LoopFleet,
                                                                                       name: str) -> None:
    r = agent_client(BOOTSTRAP).post(REGISTER, _body(name=name), format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["name"], r.json()
    assert not Node.objects.filter(name=name).exists()


@pytest.mark.parametrize(("field", "value"), [("pool", "h\x1b100"), ("spine", "s\x00"), ("name", "cc\ngpu")])
def test_the_service_refuses_them_for_callers_outside_the_api(fleet: LoopFleet, field: str, value: str) -> None:
    name = value if field == "name" else "cc-gpu-02"
    fields = {} if field == "name" else {field: value}
    with pytest.raises(agent_protocol.InvalidAgentRequest) as refused:
        agent_protocol.register(name, inventory(**fields), token=BOOTSTRAP, running=[], now=timezone.now())

    assert list(refused.value.errors) == [field]
    assert not Node.objects.filter(name=name).exists()
