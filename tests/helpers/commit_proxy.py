"""A TCP proxy in front of PostgreSQL that loses one COMMIT, or only its reply.

Armed, it watches the client's bytes for the simple-protocol message `Q "COMMIT"` (what
psycopg sends to commit). `lose_reply`: the COMMIT reaches the server, the server's answer
is dropped and the client's socket is reset: the transaction committed, the client cannot
know. `lose_commit`: the COMMIT never reaches the server and both sockets are reset: the
server rolls the transaction back. `fired` is set when the fault has happened.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from enum import StrEnum

COMMIT_MESSAGE = b"Q" + struct.pack("!i", 4 + len(b"COMMIT\x00")) + b"COMMIT\x00"


class Fault(StrEnum):
    LOSE_REPLY = "lose_reply"
    LOSE_COMMIT = "lose_commit"


class CommitProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._fault: Fault | None = None
        self._lock = threading.Lock()
        self.fired = threading.Event()
        threading.Thread(target=self._accept, name="commit-proxy", daemon=True).start()

    def arm(self, fault: Fault) -> None:
        with self._lock:
            self._fault = fault

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()

    def _take_fault(self) -> Fault | None:
        with self._lock:
            fault, self._fault = self._fault, None
            return fault

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            cut = threading.Event()  # set: the server's replies are dropped, client reset
            threading.Thread(
                target=self._client_to_server, args=(client, upstream, cut), daemon=True
            ).start()
            threading.Thread(
                target=self._server_to_client, args=(upstream, client, cut), daemon=True
            ).start()

    def _client_to_server(
        self, client: socket.socket, upstream: socket.socket, cut: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                fault = self._take_fault() if COMMIT_MESSAGE in data else None
                if fault is Fault.LOSE_COMMIT:
                    _rst(client)
                    _rst(upstream)
                    self.fired.set()
                    return
                if fault is Fault.LOSE_REPLY:
                    cut.set()
                upstream.sendall(data)
        _close(upstream)

    def _server_to_client(
        self, upstream: socket.socket, client: socket.socket, cut: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if cut.is_set():
                    # The server answered the COMMIT: it committed. The client never hears it.
                    _rst(client)
                    self.fired.set()
                    return
                client.sendall(data)
        _close(client)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def _rst(sock: socket.socket) -> None:
    # SO_LINGER 0: close() sends RST, the peer sees a reset, not an orderly end.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _close(sock)
