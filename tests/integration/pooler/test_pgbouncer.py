"""Every face of the resolver through a real PgBouncer, in transaction and in session mode,
configured as CloudNativePG's pooler is (`ignore_startup_parameters = extra_float_digits,
options`): migrate, the demo (executor SDK and providers), status, real `resolver run`
replicas, the API, and the lock timeout that must still fire behind the pooler."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import Outcome
from resolver.core.errors import LeaseLost, LockTimeout
from resolver.db.connect import Pooler
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import ExecutionClient
from resolver.executor.receipts import write_receipt
from resolver.human.api import RateLimiter, create_app
from resolver.human.auth import TokenVerifier
from tests.helpers.api import auth, body
from tests.helpers.cli import RESOLVER
from tests.helpers.cli import run as resolver_cli
from tests.helpers.database import SQL, new_spec
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.pgbouncer import Bouncer, pgbouncer
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage
from tests.helpers.telemetry import free_port, wait_for

KID = "k-pool"
REPLICAS = 3
CRASHED = 24


@pytest.fixture(scope="module", params=["transaction", "session"])
def bouncer(request: pytest.FixtureRequest, pg_server: str) -> Iterator[Bouncer]:
    with pgbouncer(pg_server, request.param, users=["postgres"]) as running:
        yield running


def pooled_env(bouncer: Bouncer, url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    env["RESOLVER_DATABASE_URL"] = bouncer.url(url)
    env["RESOLVER_DATABASE_POOLER"] = bouncer.mode
    env.update(extra)
    return env


def test_migrate_demo_and_status_through_the_pooler(
    bouncer: Bouncer, databases: DatabaseFactory
) -> None:
    url = databases.create_empty()
    env = pooled_env(bouncer, url)
    migrated = resolver_cli(env, "migrate", timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    # Twice: the second run repeats every statement of the first (psycopg would have
    # prepared them after five executions, on server connections the pooler hands around).
    for _ in range(2):
        demo = resolver_cli(env, "demo", "--count", "8", timeout=120)
        assert demo.returncode == 0, demo.stderr
        assert "verified_succeeded" in demo.stdout, demo.stdout
    status = resolver_cli(env, "status", "--json")
    assert status.returncode == 0, status.stderr


def test_an_undeclared_pooler_that_drops_the_timeouts_is_refused(
    bouncer: Bouncer, database_url: str
) -> None:
    env = pooled_env(bouncer, database_url, RESOLVER_DATABASE_POOLER="none")
    done = resolver_cli(env, "status")
    assert done.returncode == 2, done.stderr
    assert "set RESOLVER_DATABASE_POOLER=transaction (or session)" in done.stderr


def crash_with_receipts(url: str, keys: KeyRing, count: int) -> list[str]:
    """Executions whose executor wrote its mutation's receipt and died before completing.

    Their half-second leases make them due soon after; on a loaded host a lease can lapse
    before its receipt is written, and the protocol then refuses the write (the fence this
    rig must not bend). Such an attempt is left behind, as an executor that lost its lease
    leaves it, and another takes its place until `count` hold a receipt.
    """
    ids: list[str] = []
    with Storage(url) as store:
        client = ExecutionClient(store, owner="executor-1", lease_seconds=0.5)
        for _ in range(count * 4):
            spec = client.create_dispatch(new_spec("db.mutation"))
            try:
                lease = client.start(client.lease(spec.dispatch_id))
                with psycopg.connect(url) as conn, conn.transaction():
                    write_receipt(
                        conn,
                        lease,
                        outcome=Outcome.SUCCEEDED,
                        result_code="applied",
                        receipt_id=f"m-{lease.dispatch_id}",
                        keys=keys,
                    )
            except LeaseLost:
                continue
            ids.append(lease.dispatch_id)
            if len(ids) == count:
                return ids
    raise AssertionError(f"only {len(ids)} of {count} receipts written before their leases lapsed")


def cycles_completed(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('resolver_cycles_total{result="completed"}')
    )


def test_replicas_stay_up_and_settle_through_the_pooler(
    bouncer: Bouncer, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    key_hex = secrets.token_hex(32)
    keys = KeyRing({KID: bytes.fromhex(key_hex)}, signing_kid=KID)
    ids = crash_with_receipts(database_url, keys, CRASHED)
    config = tmp_path / "providers.yaml"
    config.write_text("action_types:\n  db.mutation: {provider: internal_mutation}\n")
    ports = [free_port() for _ in range(REPLICAS)]
    replicas = [
        subprocess.Popen(
            [*RESOLVER, "run"],
            env=pooled_env(
                bouncer,
                database_url,
                RESOLVER_CONFIG=str(config),
                RESOLVER_RECEIPT_KEYS=f"{KID}={key_hex}",
                RESOLVER_REPLICA_ID=f"pooled-{n}",
                RESOLVER_PAGE_SIZE="2",
                RESOLVER_CADENCE_SECONDS="0.05",
                RESOLVER_HTTP_HOST="127.0.0.1",
                RESOLVER_HTTP_PORT=str(port),
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, port in enumerate(ports)
    ]
    try:

        def settled_and_busy() -> bool | None:
            exited = [r for r in replicas if r.poll() is not None]
            assert not exited, [r.stderr.read() for r in exited if r.stderr]
            states = sql.all(
                "SELECT count(*) AS n FROM approved_action_executions"
                " WHERE dispatch_id = ANY(%s) AND state = 'succeeded'",
                ids,
            )
            # Far more than psycopg's five executions before it prepares a statement.
            busy = all(cycles_completed(port) >= 20 for port in ports)
            return True if states[0]["n"] == len(ids) and busy else None

        wait_for("every crash settled by busy replicas", settled_and_busy, timeout_seconds=120)
    finally:
        for replica in replicas:
            replica.send_signal(signal.SIGTERM)
        codes = [replica.wait(timeout=60) for replica in replicas]
    errors = [replica.stderr.read() if replica.stderr else "" for replica in replicas]
    assert codes == [0] * REPLICAS, errors
    assert not any("DuplicatePreparedStatement" in e for e in errors), errors


def test_the_api_decides_through_the_pooler(
    bouncer: Bouncer,
    database_url: str,
    manual_item: tuple[str, int],
    jwks_file: Path,
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
) -> None:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    pooled = Storage(bouncer.url(database_url), max_connections=2, pooler=Pooler(bouncer.mode))
    dispatch_id, version = manual_item
    with (
        pooled,
        Server(
            create_app(pooled, verifier, signer=TEST_SIGNER, limiter=RateLimiter(per_minute=50))
        ) as api,
    ):
        for _ in range(8):  # past psycopg's prepare threshold
            queue = api.get("/v1/manual-queue", headers=auth(token(signing_key)))
            assert queue.status_code == 200, queue.text
            assert [i["dispatch_id"] for i in queue.json()["items"]] == [dispatch_id]
        url = f"/v1/dispatches/{dispatch_id}/resolution"
        decided = api.post(url, json=body(version), headers=auth(token(signing_key)))
        assert decided.status_code == 200, decided.text
        assert decided.json()["result"] == "committed"
    assert sql.execution(dispatch_id)["state"] == "failed"


def test_the_lock_timeout_fires_through_the_pooler(
    bouncer: Bouncer, database_url: str, store: Storage
) -> None:
    pooled = Storage(
        bouncer.url(database_url),
        max_connections=2,
        lock_timeout_ms=300,
        statement_timeout_ms=8_000,
        pooler=Pooler(bouncer.mode),
    )
    with pooled:
        client = ExecutionClient(pooled, owner="executor-1", lease_seconds=30)
        spec = client.create_dispatch(new_spec())
        lease = client.start(client.lease(spec.dispatch_id))
        for _ in range(6):  # past psycopg's prepare threshold
            lease = client.renew(lease)
        # Another session (an operator's open transaction) holds the execution row.
        with psycopg.connect(database_url) as holder, holder.transaction():
            holder.execute(
                "SELECT 1 FROM approved_action_executions WHERE dispatch_id = %s FOR UPDATE",
                (spec.dispatch_id,),
            )
            started = time.monotonic()
            with pytest.raises(LockTimeout):
                client.renew(lease)
            waited = time.monotonic() - started
    # The configured 300 ms, not the 8 s statement timeout and not forever.
    assert 0.25 <= waited < 4, waited
