"""Control characters in the names of the fleet's topology (pool, leaf switch, spine) and of
nodes, teams and projects are refused alike wherever those names come in: a 400 naming the field
from the API (`nodes/`, `teams/`, `projects/`), a form error on the field in the admin, and
nothing written. Until 5 Dec `nodes/` and the admin's node page took an escape sequence or a
new line in a pool, switch or node name (NUL had DRF's own refusal), and every page, log and
terminal printing it got it raw; the agent's registration is tested beside its API
(tests/controlplane/agent/test_agent_names_control_characters.py)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Node, Project, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
ESCAPE = "h100\x1b[31m"
BELL = "leaf\x07-1"
NEW_LINE = "spine-1\nspine-2"
C1 = "pool\x9b2J"
#: Each refusal, in the one rule's words (services/plain_text.py): the character and where it is.
SAID = {
    ESCAPE: "contains a control character (U+001B, an escape) at position 5",
    BELL: "contains a control character (U+0007) at position 5",
    NEW_LINE: "contains a control character (U+000A, a new line) at position 8: it is one line of text",
    C1: "contains a control character (U+009B) at position 5",
    "\u202eevil": "contains a bidirectional control (U+202E) at position 1",
    "x\x1b]0;owned\x07": "contains a control character (U+001B, an escape) at position 2",
}


def _node(**overrides: Any) -> dict[str, Any]:
    body = {"name": "n-new", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 64,
            "memory_gb": 512, "leaf_switch": "leaf-1", "spine": "spine-1"}
    body.update(overrides)
    return body


@pytest.mark.parametrize(("field", "value"), [
    ("pool", ESCAPE), ("pool", C1), ("leaf_switch", BELL), ("spine", NEW_LINE), ("pool", "\u202eevil"),
])
def test_a_topology_name_with_a_control_character_is_a_400_on_its_field(admin, field, value) -> None:
    before = Node.objects.count()

    r = admin.post(f"{J}/nodes/", _node(**{field: value}), format="json")

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {field: [SAID[value]]}, r.json()
    assert Node.objects.count() == before


@pytest.mark.parametrize("field", ["pool", "leaf_switch", "spine"])
def test_a_change_of_a_topology_name_with_a_control_character_is_a_400_and_changes_nothing(admin, fleet,
                                                                                          field) -> None:
    node = fleet.nodes[0]
    was = getattr(node, field)

    r = admin.patch(f"{J}/nodes/{node.pk}/", {field: "x\x1b]0;owned\x07"}, format="json")

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {field: [SAID["x\x1b]0;owned\x07"]]}, r.json()
    assert getattr(Node.objects.get(pk=node.pk), field) == was


@pytest.mark.parametrize("name", ["n\x1b[2Jnew", "gpu 01", "gpu-01\x00"])
def test_a_node_name_is_the_agents_node_name_in_the_api_too(admin, name) -> None:
    before = Node.objects.count()

    r = admin.post(f"{J}/nodes/", _node(name=name), format="json")

    assert r.status_code == 400, r.content[:300]
    assert list(r.json()["errors"]) == ["name"], r.json()
    assert Node.objects.count() == before


@pytest.mark.parametrize(("path", "body"), [
    ("teams/", {"name": "ml\x1b[31m"}),
    ("projects/", {"team": "ml", "name": "llm\nx"}),
])
def test_team_and_project_names_refuse_control_characters_too(admin, path, body) -> None:
    before = (Team.objects.count(), Project.objects.count())

    r = admin.post(f"{J}/{path}", body, format="json")

    assert r.status_code == 400, r.content[:300]
    assert list(r.json()["errors"]) == ["name"], r.json()
    assert (Team.objects.count(), Project.objects.count()) == before


def test_good_names_are_still_taken(admin) -> None:
    r = admin.post(f"{J}/nodes/", _node(name="gpu-07.rack-3", pool="h100 east", leaf_switch="leaf-3",
                                         spine="spine-1"), format="json")

    assert r.status_code == 201, r.json()
    assert Node.objects.get(name="gpu-07.rack-3").pool == "h100 east"


@pytest.mark.parametrize(("field", "value"), [("pool", ESCAPE), ("leaf_switch", BELL), ("spine", C1),
                                              ("name", "gpu\x1b01")])
def test_the_admins_node_page_refuses_them_on_the_field(fleet, browser, field, value) -> None:
    node = fleet.nodes[1]
    path = f"/admin/controlplane/node/{node.pk}/change/"
    page = browser.get(path)
    form = {k: v for k, v in f.admin_change_form(page).items() if v is not False}
    form[field] = value

    r = browser.post(path, form)

    assert r.status_code == 200, "the form was accepted"
    errors = {name: list(said) for name, said in r.context["adminform"].form.errors.items()}
    assert list(errors) == [field], errors
    if field != "name":
        assert errors[field] == [SAID[value]]
    assert getattr(Node.objects.get(pk=node.pk), field) == getattr(node, field)
