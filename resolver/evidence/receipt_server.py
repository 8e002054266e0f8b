"""A real HTTP receipt service on 127.0.0.1 for tests: answers what was planted, records calls."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote


@dataclass(frozen=True, slots=True)
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]


class ReceiptServer:
    """`GET /receipts/{key}` answers the planted (status, body); 404 when nothing is planted.

    `hold` makes GETs wait on an event (a slow service) so timeout tests need no sleeps;
    `hold_keys` does so for some receipts only. HTTP/1.1 keep-alive; `connections` counts the
    TCP connections accepted and `max_concurrent` the most requests handled at once. With an
    `ssl_context` it speaks HTTPS only.
    """

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._answers: dict[str, tuple[int, bytes]] = {}
        self._lock = threading.Lock()
        self.seen: list[SeenRequest] = []
        self.hold = threading.Event()
        self.hold_keys: set[str] = set()
        self.release = threading.Event()
        self.default_status: int | None = None
        self.latency_seconds = 0.0
        self.connections = 0
        self.max_concurrent = 0
        self._concurrent = 0
        self._https = ssl_context is not None
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self._server.on_connection = self._connected
        self._server.daemon_threads = True
        # A short poll interval makes stop() prompt: tests start many servers.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{'https' if self._https else 'http'}://{host!s}:{port}"

    def start(self) -> ReceiptServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def plant(self, idempotency_key: str, status: int, body: bytes = b"") -> None:
        with self._lock:
            self._answers[idempotency_key] = (status, body)

    def answers(self) -> dict[str, tuple[int, bytes]]:
        with self._lock:
            return dict(self._answers)

    def methods(self) -> set[str]:
        with self._lock:
            return {r.method for r in self.seen}

    def _record(self, request: SeenRequest) -> None:
        with self._lock:
            self.seen.append(request)

    def _connected(self) -> None:
        with self._lock:
            self.connections += 1

    def _enter(self) -> None:
        with self._lock:
            self._concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self._concurrent)

    def _leave(self) -> None:
        with self._lock:
            self._concurrent -= 1

    def _held(self, path: str) -> bool:
        key = unquote(path.removeprefix("/receipts/"))
        return self.hold.is_set() or key in self.hold_keys

    def _answer(self, path: str) -> tuple[int, bytes]:
        if self.default_status is not None:
            return self.default_status, b""
        if not path.startswith("/receipts/"):
            return 404, b""
        with self._lock:
            return self._answers.get(unquote(path.removeprefix("/receipts/")), (404, b""))


class _QuietServer(ThreadingHTTPServer):
    on_connection: Any = None
    # socketserver's default backlog is 5: a client opening a page's connections at once
    # would see SYNs dropped and retried a second later, which no real service does.
    request_queue_size = 128

    def get_request(self) -> tuple[Any, Any]:
        request = super().get_request()
        if self.on_connection is not None:
            self.on_connection()
        return request

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        # A client that stops reading at its body cap resets the connection: expected here.
        return


def _handler_for(server: ReceiptServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real service answers

        def setup(self) -> None:
            # The TLS handshake runs here, on the connection's own thread, not in accept().
            if isinstance(self.request, ssl.SSLSocket):
                self.request.do_handshake()
            super().setup()

        def _handle(self) -> None:
            server._enter()
            try:
                self._answer_request()
            finally:
                server._leave()

        def _answer_request(self) -> None:
            server._record(SeenRequest(self.command, self.path, dict(self.headers.items())))
            if self.command not in ("GET", "HEAD"):
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if server._held(self.path):
                server.release.wait(30)
            if server.latency_seconds:
                time.sleep(server.latency_seconds)  # the service's own latency
            status, body = server._answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(body)

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:  # noqa: ARG002 - stdlib signature
            return  # quiet: tests read `seen`, not stderr

    return Handler


@contextmanager
def running_receipt_server(ssl_context: ssl.SSLContext | None = None) -> Iterator[ReceiptServer]:
    server = ReceiptServer(ssl_context).start()
    try:
        yield server
    finally:
        server.stop()
