"""The Node.js SDK leaves the binding behind: a Node executor (npm's real `pg`) reads its
identity under the live lease, sends its request with `idempotencyBinding`, the service
records it, and the executor is SIGKILLed before completing; a real `resolver run --once`
settles it through `idempotency_record` from the service's own record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from resolver.executor.client import ExecutionClient
from tests.helpers.database import SQL, new_spec
from tests.helpers.downstream import PostgresService, settings
from tests.helpers.stores import Storage

SECRET = "6a" * 32
EXECUTOR = """
import pg from "pg";
import { Executor, idempotencyBinding, parseKey } from "./index.js";

const [dispatchId] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const key = parseKey(process.env.RECEIPT_KEY);
const executor = new Executor({ pool, owner: "node-binder", key, leaseMs: 3000 });
await executor.run(dispatchId, async (effect) => {
  const identity = await effect.identity();
  // The request, with Idempotency-Key and Resolver-Binding: the service records both.
  await pool.query(
    "INSERT INTO idempotency_records (idempotency_key, binding, status, result_code) VALUES ($1, $2, 'completed', 'refunded')",
    [identity.idempotency_key, idempotencyBinding(identity, key)],
  );
  process.kill(process.pid, "SIGKILL");
});
"""


def test_a_node_executor_s_binding_settles_its_crash_from_the_service_record(
    node_sdk: Path, store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    service = PostgresService(database_url)
    try:
        spec = new_spec("refunds.create")
        ExecutionClient(store, owner="platform").create_dispatch(spec)
        (node_sdk / "binding-executor.mjs").write_text(EXECUTOR)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(Path.home()),
            "DATABASE_URL": database_url,
            "RECEIPT_KEY": f"node-bind={SECRET}",
        }
        done = subprocess.run(
            ["node", "binding-executor.mjs", spec.dispatch_id],
            cwd=node_sdk,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert sql.execution(spec.dispatch_id)["state"] == "executing"
        deadline = time.monotonic() + 30
        while not sql.one(
            "SELECT lease_expires_at_ms <= resolver_now_ms(NULL) AS expired"
            " FROM approved_action_executions WHERE dispatch_id = %s",
            spec.dispatch_id,
        )["expired"]:
            assert time.monotonic() < deadline, "the lease never ended"
            time.sleep(0.05)
        config = tmp_path / "providers.yaml"
        config.write_text(
            yaml.safe_dump({"action_types": {"refunds.create": settings(service, "READER_URL")}})
        )
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | {
            "RESOLVER_DATABASE_URL": database_url,
            "RESOLVER_CONFIG": str(config),
            "RESOLVER_RECEIPT_KEYS": f"node-bind={SECRET}",
            "READER_URL": service.reader_url(),
        }
        ran = subprocess.run(
            [sys.executable, "-m", "resolver", "run", "--once"],
            env=run_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        execution = sql.execution(spec.dispatch_id)
        assert (execution["state"], execution["result_code"]) == ("succeeded", "refunded")
        assert [r["source"] for r in sql.resolutions(spec.dispatch_id)] == ["automatic"]
    finally:
        service.close()
