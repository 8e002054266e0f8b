"""A real HTTP receipt service on 127.0.0.1 for tests: answers what was planted, records calls."""

from __future__ import annotations

import threading
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

    `hold` makes GETs wait on an event (a slow service) so timeout tests need no sleeps.
    """

    def __init__(self) -> None:
        self._answers: dict[str, tuple[int, bytes]] = {}
        self._lock = threading.Lock()
        self.seen: list[SeenRequest] = []
        self.hold = threading.Event()
        self.release = threading.Event()
        self.default_status: int | None = None
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval makes stop() prompt: tests start many servers.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

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

    def _answer(self, path: str) -> tuple[int, bytes]:
        if self.default_status is not None:
            return self.default_status, b""
        if not path.startswith("/receipts/"):
            return 404, b""
        with self._lock:
            return self._answers.get(unquote(path.removeprefix("/receipts/")), (404, b""))


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        # A client that stops reading at its body cap resets the connection: expected here.
        return


def _handler_for(server: ReceiptServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            server._record(SeenRequest(self.command, self.path, dict(self.headers.items())))
            if self.command not in ("GET", "HEAD"):
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if server.hold.is_set():
                server.release.wait(30)
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
def running_receipt_server() -> Iterator[ReceiptServer]:
    server = ReceiptServer().start()
    try:
        yield server
    finally:
        server.stop()
