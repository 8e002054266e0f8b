"""Many bodiless HTTP/1.1 exchanges on one thread, over pooled keep-alive connections.

The read-only client's engine. A page of probes goes out over the pooled connections at
once and the answers are read as they arrive, by the calling thread with one selector,
instead of one thread per probe blocked on its socket: a probe costs a send, a receive and
h11's parse, and no thread hand-off. h11 (the sans-I/O HTTP/1.1 state machine under httpx)
does the framing; this module moves bytes and keeps time.

What the client promises is kept here: no exchange outlives the deadline; a connection in
a state not known to be clean (an unread body, a cut-off answer, the deadline mid-exchange)
is closed, never reused; nothing is ever sent twice; at most `max_in_flight` connections
are open or in use per pool; and each request starts at its paced time.
"""

from __future__ import annotations

import contextlib
import errno
import select
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import h11

from resolver.core.errors import ResolverError

_RECV_BYTES = 65_536
# h11's bound on a response head (status line and headers) held before it is complete.
_MAX_HEAD_BYTES = 16_384
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)

Address = tuple[Any, ...]
AddressInfo = tuple[socket.AddressFamily, socket.SocketKind, int, Address]


class HttpUnavailable(ResolverError):
    """No answer: refused, reset, timed out, throttled here, or not HTTP: `unavailable`."""


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int
    body: bytes
    truncated: bool
    """True when the server sent more than the cap; `body` then holds only the cap."""


Result = HttpReply | HttpUnavailable


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where connections go and how they are secured (None: plain HTTP)."""

    host: str
    port: int
    tls: ssl.SSLContext | None

    @property
    def authority(self) -> str:
        """The Host header: the port only when it is not the scheme's default."""
        default = 443 if self.tls is not None else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    def addresses(self, timeout: float) -> list[AddressInfo]:
        """The host's addresses, looked up within `timeout`.

        Looked up per new connection, as a browser does: a service's addresses may move,
        and keep-alive makes new connections rare. The system resolver cannot be given a
        timeout, so a name is looked up on a thread of its own and abandoned if late: no
        caller waits past its deadline for DNS.
        """
        try:
            return _address_info(self.host, self.port, socket.AI_NUMERICHOST)
        except socket.gaierror:
            pass  # a name, not an address literal
        found: list[list[AddressInfo] | BaseException] = []
        done = threading.Event()

        def look_up() -> None:
            try:
                found.append(_address_info(self.host, self.port, 0))
            except BaseException as exc:  # handed to the caller, who raises it
                found.append(exc)
            done.set()

        threading.Thread(target=look_up, name="http-resolve", daemon=True).start()
        if not done.wait(max(0.0, timeout)):
            raise TimeoutError(f"name resolution of {self.host} did not finish in time")
        if isinstance(found[0], BaseException):
            raise found[0]
        return found[0]


def _address_info(host: str, port: int, flags: int) -> list[AddressInfo]:
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=flags)
    return [(family, kind, proto, address) for family, kind, proto, _, address in found]


class _Phase(Enum):
    CONNECTING = "tcp connect in progress"
    HANDSHAKE = "tls handshake in progress"
    IDLE = "open and clean, no exchange"
    WAITING = "open and clean, bound to an exchange whose paced start has not come"
    SENDING = "request partly written"
    RECEIVING = "reading the answer"


