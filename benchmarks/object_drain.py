"""One drain through `object_receipt`: K due controls, each with its signed receipt object in
an S3-compatible server on loopback (moto's server mode, a separate process), drained by R
`resolver run` processes; resolutions/s from the database's clock.

    python -m benchmarks.object_drain [--database-url URL] [-K 2000] [-R 2] [--page-size 16]

Without --database-url a private cluster is started (as `benchmarks.run` does). moto serves
requests from one Python process, so the figure is bounded by it: a real store answers a GET
in a few milliseconds from many servers. Needs the `s3` extra and moto (the `test` extra).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from benchmarks import seed
from benchmarks.phases import DrainCase, DrainResult, connect, drain, prepare_drain, vacuum
from benchmarks.server import Databases, open_server
from resolver.evidence.object_store import ObjectStoreSettings, make_client, receipt_key
from resolver.evidence.receipts import encode_receipt

ACTION = "bench.object"
BUCKET = "bench-receipts"
PREFIX = "receipts/"
# Static test credentials for the local moto server only (it does not check them here).
MOTO_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_SERVER = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
"""


def start_store() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    return process, f"http://127.0.0.1:{int(process.stdout.readline())}"


def store_settings(endpoint: str) -> dict[str, Any]:
    return {
        "bucket": BUCKET,
        "prefix": PREFIX,
        "endpoint_url": endpoint,
        "addressing_style": "path",
        "timeout_seconds": 5,
        # The seeded leases ended before the objects are published (a crashed executor would
        # have published within its lease): the provider would read them as published late.
        # This allowance covers the publication (under a minute for the default K).
        "max_clock_skew_seconds": 60,
    }


def publish_all(url: str, endpoint: str, due_ms: int) -> int:
    """One receipt object per seeded dispatch, as each crashed executor published it."""
    import botocore.session

    session = botocore.session.get_session()
    session.set_credentials(MOTO_ENV["AWS_ACCESS_KEY_ID"], MOTO_ENV["AWS_SECRET_ACCESS_KEY"])
    settings = ObjectStoreSettings(**store_settings(endpoint))
    client: Any = make_client(settings, max_pool=16, read_only=False, session=session)
    client.create_bucket(Bucket=BUCKET)
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    receipts = list(
        seed.signed_receipts(url, prefix="b-", keys=seed.BENCH_KEYS, finished_ms=due_ms + 500)
    )

    def put(item: tuple[dict[str, Any], dict[str, Any]]) -> None:
        row, receipt = item
        key = receipt_key(PREFIX, row["project_id"], row["dispatch_id"])
        client.put_object(Bucket=BUCKET, Key=key, Body=encode_receipt(receipt), IfNoneMatch="*")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, receipts))
    client.close()
    return len(receipts)


def run(database_url: str | None, count: int, replicas: int, page_size: int) -> DrainResult:
    work_dir = Path(tempfile.mkdtemp(prefix="resolver-object-bench-"))
    store, endpoint = start_store()
    try:
        with open_server(database_url, durable=True) as server:
            dbs = Databases(server)
            try:
                url = dbs.create("object", migrated=True)
                case = DrainCase(f"object-p{page_size}", "resolver", page_size, ACTION)
                prepare_drain(url, case, count)
                with connect(url) as conn:
                    due_ms = seed.db_now_ms(conn)
                print(f"published {publish_all(url, endpoint, due_ms)} receipt objects")
                vacuum(url, checkpoint=True)
                config = work_dir / "providers.yaml"
                action = {"provider": "object_receipt", **store_settings(endpoint)}
                config.write_text(yaml.safe_dump({"action_types": {ACTION: action}}))
                env = {
                    "RESOLVER_DATABASE_URL": url,
                    "RESOLVER_CONFIG": str(config),
                    **seed.keys_env(seed.BENCH_KEYS),
                    **MOTO_ENV,
                }
                return drain(
                    url,
                    case,
                    count=count,
                    processes=replicas,
                    work_dir=work_dir,
                    replica_env=env,
                    statements=False,
                    max_seconds=600,
                    all_server_processes=server.private,
                    prepared=True,
                )
            finally:
                dbs.close()
    finally:
        assert store.stdin is not None
        store.stdin.close()
        store.wait(timeout=10)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("-K", "--count", type=int, default=2_000)
    p.add_argument("-R", "--replicas", type=int, default=2)
    p.add_argument("--page-size", type=int, default=16)
    args = p.parse_args(argv)
    result = run(args.database_url, args.count, args.replicas, args.page_size)
    print(
        f"object_receipt drain: {result.resolved}/{result.seeded} resolved in "
        f"{result.seconds:.1f} s = {result.per_second:,.0f} resolutions/s "
        f"({args.replicas} replicas, page {args.page_size}, moto on loopback); replica CPU "
        f"{_ms(result.process_cpu_us)} ms per resolution"
    )


def _ms(cpu_us: float | None) -> str:
    return "?" if cpu_us is None else f"{cpu_us / 1000:.2f}"


if __name__ == "__main__":
    main()
