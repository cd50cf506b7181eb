"""The submit's lean path: the plain-data typing of a submit body must agree with the
serializer on every body it accepts; the one-query token authentication must answer exactly as
DRF's (and see revocations at once); a submit reads in a fixed, small number of statements."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from controlplane.api import serializers as s
from controlplane.choices import Role
from controlplane.models import GpuType, Job, Membership, Node
from tests.controlplane import factories as f

JOBS = "/api/v1/jobs/"

_FIELDS = sorted(s.JobArraySubmitSerializer().fields)
_text = st.one_of(
    st.sampled_from(["", " ", "x", " padded ", "H100-80GB", "same_node", "any", "training", "serving", "0-9",
                     "a\x00b", "\ud800", "x" * 64, "x" * 65, "x" * 128, "x" * 129, "ok name"]),
    st.text(max_size=8),
)
_scalar = st.one_of(
    st.none(), st.booleans(), _text, st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 2, 8, 16, 1024, 1025, 65536, 65537, 2**31 - 1, 2**31, -1, 2**40]),
    st.integers(min_value=-3, max_value=70000),
)
_value = st.one_of(
    _scalar,
    st.lists(_text, max_size=3),
    st.dictionaries(st.sampled_from(["A", "B_2", "1BAD", "", "x" * 257, "PATH"]), _scalar, max_size=3),
)
_body = st.dictionaries(st.sampled_from([*_FIELDS, "gpu_per_node", "state"]), _value, max_size=6)
_valid = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", " b ", "long " * 20]), "gpus": st.integers(min_value=1, max_value=65536)},
    optional={
        "gpus_per_node": st.integers(min_value=1, max_value=1024), "gpu_type": st.sampled_from(["H100-80GB", "A"]),
        "gpu_types": st.lists(st.sampled_from(["H100-80GB", "A100-40GB", " x "]), max_size=3),
        "min_gpu_memory_gb": st.integers(min_value=0, max_value=200), "topology": st.sampled_from(
            ["any", "same_node", "same_leaf", "same_spine"]),
        "priority_class": st.just("research"), "team": st.just("ml"), "project": st.just("llm"),
        "runtime_limit_s": st.integers(min_value=1, max_value=10**6), "command": st.text(max_size=20),
        "env": st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,5}", fullmatch=True), st.text(max_size=5),
                               max_size=3),
        "workload": st.sampled_from(["training", "serving"]), "array": st.sampled_from(["0-9", "1,3", " 0-98:2 "]),
    },
)


def _through_serializer(data: Any, serializer_class: type[s.JobSubmitSerializer]) -> Any:
    body = serializer_class(data=data)
    return body.to_submit_request() if body.is_valid() else None


@pytest.mark.parametrize("serializer_class", [s.JobSubmitSerializer, s.JobArraySubmitSerializer])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(_body, _valid))
def test_plain_typing_agrees_with_the_serializer_on_every_body_it_takes(serializer_class, data) -> None:
    plain = s.plain_submit_request(data, serializer_class)

    if plain is not None:  # taken: the serializer must accept it and produce the very same request
        assert plain == _through_serializer(data, serializer_class)
        assert plain.fingerprint() == _through_serializer(data, serializer_class).fingerprint()


@pytest.mark.parametrize("data", [
    {"name": "load-1-1", "gpus": 2, "command": "python train.py"},
    {"name": "x", "gpus": 16, "gpus_per_node": 8, "gpu_type": "H100-80GB", "priority_class": "research",
     "env": {"A": "1"}, "topology": "same_spine", "runtime_limit_s": 3600},
])
def test_plain_typing_takes_the_common_bodies(data) -> None:
    """The fast path is really taken for ordinary submits (else it would be dead code)."""
    plain = s.plain_submit_request(data, s.JobSubmitSerializer)

    assert plain is not None and plain == _through_serializer(data, s.JobSubmitSerializer)


@pytest.mark.parametrize("data", [
    {"name": "x", "gpus": True}, {"name": "x", "gpus": 1.0}, {"name": "x", "gpus": "1"}, {"name": "x"},
    {"name": " ", "gpus": 1}, {"name": "x", "gpus": 1, "gpu_per_node": 8}, {"name": None, "gpus": 1},
    {"name": "x", "gpus": 1, "gpu_type": "A", "gpu_types": ["B"]}, {"name": "x", "gpus": 1, "env": {"1A": "v"}},
    {"name": "x", "gpus": 1, "env": {"A\n": "v"}},
    [{"name": "x", "gpus": 1}], {"name": "a\x00", "gpus": 1}, {"name": "x", "gpus": 1, "runtime_limit_s": None},
])
def test_plain_typing_leaves_anything_doubtful_to_the_serializer(data) -> None:
    assert s.plain_submit_request(data, s.JobSubmitSerializer) is None


# ----------------------------------------------------------------------------- authentication


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.mark.django_db
def test_unknown_token_is_a_401(fleet) -> None:
    r = _client("0" * 40).get(JOBS)

    assert r.status_code == 401 and r.json()["detail"] == "Invalid token."


@pytest.mark.django_db
def test_deactivated_user_and_deleted_token_are_refused_on_the_next_request(fleet) -> None:
    user = f.make_user(team=fleet.ml)
    token = f.token_for(user)
    client = _client(token)
    assert client.get(JOBS).status_code == 200

    user.is_active = False
    user.save(update_fields=["is_active"])
    r = client.get(JOBS)
    assert r.status_code == 401 and r.json()["detail"] == "User inactive or deleted."

    user.is_active = True
    user.save(update_fields=["is_active"])
    user.api_tokens.all().delete()
    assert client.get(JOBS).status_code == 401


@pytest.mark.django_db
def test_membership_change_takes_effect_on_the_next_request(fleet) -> None:
    user = f.make_user(team=fleet.ml)
    client = _client(f.token_for(user))
    assert client.post(JOBS, {"name": "a", "gpus": 1}, format="json").status_code == 201

    Membership.objects.filter(user=user).update(role=Role.FINANCE, team=None)
    assert client.post(JOBS, {"name": "b", "gpus": 1}, format="json").status_code == 403

    Membership.objects.filter(user=user).update(role=Role.MEMBER, team=fleet.vision)
    r = client.post(JOBS, {"name": "c", "gpus": 1}, format="json")
    assert r.status_code == 201 and r.json()["team"] == fleet.vision.name


def _fleet_changes_decide_the_next_submit(fleet: Any, alice: APIClient) -> None:
    too_big = {"name": "x", "gpus": 8, "gpus_per_node": 8, "cpus_per_gpu": 40}
    r = alice.post(JOBS, too_big, format="json")
    assert r.status_code == 400 and "cpus_per_gpu" in r.json()["errors"]

    node = f.make_node(fleet.h100, cpus=512)  # added
    assert alice.post(JOBS, too_big, format="json").status_code == 201

    Node.objects.filter(pk=node.pk).update(cpus=96)  # changed
    assert alice.post(JOBS, too_big, format="json").status_code == 400

    Node.objects.filter(pk=node.pk).update(cpus=512)
    assert alice.post(JOBS, too_big, format="json").status_code == 201
    Node.objects.filter(pk=node.pk).delete()  # removed
    assert alice.post(JOBS, too_big, format="json").status_code == 400

    big_memory = {"name": "y", "gpus": 1, "min_gpu_memory_gb": 100}
    assert alice.post(JOBS, big_memory, format="json").status_code == 400
    GpuType.objects.filter(pk=fleet.h100.pk).update(memory_gb=141)  # a GPU type changed
    assert alice.post(JOBS, big_memory, format="json").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_fleet_change_committed_elsewhere_is_seen_by_the_next_submit(fleet, alice) -> None:
    """Each change commits on its own, as an admin's or an agent's would: the per-process
    fleet summary is keyed by the version read with every submit, so a node added, changed or
    removed, or a GPU type changed, decides the very next submit."""
    _fleet_changes_decide_the_next_submit(fleet, alice)


@pytest.mark.django_db
def test_fleet_change_in_the_submitters_own_transaction_is_seen_too(fleet, alice) -> None:
    """Inside one transaction (the test's) every change carries the same xmin; the submit
    sees that its transaction has written and reads the fleet itself."""
    _fleet_changes_decide_the_next_submit(fleet, alice)


@pytest.mark.django_db(transaction=True)
def test_single_submit_takes_three_statements(fleet, alice, django_assert_num_queries) -> None:
    """Token with user and memberships; team, class, project and the fleet's version; the job
    with its event, which commits by itself."""
    alice.post(JOBS, {"name": "warm", "gpus": 1}, format="json")  # this process has seen the fleet

    with django_assert_num_queries(3):
        r = alice.post(JOBS, {"name": "x", "gpus": 8, "gpu_type": "H100-80GB", "priority_class": "research",
                              "project": "llm"}, format="json")

    assert r.status_code == 201 and Job.objects.filter(name="x").count() == 1


@pytest.mark.django_db
def test_submitted_row_holds_exactly_what_the_response_says(fleet, alice) -> None:
    """The one-statement insert (a JSON record per row) writes every column as the ORM would
    read it back: the response, built from the in-memory job, equals the stored job."""
    body = {"name": "full", "gpus": 16, "gpus_per_node": 8, "gpu_type": "H100-80GB", "min_gpu_memory_gb": 40,
            "cpus_per_gpu": 8, "memory_gb_per_gpu": 64, "topology": "same_spine", "min_gpus": 8, "max_gpus": 32,
            "priority_class": "production", "project": "llm", "runtime_limit_s": 7200, "checkpoint_interval_s": 600,
            "command": "python train.py --lr 3e-4 'quoted' \"double\" \\ back", "env": {"WANDB_MODE": "off line ü"}}
    r = alice.post(JOBS, body, format="json")
    assert r.status_code == 201, r.json()

    stored = Job.objects.select_related("team", "project", "submitter", "priority_class").get(pk=r.json()["id"])
    assert s.job_payload(stored) == r.json()
    event = stored.events.get()
    assert event.team_id == stored.team_id and event.created_at == stored.submitted_at
    assert event.data["gpus"] == 16 and len(event.data["request_fingerprint"]) == 64


@pytest.mark.parametrize("accept,query", [
    ("application/json", ""), ("application/json", "?format=api"), ("text/html", ""), ("*/*", ""),
    ("application/json; indent=4", ""), ("text/csv", ""), ("", ""),
])
def test_content_negotiation_shortcut_decides_as_drf_does(accept, query) -> None:
    from rest_framework.negotiation import DefaultContentNegotiation
    from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory

    from controlplane.api.views import ContentNegotiation

    def decide(negotiation: Any) -> Any:
        request = Request(APIRequestFactory().get(f"/api/v1/jobs/{query}", HTTP_ACCEPT=accept))
        try:
            renderer, media_type = negotiation.select_renderer(request, [JSONRenderer(), BrowsableAPIRenderer()])
        except Exception as error:  # noqa: BLE001 - both must refuse alike
            return type(error)
        return type(renderer), media_type

    assert decide(ContentNegotiation()) == decide(DefaultContentNegotiation())
