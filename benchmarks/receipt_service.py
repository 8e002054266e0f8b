"""A receipt service for the `http_receipt` benchmark: fixed latency, keep-alive, counters.

`python -m benchmarks.receipt_service RECEIPTS LATENCY_MS STATS` serves
`GET /receipts/{idempotency_key}` from RECEIPTS (one `key<TAB>body` line each) after
LATENCY_MS, over HTTP/1.1 keep-alive, on a free 127.0.0.1 port that it prints as
`ready PORT`. For every bearer token it records when each connection was opened and when
each request arrived; SIGTERM writes them to STATS (JSON) and ends it.

asyncio, so that hundreds of slow requests in flight cost one thread: the service must not
be what the benchmark measures.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote

_MAX_HEADER_LINES = 64


class Counters:
    def __init__(self) -> None:
        self.connections: dict[str, list[float]] = defaultdict(list)
        self.requests: dict[str, list[float]] = defaultdict(list)

    def document(self) -> dict[str, dict[str, list[float]]]:
        tokens = set(self.connections) | set(self.requests)
        return {
            t: {"connections": self.connections[t], "requests": self.requests[t]} for t in tokens
        }


def _now_ms() -> float:
    return time.time() * 1000


async def _serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    receipts: dict[str, bytes],
    latency: float,
    counters: Counters,
) -> None:
    opened = _now_ms()
    token: str | None = None
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                return
            arrived = _now_ms()
            headers: dict[str, str] = {}
            for _ in range(_MAX_HEADER_LINES):
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            if token is None:
                # A connection belongs to the replica whose token its first request carries.
                token = headers.get("authorization", "").removeprefix("Bearer ") or "-"
                counters.connections[token].append(opened)
            counters.requests[token].append(arrived)
            method, path, *_ = [*request_line.decode("latin-1").split(" "), "", ""]
            await asyncio.sleep(latency)
            body = b""
            status = "404 Not Found"
            if method in ("GET", "HEAD") and path.startswith("/receipts/"):
                found = receipts.get(unquote(path.removeprefix("/receipts/")))
                if found is not None:
                    status, body = "200 OK", found
            elif method not in ("GET", "HEAD"):
                status = "405 Method Not Allowed"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode("latin-1")
            writer.write(head + (body if method == "GET" else b""))
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


def load_receipts(path: Path) -> dict[str, bytes]:
    receipts = {}
    with path.open("rb") as lines:
        for line in lines:
            key, _, body = line.rstrip(b"\n").partition(b"\t")
            receipts[key.decode("utf-8")] = body
    return receipts


async def _main(receipts_path: Path, latency_ms: float, stats_path: Path) -> None:
    receipts = load_receipts(receipts_path)
    counters = Counters()
    latency = latency_ms / 1000

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _serve_connection(reader, writer, receipts, latency, counters)

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print(f"ready {port}", flush=True)
    async with server:
        await stop.wait()
    stats_path.write_text(json.dumps(counters.document()), encoding="utf-8")


def main(argv: list[str]) -> None:
    asyncio.run(_main(Path(argv[0]), float(argv[1]), Path(argv[2])))


if __name__ == "__main__":
    main(sys.argv[1:])
