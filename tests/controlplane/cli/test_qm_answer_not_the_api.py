"""An error answer that is neither the API's JSON nor an HTML page, from whatever listens at the
address given (an empty 404, a proxy's plain-text refusal): said to be not the Quartermaster API,
with the status, the address and what came, exit 1. It printed `error: Not Found` (an empty 404),
which names neither the address nor that it is no Quartermaster server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.slow


def _serve(status: int, body: bytes, content_type: str | None) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(status)
            if content_type:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def empty_404() -> Iterator[str]:
    yield from _serve(404, b"", None)


@pytest.fixture
def plain_403() -> Iterator[str]:
    yield from _serve(403, b"Forbidden by policy\n", "text/plain")


@pytest.fixture
def plain_503() -> Iterator[str]:
    yield from _serve(503, b"upstream connect error", "text/plain")


def test_an_empty_404_is_said_to_be_not_the_api(qm, empty_404) -> None:
    r = qm("list", url=empty_404, extra_env={"QM_TOKEN": "x"})

    assert r.code == 1 and r.out == ""
    assert r.err.startswith(f"error: 404 Not Found from {empty_404}/api/v1/jobs/")
    assert "an empty answer, not the Quartermaster API; check --url" in r.err


def test_a_plain_text_refusal_is_quoted_and_said_to_be_not_the_api(qm, plain_403) -> None:
    r = qm("status", "5", url=plain_403, extra_env={"QM_TOKEN": "x"})

    assert r.code == 1
    assert "403 Forbidden from" in r.err
    assert "the text 'Forbidden by policy', not the Quartermaster API; check --url" in r.err


def test_a_plain_text_5xx_is_the_server_failing_not_a_wrong_address(qm, plain_503) -> None:
    r = qm("list", url=plain_503, extra_env={"QM_TOKEN": "x"})

    assert r.code == 1
    assert "503 Service Unavailable from" in r.err
    assert "the server failed to answer (the text 'upstream connect error')" in r.err and "check --url" not in r.err
