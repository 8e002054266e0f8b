"""`resolver demo --live`: three real replicas, a crashing executor, a killed replica and a
human decision in the operator console, watched live until Ctrl-C.

Everything the demo starts is the product as users run it: `resolver run` and `resolver api`
processes configured only by `RESOLVER_*` variables, the `internal_mutation` provider over
signed receipts, and the real executor API. Only the identity provider is a stand-in: the demo
mints its own short-lived strong-authentication token, clearly marked demo-only.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resolver.core.domain import BacklogSnapshot
from resolver.db import migrate as migrations
from resolver.db import session
from resolver.db.connect import pooler_from_env
from resolver.db.store import PostgresHandle, Stores
from resolver.demo import localpg
from resolver.demo.executor import INTERNAL, PROJECT, SHELL, ExecutorSimulator, SimulatorCounts
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import ExecutionClient
from resolver.telemetry.metrics import DEFAULT_COUNT_CAP

DEMO_ISSUER = "https://resolver-demo.invalid"  # .invalid: can never be a real issuer
DEMO_AUDIENCE = "resolver-demo-console"
DEMO_USER = "demo-operator"
EXECUTOR_LEASE_SECONDS = 1.0
# Short leases and backoff so a newcomer sees recovery in seconds, not minutes.
REPLICA_ENV = {
    "RESOLVER_CADENCE_SECONDS": "0.25",
    "RESOLVER_RECOVERY_LEASE_SECONDS": "4",
    "RESOLVER_COMMIT_MARGIN_SECONDS": "1",
    "RESOLVER_DEFAULT_PROVIDER_TIMEOUT_SECONDS": "2",
    "RESOLVER_BACKOFF_BASE_SECONDS": "1",
    "RESOLVER_BACKOFF_MAX_SECONDS": "4",
    "RESOLVER_SHUTDOWN_GRACE_SECONDS": "5",
    "RESOLVER_LOG_LEVEL": "INFO",
}
TOKEN_LIFETIME_SECONDS = 600
TOKEN_REFRESH_SECONDS = 240  # decisions need authentication at most 5 minutes old


@dataclass(frozen=True, slots=True)
class LiveOptions:
    replicas: int = 3
    simulate_seconds: float = 20.0
    rate_per_second: float = 20.0
    console: bool = True
    api_port: int = 8080
    stop_after_seconds: float | None = None  # None: until Ctrl-C
    seed: int | None = None


@dataclass(slots=True)
class ReplicaView:
    name: str
    state: str
    claimed: int = 0
    resolved: int = 0
    fence_rejected: int = 0


@dataclass(slots=True)
class LiveView:
    """One frame of the live view: what the database and each replica say right now."""

    elapsed_seconds: float
    phase: str
    status: BacklogSnapshot | None
    """The backlog as `resolver status` and /metrics read it."""
    resolved: int | None
    replicas: list[ReplicaView]
    executor: SimulatorCounts
    late_pending: int
    events: list[str] = field(default_factory=list)
    console_url: str | None = None


class ReplicaProcess:
    """One `resolver run` process; its log goes to a file, its metrics are scraped over HTTP."""

    def __init__(self, name: str, env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.port = localpg.free_port()
        self._env = {**env, "RESOLVER_REPLICA_ID": name, "RESOLVER_HTTP_PORT": str(self.port)}
        self._log_path = log_dir / f"{name}.log"
        self._process: subprocess.Popen[bytes] | None = None
        self.killed = False
        self._last = ReplicaView(name, "starting")

    def start(self) -> None:
        with self._log_path.open("ab") as log:
            # A session of its own: Ctrl-C in the terminal reaches the demo, which then stops
            # the replicas in order (SIGTERM, drain, release), instead of all at once.
            self._process = subprocess.Popen(
                [sys.executable, "-m", "resolver", "run"],
                env=self._env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.killed = False

    def kill(self) -> None:
        """SIGKILL: no drain, no release; its recovery leases must expire and move."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
        self.killed = True

    def freeze(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def stop(self, grace_seconds: float) -> int | None:
        if self._process is None or self._process.poll() is not None:
            return None if self._process is None else self._process.returncode
        self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()

    def view(self) -> ReplicaView:
        if self._process is None or self._process.poll() is not None:
            state = "killed" if self.killed else f"exited {self._process and self._process.poll()}"
            self._last = ReplicaView(self.name, state, *self._counters_or_last())
            return self._last
        counters = _scrape(self.port)
        if counters is None:
            self._last = ReplicaView(self.name, "starting", *self._counters_or_last())
        else:
            self._last = ReplicaView(self.name, "running", *counters)
        return self._last

    def _counters_or_last(self) -> tuple[int, int, int]:
        return self._last.claimed, self._last.resolved, self._last.fence_rejected


def _scrape(port: int) -> tuple[int, int, int] | None:
    """claimed, resolved, fence-rejected from the replica's own /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
            text = r.read().decode("utf-8")
    except OSError:
        return None
    totals = {"claimed": 0.0, "resolved": 0.0, "rejected": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "resolver_claim_page_size_sum":
                totals["claimed"] += sample.value
            elif sample.name == "resolver_resolutions_total":
                totals["resolved"] += sample.value
            elif sample.name == "resolver_fence_rejections_total":
                totals["rejected"] += sample.value
    return int(totals["claimed"]), int(totals["resolved"]), int(totals["rejected"])


class LiveDemo:
    """Owns every process and thread the live demo starts, and stops them in order."""

    def __init__(self, options: LiveOptions, data_dir: Path, url: str) -> None:
        self.options = options
        self.data_dir = data_dir
        self.url = url
        self.started = time.monotonic()
        self.events: list[str] = []
        self.phase = "starting"
        self.console_url: str | None = None
        self._rng = random.Random(options.seed)
        self._keys = KeyRing.ephemeral(f"demo-{uuid.uuid4().hex[:8]}")
        self._store = Stores.over(
            PostgresHandle(
                url, max_connections=4, application_name="resolver-demo", pooler=pooler_from_env()
            )
        )
        self._replicas: list[ReplicaProcess] = []
        self._api: subprocess.Popen[bytes] | None = None
        self._signing_key: Any = None
        self.orphans: set[str] = set()
        self.victim = ""
        self.killed_at = 0.0
        self.simulator = ExecutorSimulator(
            ExecutionClient(
                self._store.execution, owner="demo-executor", lease_seconds=EXECUTOR_LEASE_SECONDS
            ),
            self._keys,
            lambda: _platform_transaction(url),
            rate_per_second=options.rate_per_second,
            late_by_seconds=EXECUTOR_LEASE_SECONDS,
            rng=self._rng,
        )

    def open(self) -> None:
        self._store.handle.open()

    def event(self, text: str) -> None:
        self.events.append(f"{time.monotonic() - self.started:5.1f}s  {text}")

    # -- start ------------------------------------------------------------------------------

    def start_replicas(self) -> None:
        env = self._replica_env()
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for n in range(1, self.options.replicas + 1):
            replica = ReplicaProcess(f"replica-{n}", env, logs)
            replica.start()
            self._replicas.append(replica)
        self.event(f"started {self.options.replicas} `resolver run` replicas (logs in {logs})")

    def _replica_env(self) -> dict[str, str]:
        secrets_dir = self.data_dir / "receipt-keys"
        secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        kid = self._keys.current_kid
        key_file = secrets_dir / kid
        key_file.write_text(self._keys.keys[kid].hex())
        key_file.chmod(0o600)
        config = self.data_dir / "providers.yaml"
        config.write_text(
            "action_types:\n"
            f"  {INTERNAL}: {{provider: internal_mutation, timeout_seconds: 2}}\n"
            f"  {SHELL}: {{provider: manual_only}}\n"
        )
        return {
            **_clean_environment(),
            **REPLICA_ENV,
            "RESOLVER_DATABASE_URL": self.url,
            "RESOLVER_CONFIG": str(config),
            "RESOLVER_SECRETS_DIR": str(secrets_dir),
            "RESOLVER_RECEIPT_SIGNING_KID": kid,
        }

    def kill_replica(self, index: int, *, tries_seconds: float = 6.0) -> None:
        """SIGKILL a replica while it holds recovery leases, so their expiry and hand-over
        can be watched: freeze it (SIGSTOP) at random instants until one falls inside a
        cycle with leases held (a few tries: a cycle is busy a few % of the time)."""
        replica = self._replicas[index]
        held: list[str] = []
        deadline = time.monotonic() + tries_seconds
        while not held and time.monotonic() < deadline:
            replica.freeze()
            held = self._held_leases(replica.name)
            if not held:
                replica.thaw()
                time.sleep(self._rng.uniform(0.002, 0.03))  # a random instant, not a guess
        replica.kill()
        self.orphans, self.victim, self.killed_at = set(held), replica.name, time.monotonic()
        lease = REPLICA_ENV["RESOLVER_RECOVERY_LEASE_SECONDS"]
        if held:
            self.event(
                f"killed {replica.name} (SIGKILL) while it held {len(held)} recovery lease(s): "
                f"they expire within {lease}s and the other replicas take them over"
            )
        else:
            self.event(f"killed {replica.name} (SIGKILL) between cycles; the others carry on")

    def watch_orphans(self) -> None:
        """Says once when no item the killed replica held is leased to it any more."""
        if not self.orphans:
            return
        with _platform_connection(self.url) as conn:
            params = {"ids": sorted(self.orphans), "owner": self.victim}
            rows = conn.execute(_CONTROL_STATES, params).fetchall()
        if all(status != "armed" or moved for status, moved in rows):
            settled = sum(1 for status, _ in rows if status != "armed")
            self.event(
                f"none of the {len(self.orphans)} item(s) {self.victim} held is leased to it any "
                f"more, {time.monotonic() - self.killed_at:.1f}s after the kill: {settled} "
                f"settled, {len(rows) - settled} waiting for their next scan"
            )
            self.orphans = set()

    def restart_replica(self, index: int) -> None:
        self._replicas[index].start()
        self.event(f"restarted {self._replicas[index].name}")

    def _held_leases(self, owner: str) -> list[str]:
        with _platform_connection(self.url) as conn:
            return [row[0] for row in conn.execute(_HELD_LEASES, {"owner": owner}).fetchall()]

    # -- console ----------------------------------------------------------------------------

    def _audit_signing_env(self) -> dict[str, str]:
        """A fresh Ed25519 key that signs the demo's authorization facts."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        path = self.data_dir / "audit-signing.pem"
        path.write_bytes(
            Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
        return {
            "RESOLVER_AUDIT_SIGNING_KEY_FILE": str(path),
            "RESOLVER_AUDIT_SIGNING_KID": "demo-1",
        }

    def start_console(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        # ES256: a short signature keeps the console link short enough to copy.
        self._signing_key = ec.generate_private_key(ec.SECP256R1())
        jwks = self.data_dir / "demo-jwks.json"
        jwks.write_text(json.dumps(_jwks(self._signing_key)))
        with _platform_connection(self.url) as conn:
            conn.execute(_GRANT_PROJECT, {"project": PROJECT})
            conn.execute(_GRANT_USER, {"project": PROJECT, "user": DEMO_USER})
        env = {
            **_clean_environment(),
            "RESOLVER_DATABASE_URL": self.url,
            "RESOLVER_API_PORT": str(self.options.api_port),
            "RESOLVER_OIDC_ISSUER": DEMO_ISSUER,
            "RESOLVER_OIDC_AUDIENCE": DEMO_AUDIENCE,
            "RESOLVER_OIDC_JWKS_FILE": str(jwks),
            "RESOLVER_LOG_LEVEL": "INFO",
            **self._audit_signing_env(),
        }
        with (self.data_dir / "logs" / "api.log").open("ab") as log:
            self._api = subprocess.Popen(
                [sys.executable, "-m", "resolver", "api"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        base = f"http://127.0.0.1:{self.options.api_port}"
        if not _wait_http(f"{base}/healthz", self._api, seconds=30):
            raise RuntimeError(
                f"the demo API did not start on port {self.options.api_port}; see "
                f"{self.data_dir / 'logs' / 'api.log'} (is the port taken? use --api-port)"
            )
        self.refresh_console_url()
        self.event("operator console is up: open the link below and decide a manual item")

    def refresh_console_url(self) -> None:
        """The token travels in the URL fragment, which browsers never send to a server."""
        token = self.mint_token()
        self.console_url = f"http://127.0.0.1:{self.options.api_port}/console#token={token}"
        link = self.data_dir / "console-url.txt"
        link.touch(mode=0o600)
        link.write_text(self.console_url + "\n")

    def mint_token(self) -> str:
        import jwt

        now = int(time.time())
        claims = {
            "iss": DEMO_ISSUER,
            "aud": DEMO_AUDIENCE,
            "sub": DEMO_USER,
            "iat": now,
            "exp": now + TOKEN_LIFETIME_SECONDS,
            "auth_time": now,
            "amr": ["mfa"],
            "demo_only": True,
        }
        return jwt.encode(claims, self._signing_key, algorithm="ES256", headers={"kid": "demo"})

    # -- watch and stop ---------------------------------------------------------------------

    def view(self) -> LiveView:
        status: BacklogSnapshot | None = None
        resolved: int | None = None
        # The view must survive a database hiccup; the next frame retries.
        with suppress(Exception):
            status = self._store.backlog.backlog_snapshot(DEFAULT_COUNT_CAP)
            with _platform_connection(self.url) as conn:
                row = conn.execute(_RESOLVED).fetchone()
                resolved = int(row[0]) if row is not None else None
        return LiveView(
            elapsed_seconds=time.monotonic() - self.started,
            phase=self.phase,
            status=status,
            resolved=resolved,
            replicas=[r.view() for r in self._replicas],
            executor=self.simulator.counts(),
            late_pending=self.simulator.pending_late,
            events=self.events[-6:],
            console_url=self.console_url,
        )

    def close(self) -> None:
        self.simulator.stop()
        if self._api is not None and self._api.poll() is None:
            self._api.send_signal(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self._api.wait(timeout=10)
            if self._api.poll() is None:
                self._api.kill()
        grace = float(REPLICA_ENV["RESOLVER_SHUTDOWN_GRACE_SECONDS"]) + 5
        for replica in self._replicas:
            replica.stop(grace)
        self._store.close()


def run_live(
    options: LiveOptions,
    *,
    data_dir: Path,
    render: Callable[[LiveView], None],
    stop: threading.Event,
) -> int:
    """Runs the demo until `stop` is set (Ctrl-C) or `stop_after_seconds`; returns an exit code."""
    url = os.environ.get("RESOLVER_DATABASE_URL")
    cluster = None
    data_dir.mkdir(parents=True, exist_ok=True)
    if not url:
        cluster = localpg.start(data_dir / "pg")
        url = cluster.url
    try:
        migrations.upgrade(url, policy=migrations.MigrationPolicy(pooler=pooler_from_env()))
        demo = LiveDemo(options, data_dir, url)
        if cluster is not None:
            demo.event(f"private PostgreSQL in {data_dir / 'pg'} ({cluster.bin_dir})")
        demo.open()
        try:
            _script(demo, render, stop)
        finally:
            demo.phase = "stopping"
            render(demo.view())
            demo.close()
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


def _script(demo: LiveDemo, render: Callable[[LiveView], None], stop: threading.Event) -> None:
    """The storyline: traffic with crashes, a replica killed and restarted, then a human."""
    options = demo.options
    deadline = None
    if options.stop_after_seconds is not None:
        deadline = demo.started + options.stop_after_seconds
    demo.start_replicas()
    demo.simulator.start()
    demo.phase = "executor running: dispatching, crashing some"
    demo.event(f"executor dispatches {options.rate_per_second:g} approved actions/s")
    victim = 1 if options.replicas > 1 else 0
    kill_at, restart_at = options.simulate_seconds * 0.35, options.simulate_seconds * 0.7
    killed = restarted = stopped_producing = console = False
    last_token = time.monotonic()
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        elapsed = time.monotonic() - demo.started
        if not killed and elapsed >= kill_at:
            demo.kill_replica(victim)
            killed = True
        if killed and not restarted and elapsed >= restart_at:
            demo.restart_replica(victim)
            restarted = True
        if not stopped_producing and elapsed >= options.simulate_seconds:
            demo.simulator.stop_producing()
            stopped_producing = True
            demo.phase = "executor stopped: replicas drain the backlog"
            demo.event("executor stopped dispatching; stalled executors still come back")
        demo.watch_orphans()
        frame = demo.view()
        if stopped_producing and not console and _drained(frame):
            demo.event("backlog drained: only evidence-less items wait (missing or manual)")
            demo.phase = "waiting for a human (Ctrl-C to stop)"
            if options.console:
                demo.start_console()
                last_token = time.monotonic()
            console = True
            frame = demo.view()
        if console and options.console and time.monotonic() - last_token > TOKEN_REFRESH_SECONDS:
            demo.refresh_console_url()
            demo.event("console link refreshed (strong authentication lasts 5 minutes)")
            last_token = time.monotonic()
        render(frame)
        stop.wait(0.5)


def _drained(frame: LiveView) -> bool:
    """Nothing claimable right now and no stalled executor still to come back."""
    return (
        frame.status is not None and frame.status.by_queue()["due"] == 0 and frame.late_pending == 0
    )


# -- the platform's side: SQL the demo runs as the platform, not as the resolver ------------

# Recovery leases a replica holds right now (for the "killed while holding N" line).
_HELD_LEASES = """
SELECT dispatch_id FROM approved_action_recovery_controls
 WHERE recovery_owner = %(owner)s AND status = 'armed'
   AND recovery_lease_expires_at_ms > resolver_now_ms(NULL)
"""
# Settled history is not backlog, so the resolver's read model does not count it: the demo's
# table does (a full count is fine on a demo's few hundred rows).
_RESOLVED = "SELECT count(*) FROM approved_action_recovery_controls WHERE status = 'resolved'"
# Whether the killed replica's items moved on: settled, or no longer leased to it (claimed by
# another replica, or released by one with a finding and a next scan time).
_CONTROL_STATES = """
SELECT status, recovery_owner IS DISTINCT FROM %(owner)s
  FROM approved_action_recovery_controls WHERE dispatch_id = ANY(%(ids)s)
"""
# The access-policy mirror the platform keeps: the demo project and its one operator.
_GRANT_PROJECT = """
INSERT INTO recovery_projects (project_id, version) VALUES (%(project)s, 1)
ON CONFLICT (project_id) DO NOTHING
"""
_GRANT_USER = """
INSERT INTO recovery_role_bindings (project_id, user_id, permission, version)
VALUES (%(project)s, %(user)s, 'approval.recover', 1)
ON CONFLICT DO NOTHING
"""


def _platform_connection(url: str) -> AbstractContextManager[session.Connection]:
    # The demo plays the platform, which owns these connections.
    return session.connection(url, autocommit=True, application_name="resolver-demo-platform")


def _platform_transaction(url: str) -> AbstractContextManager[session.Connection]:
    return session.transaction(url, application_name="resolver-demo-executor")


def _jwks(private_key: Any) -> dict[str, Any]:
    import jwt

    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private_key.public_key()))
    return {"keys": [{**public, "kid": "demo", "alg": "ES256", "use": "sig"}]}


def _clean_environment() -> dict[str, str]:
    """The demo's own environment without settings meant for another deployment."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}


def _wait_http(url: str, process: subprocess.Popen[bytes], *, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        with suppress(OSError), urllib.request.urlopen(url, timeout=1):  # noqa: S310 - loopback
            return True
        time.sleep(0.1)  # polling a start-up with a bound, not synchronising on a guess
    return False
