"""The replica's HTTP endpoints: /metrics, /healthz, /readyz, on one small server thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from resolver.core.liveness import Probe

log = structlog.get_logger("resolver.telemetry")

ProbeFn = Callable[[], Probe]


class ObservabilityServer:
    """Serves the endpoints until `stop`; port 0 binds an ephemeral port (tests)."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        registry: CollectorRegistry,
        liveness: ProbeFn,
        readiness: ProbeFn,
    ) -> None:
        handler = _handler_class(registry, liveness, readiness)
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="observability-http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> ObservabilityServer:
        self._thread.start()
        log.info("http_endpoints_started", port=self.port)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()


def _handler_class(
    registry: CollectorRegistry, liveness: ProbeFn, readiness: ProbeFn
) -> type[BaseHTTPRequestHandler]:
    routes: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {
        "/metrics": lambda h: _metrics(h, registry),
        "/healthz": lambda h: _probe(h, liveness),
        "/readyz": lambda h: _probe(h, readiness),
    }

    class Handler(BaseHTTPRequestHandler):
        server_version = "resolver"
        sys_version = ""

        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                _send(self, HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"not found\n")
                return
            try:
                route(self)
            except Exception as exc:
                # Masked at the edge: the body never carries a traceback, a DSN or a message.
                log.error("http_endpoint_failed", path=self.path, error=type(exc).__name__)
                _send(self, HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", b"internal error\n")

        def log_message(self, format: str, *args: Any) -> None:
            # http.server writes free text to stderr; the resolver's logs are JSON only.
            pass

    return Handler


def _metrics(handler: BaseHTTPRequestHandler, registry: CollectorRegistry) -> None:
    encoder, content_type = choose_encoder(handler.headers.get("Accept", ""))
    _send(handler, HTTPStatus.OK, content_type, encoder(registry))


def _probe(handler: BaseHTTPRequestHandler, probe: ProbeFn) -> None:
    result = probe()
    status = HTTPStatus.OK if result.ok else HTTPStatus.SERVICE_UNAVAILABLE
    body = json.dumps(result.detail, sort_keys=True).encode("utf-8") + b"\n"
    _send(handler, status, "application/json", body)


def _send(
    handler: BaseHTTPRequestHandler, status: HTTPStatus, content_type: str, body: bytes
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
