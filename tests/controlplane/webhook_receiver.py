"""A real HTTP receiver for the webhook tests: http.server on 127.0.0.1 in a thread.

It records every POST (headers and body) and answers with the next status of `statuses`
(200 once they run out). `on_post`, when given, is called with each POST before it is answered
(the POST still on the wire: a test changes the hook there). `hang=True` accepts the connection
and never answers (a receiver that is up but stuck), counting the POSTs it holds (`hung`);
`dead_url()` is a port nothing listens on.
The receiver is on a loopback address, which a hook may reach only when
QM_WEBHOOK_ALLOWED_NETWORKS holds it: tests that deliver to it allow `LOOPBACK`.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOOPBACK = "127.0.0.1/32"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    statuses: list[int] = field(default_factory=list)
    hang: bool = False
    certfile: str = ""  # with `keyfile`: https, with this certificate
    keyfile: str = ""
    on_post: Callable[[Received], None] | None = None
    received: list[Received] = field(default_factory=list)
    hung: int = 0  # with `hang`: the POSTs held unanswered
    url: str = ""
    _server: ThreadingHTTPServer | None = None
    _release: threading.Event = field(default_factory=threading.Event)
    _got: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if receiver.hang:
                    with receiver._got:
                        receiver.hung += 1
                    receiver._release.wait(30)
                    return
                got = Received(self.path, {k: v for k, v in self.headers.items()}, body, time.monotonic())
                if receiver.on_post is not None:
                    receiver.on_post(got)
                with receiver._got:
                    receiver.received.append(got)
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver._got.notify_all()
                self.send_response(status)
                reply = b"ok" if status < 300 else b"receiver says no"
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gives up on TLS (the tests of refused certificates) is no news

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        scheme = "http"
        if self.certfile:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.certfile, self.keyfile)
            # The handshake happens on the handler's thread, so a client that fails it stops nothing.
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True,
                                                      do_handshake_on_connect=False)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}/hook"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        with self._got:
            self._got.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)

    def events(self) -> list[str]:
        return [r.json()["event"] for r in self.received]


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def running(**kw: Any) -> Iterator[Receiver]:
    receiver = Receiver(**kw).start()
    try:
        yield receiver
    finally:
        receiver.stop()
