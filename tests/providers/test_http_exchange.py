"""The read-only client's engine: a page of GETs at once on one thread, over real sockets.

Against the real receipt server on 127.0.0.1, and against a raw socket server for the
answers a well-behaved HTTP server never gives (a dropped keep-alive, garbage, a cut-off
body).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from providers.http_receipt import HttpReceiptProvider
from resolver.core.domain import DispatchIdentity, FindingKind, ProviderFailure, canonical_json
from resolver.evidence import http_exchange
from resolver.evidence.contract import Scenario
from resolver.evidence.readonly_http import HttpReply, HttpUnavailable, ReadOnlyHttpClient
from resolver.evidence.receipt_server import ReceiptServer
from resolver.evidence.receipts import KeyRing
from tests.helpers.harnesses import closed_port, new_identity, signed


def _plant(server: ReceiptServer, keys: KeyRing) -> DispatchIdentity:
    identity = new_identity(None)
    server.plant(
        identity.idempotency_key, 200, canonical_json(signed(identity, keys, Scenario.SUCCEEDED))
    )
    return identity


def _statuses(replies: list[HttpReply | HttpUnavailable]) -> list[int | str]:
    return [r.status if isinstance(r, HttpReply) else "unavailable" for r in replies]


# -- a page at once ------------------------------------------------------------------------


def test_a_page_is_sent_at_once_over_as_many_connections_as_the_cap_allows(
    receipt_server: ReceiptServer,
) -> None:
    receipt_server.hold.set()  # nothing is answered before the timeout: all must be in flight
    client = ReadOnlyHttpClient(
        receipt_server.base_url, timeout_seconds=1, max_body_bytes=8192, max_in_flight=8
    )
    try:
        replies = client.get_many([f"/receipts/k{n}" for n in range(8)])
    finally:
        client.close()
    assert all(isinstance(r, HttpUnavailable) for r in replies)
    assert receipt_server.max_concurrent == 8  # all eight in flight together, from one thread
    assert receipt_server.connections == 8


def test_a_page_larger_than_the_in_flight_cap_reuses_its_connections(
    receipt_server: ReceiptServer,
) -> None:
    receipt_server.latency_seconds = 0.02
    client = ReadOnlyHttpClient(
        receipt_server.base_url, timeout_seconds=5, max_body_bytes=8192, max_in_flight=2
    )
    try:
        replies = client.get_many([f"/receipts/k{n}" for n in range(9)])
        again = client.get_many([f"/receipts/k{n}" for n in range(3)])
    finally:
        client.close()
    assert _statuses(replies) == [404] * 9 and _statuses(again) == [404] * 3
    assert receipt_server.max_concurrent == 2
    assert receipt_server.connections == 2  # kept alive within the page and across pages
    assert sorted(r.path for r in receipt_server.seen) == sorted(
        [f"/receipts/k{n}" for n in range(9)] + [f"/receipts/k{n}" for n in range(3)]
    )  # each sent exactly once


def test_answers_come_back_in_request_order(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    planted = [_plant(receipt_server, receipt_keys) for _ in range(5)]
    receipt_server.plant("still", 202)
    keys = [
        planted[0].idempotency_key,
        "still",
        "nothing",
        *(i.idempotency_key for i in planted[1:]),
    ]
    client = ReadOnlyHttpClient(receipt_server.base_url, timeout_seconds=5, max_body_bytes=8192)
    try:
        replies = client.get_many([f"/receipts/{k}" for k in keys])
    finally:
        client.close()
    assert _statuses(replies) == [200, 202, 404, 200, 200, 200, 200]
    bodies = [r.body for r in replies if isinstance(r, HttpReply) and r.status == 200]
    answers = receipt_server.answers()
    assert bodies == [answers[i.idempotency_key][1] for i in planted]


def test_a_held_item_times_out_alone_and_the_rest_of_the_page_stands(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    identities = [_plant(receipt_server, receipt_keys) for _ in range(4)]
    receipt_server.hold_keys.add(identities[2].idempotency_key)  # answered when the server stops
    client = ReadOnlyHttpClient(receipt_server.base_url, timeout_seconds=1, max_body_bytes=8192)
    provider = HttpReceiptProvider(client, receipt_keys, 1)
    try:
        findings = provider.inspect_page(identities)
        # The held connection was closed, not pooled: the next page gets a clean one.
        after = provider.inspect_page([identities[0]])
    finally:
        provider.close()
    assert not receipt_server.release.is_set()  # returned while the server still held it
    kinds = [findings[i.dispatch_id].kind for i in identities]
    assert kinds == [FindingKind.VERIFIED_SUCCEEDED] * 2 + [FindingKind.UNAVAILABLE] + [
        FindingKind.VERIFIED_SUCCEEDED
    ]
    assert findings[identities[2].dispatch_id].failure is ProviderFailure.OUTAGE
    assert after[identities[0].dispatch_id].kind is FindingKind.VERIFIED_SUCCEEDED


def test_the_rate_cap_refuses_what_cannot_start_in_time_and_sends_nothing_for_it(
    receipt_server: ReceiptServer,
) -> None:
    client = ReadOnlyHttpClient(
        receipt_server.base_url,
        timeout_seconds=0.75,
        max_body_bytes=8192,
        max_requests_per_second=2,  # burst 1, then one per 500 ms
    )
    try:
        replies = client.get_many([f"/receipts/k{n}" for n in range(6)])
    finally:
        client.close()
    answered = [n for n, r in enumerate(replies) if isinstance(r, HttpReply)]
    refused = [r for r in replies if isinstance(r, HttpUnavailable)]
    # Booked at 0 and 500 ms; the next slot (1 s) is past the timeout, so the other four
    # are refused at once, not sent late.
    assert answered == [0, 1]
    assert all("rate cap" in str(r) for r in refused) and len(refused) == 4
    assert sorted(r.path for r in receipt_server.seen) == [f"/receipts/k{n}" for n in answered]


def test_a_refused_connection_fails_every_item_and_leaves_nothing_open() -> None:
    client = ReadOnlyHttpClient(
        f"http://127.0.0.1:{closed_port()}", timeout_seconds=2, max_body_bytes=8192
    )
    try:
        replies = client.get_many(["/receipts/a", "/receipts/b", "/receipts/c"])
        assert all(isinstance(r, HttpUnavailable) for r in replies)
        assert client.get_many(["/receipts/a"])[0].__class__ is HttpUnavailable  # slots freed
    finally:
        client.close()


def test_name_resolution_that_never_answers_does_not_hold_the_page(
    receipt_server: ReceiptServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fault: a resolver that hangs. Only names take the lookup thread; the port is real.
    hung = threading.Event()

    def never(host: str, port: int, flags: int) -> list[http_exchange.AddressInfo]:
        if flags & socket.AI_NUMERICHOST:
            raise socket.gaierror("not a literal")
        hung.wait(10)
        return []

    monkeypatch.setattr(http_exchange, "_address_info", never)
    port = receipt_server.base_url.rsplit(":", 1)[1]
    client = ReadOnlyHttpClient(
        f"http://receipts.invalid:{port}", timeout_seconds=0.2, max_body_bytes=8192
    )
    try:
        replies = client.get_many(["/receipts/a", "/receipts/b"])
    finally:
        hung.set()
        client.close()
    assert all(isinstance(r, HttpUnavailable) for r in replies)
    assert receipt_server.seen == []


# -- what no well-behaved server sends -----------------------------------------------------


Script = Callable[[socket.socket], None]


@contextmanager
def raw_server(*scripts: Script) -> Iterator[tuple[str, list[int]]]:
    """Accepts connections in turn; the n-th runs the n-th script (the last one repeats).
    Yields the base URL and the accepted-connection counter."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = [0]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            script = scripts[min(accepted[0], len(scripts) - 1)]
            accepted[0] += 1
            threading.Thread(target=_run_script, args=(conn, script), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() above; close() alone would not
        listener.close()
        thread.join(2)


def _run_script(conn: socket.socket, script: Script) -> None:
    with conn, suppress(OSError):
        script(conn)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def answer_once_then_drop(conn: socket.socket) -> None:
    """Keep-alive promised (no Connection: close), then the server closes it while idle."""
    _read_request(conn)
    conn.sendall(OK)


def answer_all(conn: socket.socket) -> None:
    while _read_request(conn):
        conn.sendall(OK)


def test_a_pooled_connection_the_server_dropped_is_not_used(receipt_server: ReceiptServer) -> None:
    with raw_server(answer_once_then_drop, answer_all) as (url, accepted):
        client = ReadOnlyHttpClient(url, timeout_seconds=2, max_body_bytes=8192)
        try:
            first = client.get("/receipts/a")
            _wait_for_close(client)
            second = client.get("/receipts/b")
        finally:
            client.close()
    assert (first.status, second.status) == (200, 200)
    assert accepted[0] == 2  # the dead one was noticed in the pool and replaced


def _wait_for_close(client: ReadOnlyHttpClient) -> None:
    """Until the pooled connection has seen the server's FIN (no sleep: poll on it)."""
    conn = client._pool._idle[0]  # the pool's one idle connection
    with conn.sock.dup() as peek:
        peek.settimeout(2)
        assert peek.recv(1, socket.MSG_PEEK) == b""  # blocks until EOF arrives


@pytest.mark.parametrize(
    "reply",
    [
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",  # cut off mid-body
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        b"",  # accepted, then closed without a word
    ],
)
def test_what_is_not_a_complete_http_answer_is_unavailable(reply: bytes) -> None:
    def script(conn: socket.socket) -> None:
        _read_request(conn)
        conn.sendall(reply)

    with raw_server(script) as (url, _):
        client = ReadOnlyHttpClient(url, timeout_seconds=2, max_body_bytes=8192)
        try:
            replies = client.get_many(["/receipts/a", "/receipts/b"])
        finally:
            client.close()
    assert all(isinstance(r, HttpUnavailable) for r in replies)


def test_chunked_answers_and_a_closing_server_are_read_to_their_end() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    closing = b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"

    def script(conn: socket.socket) -> None:
        _read_request(conn)
        conn.sendall(chunked)
        _read_request(conn)
        conn.sendall(closing)

    with raw_server(script) as (url, accepted):
        client = ReadOnlyHttpClient(url, timeout_seconds=2, max_body_bytes=8192, max_in_flight=1)
        try:
            replies = client.get_many(["/receipts/a", "/receipts/b", "/receipts/c"])
        finally:
            client.close()
    assert [(r.status, r.body) for r in replies if isinstance(r, HttpReply)] == [
        (200, b"abcde"),
        (404, b""),
        (200, b"abcde"),  # after Connection: close, on a new connection
    ]
    assert accepted[0] == 2
