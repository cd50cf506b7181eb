"""The agent's HTTP client takes its proxy and CA settings from the environment once per session,
not at every request.

requests, left to itself, scans the whole environment at every request (proxies, NO_PROXY, the
CA bundle variables): ~10 % of a busy agent's CPU in bench/true_jobs.py, where the agents'
environment is a developer's. The settings are now read when the session is made (the agent
never changes its environment, and every request goes to the one control plane); a proxy and
NO_PROXY in the environment are still obeyed.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests.sessions

from controlplane.agent.client import AgentClient

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                   "no_proxy", "NO_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


class Seen(http.server.BaseHTTPRequestHandler):
    """Answers every POST `{}` and records its request line's target: a path when asked
    directly, the whole URL when asked as a proxy."""

    targets: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).targets.append(self.path)
        body = json.dumps({}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[str]]]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    handler = type("Handler", (Seen,), {"targets": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.targets
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_agents_requests_read_the_proxy_environment_once_not_at_every_request(
        server: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    url, targets = server
    read: list[str] = []
    environ_proxies = requests.sessions.get_environ_proxies

    def counted(address: str, no_proxy: str | None = None) -> dict[str, str]:
        read.append(address)
        return environ_proxies(address, no_proxy=no_proxy)

    monkeypatch.setattr(requests.sessions, "get_environ_proxies", counted)
    client = AgentClient(url)

    for _ in range(5):
        assert client.heartbeat("n1", "qma_token", {"running": [], "reports": []}) == {}

    assert targets == ["/api/v1/agent/nodes/n1/heartbeat"] * 5
    assert len(read) == 1


def test_a_proxy_in_the_environment_still_carries_the_agents_requests_and_no_proxy_still_bypasses_it(
        server: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, through_proxy = server
    monkeypatch.setenv("HTTP_PROXY", proxy)
    # The control plane's name resolves nowhere: only the proxy can answer for it.
    client = AgentClient("http://control-plane.invalid:8000")

    assert client.heartbeat("n1", "qma_token", {"running": [], "reports": []}) == {}
    assert client.report("n1", "qma_token", {"running": [], "reports": []}) == {}

    assert through_proxy == ["http://control-plane.invalid:8000/api/v1/agent/nodes/n1/heartbeat",
                             "http://control-plane.invalid:8000/api/v1/agent/nodes/n1/report"]

    # NO_PROXY naming the control plane: straight to it, the proxy never asked.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    direct = AgentClient(proxy)
    assert direct.heartbeat("n1", "qma_token", {"running": [], "reports": []}) == {}
    assert through_proxy[-1] == "/api/v1/agent/nodes/n1/heartbeat"
