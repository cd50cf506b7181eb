"""The agent endpoints count failed authentications per client address (api/throttling.py,
`agent_auth`, QM_AGENT_AUTH_FAILURES): beyond the limit an address is answered 429 with
Retry-After, and the bootstrap secret is not even checked from it. Only failures count, and a
node's own token is never refused: a healthy fleet behind one address goes on, and an address
is never refused for another's failures. Until 6 Dec nothing was counted: a guesser could try
bootstrap secrets as fast as the server answered."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.controlplane.agent.test_agent_api import REGISTER, heartbeat_url, register_body
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, register_node
from tests.controlplane.sign_in_addresses import fresh_address

LIMIT = 3
HEARTBEATS = "/api/v1/agent/nodes/heartbeats"
WAIT = "/api/v1/agent/nodes/wait"


@pytest.fixture(autouse=True)
def _three_failures_a_minute(settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "agent_auth": f"{LIMIT}/minute"}}


def _post(address: str, token: str, path: str, body: dict[str, Any], **headers: str) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.post(path, body, format="json", REMOTE_ADDR=address, **headers)


def _register(address: str, token: str, name: str = "gpu-new", **headers: str) -> Any:
    return _post(address, token, REGISTER, register_body(name), **headers)


def _refused(response: Any) -> bool:
    return (response.status_code == 429 and int(response["Retry-After"]) >= 1
            and response.json()["retry_after"] >= 1 and "Too many failed agent authentications" in response.json()["detail"])


def test_repeated_wrong_secrets_are_429_and_then_even_the_right_one_is_not_checked(fleet: LoopFleet) -> None:
    guesser = fresh_address()
    for attempt in range(LIMIT):
        assert _register(guesser, f"guess-{attempt}").status_code == 401

    assert _refused(_register(guesser, "guess-again"))
    assert _refused(_register(guesser, BOOTSTRAP))  # the secret is not checked from here now
    assert _refused(_post(guesser, "qma_forged", heartbeat_url("gpu-new"), {}))


def test_another_address_is_not_refused_for_the_guessers_failures(fleet: LoopFleet) -> None:
    guesser, operator = fresh_address(), fresh_address()
    for attempt in range(LIMIT + 2):
        _register(guesser, f"guess-{attempt}")

    assert _register(operator, BOOTSTRAP).status_code == 201
    assert _register(operator, "one-typo", name="gpu-other").status_code == 401  # its own count starts at one


def test_a_nodes_own_token_is_never_refused_even_from_an_address_over_the_limit(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    shared = fresh_address()  # one NAT: a broken agent and a healthy one behind it
    for attempt in range(LIMIT + 1):
        _post(shared, f"qma_stale-{attempt}", heartbeat_url("gpu-01"), {})
    assert _refused(_register(shared, BOOTSTRAP))

    assert _post(shared, token, heartbeat_url("gpu-01"), {}).status_code == 200
    assert _post(shared, token, REGISTER, {"name": "gpu-01"}).status_code in (200, 201)  # its own re-registration


def test_a_healthy_fleet_behind_one_address_is_never_throttled(fleet: LoopFleet) -> None:
    nat = fresh_address()
    tokens = {}
    for i in range(LIMIT * 3):  # many agents register and report through one address
        answer = _register(nat, BOOTSTRAP, name=f"gpu-{i:02d}")
        assert answer.status_code == 201, answer.content
        tokens[f"gpu-{i:02d}"] = answer.json()["token"]
    for name, token in tokens.items():
        assert _post(nat, token, heartbeat_url(name), {}).status_code == 200

    assert _register(nat, BOOTSTRAP, name="gpu-late").status_code == 201


def test_a_forwarded_for_header_is_not_believed_without_trusted_proxies(fleet: LoopFleet) -> None:
    guesser = fresh_address()
    for attempt in range(LIMIT):
        _register(guesser, f"guess-{attempt}", HTTP_X_FORWARDED_FOR=f"192.0.2.{attempt + 1}")

    assert _refused(_register(guesser, "guess", HTTP_X_FORWARDED_FOR="192.0.2.200"))


def test_behind_a_trusted_proxy_the_address_it_recorded_is_counted(fleet: LoopFleet, settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy, guesser, agent = fresh_address(), fresh_address(), fresh_address()
    for attempt in range(LIMIT):
        _register(proxy, f"guess-{attempt}", HTTP_X_FORWARDED_FOR=guesser)

    assert _refused(_register(proxy, "guess", HTTP_X_FORWARDED_FOR=guesser))
    assert _register(proxy, BOOTSTRAP, HTTP_X_FORWARDED_FOR=agent).status_code == 201  # same proxy, another client


def test_a_batch_of_unknown_tokens_counts_and_beyond_the_limit_its_items_are_429(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    address = fresh_address()
    batch = {"nodes": [{"name": "gpu-01", "token": token}, {"name": "gpu-01", "token": "qma_forged"}]}
    for _ in range(LIMIT):
        good, forged = _post(address, "-", HEARTBEATS, batch).json()["results"]
        assert good["status"] == 200 and forged["status"] == 401

    good, forged = _post(address, "-", HEARTBEATS, batch).json()["results"]

    assert good["status"] == 200  # the node's own token goes on
    assert forged["status"] == 429 and forged["retry_after"] >= 1 and "Too many" in forged["detail"]
    assert _refused(_register(address, BOOTSTRAP))  # one counter for the address, whichever endpoint


def test_waits_with_no_token_that_opens_its_node_count_and_beyond_the_limit_are_429(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    address = fresh_address()
    forged = {"nodes": [{"name": "gpu-01", "token": "qma_forged"}], "timeout_s": 0}
    for _ in range(LIMIT):
        assert _post(address, "-", WAIT, forged).status_code == 401

    assert _refused(_post(address, "-", WAIT, forged))
    mixed = _post(address, "-", WAIT, {"nodes": [{"name": "gpu-01", "token": token}, *forged["nodes"]], "timeout_s": 0})
    assert mixed.status_code == 200 and mixed.json()["refused"] == ["gpu-01"]