class Connection:
    """One non-blocking socket (TLS-wrapped for https) and its HTTP/1.1 state."""

    def __init__(self, sock: socket.socket, phase: _Phase, spare: list[AddressInfo]) -> None:
        self.sock = sock
        self.phase = phase
        self.protocol = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD_BYTES)
        self.unsent = b""
        self.watched = 0  # the selector events this call's selector waits for, if any
        self.spare = spare  # addresses still to try if this connect fails

    @classmethod
    def open(cls, addresses: list[AddressInfo]) -> Connection:
        """Start a TCP connect to the first address without waiting for it."""
        family, kind, proto, address = addresses[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            code = sock.connect_ex(address)
            if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                raise OSError(code, errno.errorcode.get(code, str(code)))
        except BaseException:
            sock.close()
            raise
        return cls(sock, _Phase.CONNECTING, addresses[1:])

    @property
    def fd(self) -> int:
        return self.sock.fileno()

    def dropped(self) -> bool:
        """A pooled connection with something to read was closed (EOF) or sent what no
        request asked for: either way it cannot carry the next exchange."""
        try:
            poll = select.poll()
            poll.register(self.sock, select.POLLIN)
            return bool(poll.poll(0))
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class ConnectionPool:
    """Keep-alive connections to one endpoint, at most `max_in_flight` open or in use.

    Thread-safe: callers on several threads (a page abandoned past its timeout beside the
    next one) share the slots; a connection is only ever used by the caller holding it.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        max_in_flight: int,
        reserve_start: Callable[[float], float | None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._reserve = reserve_start
        self._lock = threading.Lock()
        self._idle: list[Connection] = []
        self._closed = False

    def exchange(
        self,
        requests: Sequence[tuple[str, str]],
        headers: Sequence[tuple[str, str]],
        *,
        deadline: float,
        max_body_bytes: int,
    ) -> list[Result]:
        """Send each (method, target) once and read its answer, all by `deadline`.

        Results are in request order: an `HttpReply`, or an `HttpUnavailable` for one that got
        no usable answer in time, or was never sent (no slot or no paced start in time).
        """
        run = _Run(self, requests, headers, deadline, max_body_bytes)
        try:
            return run.until_done()
        finally:
            run.finish()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- for _Run --------------------------------------------------------------------------------

    def acquire_slot(self, timeout: float) -> bool:
        if timeout <= 0:
            return self._slots.acquire(blocking=False)
        return self._slots.acquire(timeout=timeout)

    def release_slot(self) -> None:
        self._slots.release()

    def reserve_start(self, deadline: float) -> float | None:
        """When the next request may start (now when unpaced); None: not before deadline."""
        if self._reserve is None:
            return 0.0
        return self._reserve(deadline)

    def take_idle(self) -> Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if not conn.dropped():
                return conn
            conn.close()

    def give_back(self, conn: Connection) -> None:
        conn.phase = _Phase.IDLE
        conn.watched = 0  # each call waits with a selector of its own
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def new_connection(self, deadline: float) -> Connection:
        return Connection.open(self.endpoint.addresses(deadline - time.monotonic()))


@dataclass(slots=True)
class _Exchange:
    index: int
    method: str
    target: str
    start_at: float = 0.0
    status: int | None = None
    body: list[bytes] = field(default_factory=list)
    size: int = 0


class _Run:
    """One call's exchanges: each held connection is bound to at most one exchange."""

    def __init__(
        self,
        pool: ConnectionPool,
        requests: Sequence[tuple[str, str]],
        headers: Sequence[tuple[str, str]],
        deadline: float,
        max_body_bytes: int,
    ) -> None:
        self.pool = pool
        self.tls = pool.endpoint.tls
        self.host = pool.endpoint.host
        self.deadline = deadline
        self.cap = max_body_bytes
        self.headers = [("Host", pool.endpoint.authority), *headers]
        self.results: list[Result | None] = [None] * len(requests)
        self.queue = deque(_Exchange(i, m, t) for i, (m, t) in enumerate(requests))
        self.selector = selectors.DefaultSelector()
        self.held: dict[int, Connection] = {}  # fd -> connection this call holds a slot for
        self.bound: dict[int, _Exchange] = {}  # fd -> the exchange its connection carries
        self.slots = 0

    # -- the loop ------------------------------------------------------------------------------

    def until_done(self) -> list[Result]:
        self._take_slots()
        while self.bound:
            now = time.monotonic()
            if now >= self.deadline:
                self._fail_all("no answer before the timeout")
                break
            wake = self.deadline
            for fd in list(self.bound):
                exchange = self.bound.get(fd)
                if exchange is None or self.held[fd].phase is not _Phase.WAITING:
                    continue
                if exchange.start_at <= now:
                    self._send(fd)
                else:
                    wake = min(wake, exchange.start_at)
            if not self.bound:
                break
            for key, _ in self.selector.select(max(0.0, wake - now)):
                self._advance(key.fd)
        return [r if r is not None else HttpUnavailable("not sent") for r in self.results]

    def finish(self) -> None:
        """Clean connections go back to the pool, every other one is closed; slots freed."""
        self.selector.close()
        for fd in list(self.held):
            conn = self.held.pop(fd)
            if conn.phase in (_Phase.IDLE, _Phase.WAITING):  # nothing sent on it, or all read
                self.pool.give_back(conn)
            else:
                conn.close()
        self.bound.clear()
        for _ in range(self.slots):
            self.pool.release_slot()
        self.slots = 0

    # -- slots, connections and exchanges ------------------------------------------------------

    def _take_slots(self) -> None:
        """A slot per request if free now; else at least one, waited for up to the deadline
        (other callers hold the rest, and this call's exchanges then share what it has)."""
        wanted = len(self.queue)
        while self.slots < wanted and self.pool.acquire_slot(0.0):
            self.slots += 1
        if self.slots == 0 and wanted:
            if not self.pool.acquire_slot(self.deadline - time.monotonic()):
                self._fail_queue("in-flight cap: no free slot before the timeout")
                return
            self.slots = 1
        for _ in range(self.slots):
            self._bind(None)

    def _bind(self, conn: Connection | None) -> None:
        """Give the next queued exchange a connection: `conn` (clean, just used by this
        call), a pooled one or a new one. With nothing left to start, the slot goes back."""
        start_at = self.pool.reserve_start(self.deadline) if self.queue else None
        if start_at is None:
            # The pacer's schedule only moves later: nothing queued can start in time.
            self._fail_queue("rate cap: no request slot before the timeout")
            if conn is not None:
                self.pool.give_back(conn)
            self.slots -= 1
            self.pool.release_slot()
            return
        exchange = self.queue.popleft()
        exchange.start_at = start_at
        if conn is None:
            conn = self.pool.take_idle()
        if conn is None:
            try:
                conn = self.pool.new_connection(self.deadline)
            except OSError as exc:
                self.results[exchange.index] = HttpUnavailable(f"no connection: {_name(exc)}")
                self._bind(None)  # the slot stays this call's, for the next exchange
                return
            self._watch(conn, selectors.EVENT_WRITE)
        else:
            conn.phase = _Phase.WAITING
        self.held[conn.fd] = conn
        self.bound[conn.fd] = exchange

    def _settle(self, fd: int, result: Result, *, clean: bool) -> None:
        """Record an exchange's result; its connection (if clean) or its slot goes on to
        the next queued exchange."""
        exchange = self.bound.pop(fd)
        self.results[exchange.index] = result
        conn = self.held.pop(fd)
        self._unwatch(conn)
        if clean:
            conn.protocol.start_next_cycle()
            conn.phase = _Phase.IDLE
            if not self.queue:
                self.pool.give_back(conn)
                self.slots -= 1
                self.pool.release_slot()
                return
            self._bind(conn)
            return
        conn.close()
        if self.queue:
            self._bind(None)
        else:
            self.slots -= 1
            self.pool.release_slot()

    def _fail_queue(self, why: str) -> None:
        while self.queue:
            self.results[self.queue.popleft().index] = HttpUnavailable(why)

    def _fail_all(self, why: str) -> None:
        self._fail_queue(why)
        for exchange in self.bound.values():
            self.results[exchange.index] = HttpUnavailable(why)
        # finish() closes the connections that were mid-exchange: no one can trust them.

    def _unwatch(self, conn: Connection) -> None:
        if conn.watched:
            self.selector.unregister(conn.sock)
            conn.watched = 0

    def _watch(self, conn: Connection, events: int) -> None:
        # Registration is tracked here: asking the selector costs a KeyError (with the
        # socket's repr) per miss.
        if conn.watched == events:
            return
        if conn.watched:
            self.selector.modify(conn.sock, events)
        else:
            self.selector.register(conn.sock, events)
        conn.watched = events

    # -- one connection's progress -------------------------------------------------------------

    def _advance(self, fd: int) -> None:
        conn = self.held.get(fd)
        if conn is None or fd not in self.bound:
            return
        try:
            if conn.phase is _Phase.CONNECTING:
                self._connected(fd, conn)
            elif conn.phase is _Phase.HANDSHAKE:
                self._handshake(fd, conn)
            elif conn.phase is _Phase.SENDING:
                self._write(conn)
            elif conn.phase is _Phase.RECEIVING:
                self._read(fd, conn)
        except (OSError, h11.ProtocolError) as exc:
            self._settle(fd, HttpUnavailable(f"no usable answer: {_name(exc)}"), clean=False)

    def _connected(self, fd: int, conn: Connection) -> None:
        code = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code and conn.spare:
            self._next_address(fd, conn)
            return
        if code:
            raise OSError(code, errno.errorcode.get(code, str(code)))
        if self.tls is None:
            self._ready(fd, conn)
            return
        self._unwatch(conn)
        conn.sock = self.tls.wrap_socket(
            conn.sock, server_hostname=self.host, do_handshake_on_connect=False
        )
        conn.phase = _Phase.HANDSHAKE
        self._handshake(fd, conn)

    def _next_address(self, fd: int, conn: Connection) -> None:
        """The connect failed (say ::1 where only 127.0.0.1 listens): try the next address
        for the same exchange, as socket.create_connection would."""
        fresh = Connection.open(conn.spare)  # raising, it settles the exchange as failed
        self._unwatch(conn)
        conn.close()
        exchange = self.bound.pop(fd)
        del self.held[fd]
        self.held[fresh.fd] = fresh
        self.bound[fresh.fd] = exchange
        self._watch(fresh, selectors.EVENT_WRITE)

    def _handshake(self, fd: int, conn: Connection) -> None:
        assert isinstance(conn.sock, ssl.SSLSocket)
        try:
            conn.sock.do_handshake()  # verifies the chain and the host name
        except ssl.SSLWantReadError:
            self._watch(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, selectors.EVENT_WRITE)
            return
        self._ready(fd, conn)

    def _ready(self, fd: int, conn: Connection) -> None:
        """Connected (and verified): send now if the exchange's paced start has come."""
        self._unwatch(conn)
        conn.phase = _Phase.WAITING
        if self.bound[fd].start_at <= time.monotonic():
            self._send(fd)

    def _send(self, fd: int) -> None:
        conn, exchange = self.held[fd], self.bound[fd]
        try:
            request = h11.Request(
                method=exchange.method, target=exchange.target, headers=self.headers
            )
            conn.unsent = (conn.protocol.send(request) or b"") + (
                conn.protocol.send(h11.EndOfMessage()) or b""
            )
        except h11.ProtocolError as exc:
            self._settle(fd, HttpUnavailable(f"not sent: {_name(exc)}"), clean=False)
            return
        conn.phase = _Phase.SENDING
        self._watch(conn, selectors.EVENT_WRITE)
        self._advance(fd)  # a socket with room takes it now, without a trip through select

    def _write(self, conn: Connection) -> None:
        try:
            sent = conn.sock.send(conn.unsent)
        except _WOULD_BLOCK:
            return
        conn.unsent = conn.unsent[sent:]
        if not conn.unsent:
            conn.phase = _Phase.RECEIVING
            self._watch(conn, selectors.EVENT_READ)

    def _read(self, fd: int, conn: Connection) -> None:
        # Until the socket is drained: a TLS socket may hold decrypted bytes that select
        # would not report.
        while True:
            try:
                data = conn.sock.recv(_RECV_BYTES)
            except _WOULD_BLOCK:
                return
            conn.protocol.receive_data(data)
            if self._parse(fd, conn):
                return
            if not data:
                why = "the server closed the connection before answering"
                self._settle(fd, HttpUnavailable(f"no usable answer: {why}"), clean=False)
                return

    def _parse(self, fd: int, conn: Connection) -> bool:
        """Take the events h11 has parsed; True once the exchange is settled."""
        exchange = self.bound[fd]
        while True:
            event = conn.protocol.next_event()
            if event is h11.NEED_DATA:
                return False
            if isinstance(event, h11.Response):
                exchange.status = event.status_code
            elif isinstance(event, h11.Data):
                exchange.body.append(bytes(event.data))
                exchange.size += len(event.data)
                if exchange.size > self.cap:
                    # Over the cap: the rest is never read, so the connection is closed.
                    body = b"".join(exchange.body)[: self.cap]
                    self._settle(fd, HttpReply(_status(exchange), body, True), clean=False)
                    return True
            elif isinstance(event, h11.EndOfMessage):
                answer = HttpReply(_status(exchange), b"".join(exchange.body), False)
                state = conn.protocol
                clean = state.our_state is h11.DONE and state.their_state is h11.DONE
                self._settle(fd, answer, clean=clean)
                return True
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                why = "the server closed the connection before answering"
                self._settle(fd, HttpUnavailable(f"no usable answer: {why}"), clean=False)
                return True
            # An InformationalResponse (1xx) is not the answer: the real one follows.


def _status(exchange: _Exchange) -> int:
    assert exchange.status is not None  # h11 yields Data and EndOfMessage after a Response
    return exchange.status


def _name(exc: BaseException) -> str:
    return type(exc).__name__
