"""A small TCP fault proxy between replicas and PostgreSQL: latency, black holes, resets."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field


@dataclass
class _Faults:
    latency_seconds: float = 0.0
    blackhole: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)


class FaultProxy:
    """Forwards 127.0.0.1:<port> to the upstream port; the upstream may change (restarts).

    A black hole stops forwarding in both directions (bytes wait, as TCP would retransmit
    them after a partition heals); a reset closes every connection with RST.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._faults = _Faults()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    # -- faults ---------------------------------------------------------------------------

    def set_latency(self, seconds: float) -> None:
        self._faults.latency_seconds = seconds

    def set_blackhole(self, on: bool) -> None:
        with self._faults.cond:
            self._faults.blackhole = on
            self._faults.cond.notify_all()

    def reset_all(self) -> int:
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for sock in conns:
            _rst(sock)
        return len(conns)

    def close(self) -> None:
        self._closed = True
        self.set_blackhole(False)
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset_all()

    # -- plumbing -------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=2)
                upstream.settimeout(None)
            except OSError:
                _rst(client)
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._wait_for_path()
                if self._faults.latency_seconds:
                    time.sleep(self._faults.latency_seconds)  # the injected fault itself
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with self._lock:
                    self._conns.discard(sock)
                with contextlib.suppress(OSError):
                    sock.close()

    def _wait_for_path(self) -> None:
        with self._faults.cond:
            self._faults.cond.wait_for(lambda: not self._faults.blackhole or self._closed)


def _rst(sock: socket.socket) -> None:
    # SO_LINGER with a zero timeout makes close() send RST instead of FIN. shutdown() first:
    # a close() alone does not wake a pump thread blocked in recv() on the same socket, and
    # that socket would then stay open forever, leaving its client waiting for an answer.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
