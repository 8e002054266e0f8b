"""docs/deployment.md's Helm example, end to end under the least-privilege roles.

The chart is rendered with exactly the example `values.yaml` of the doc. Two real replicas
(`resolver run`) then get the environment the rendered Deployment gives its container: each
Secret reference resolved to the URL of the role the doc's `kubectl create secret` puts there,
the provider ConfigMap and the receipt-key Secret as the files the volumes mount. An executor
(as `resolver_executor`) crashes after writing its mutation's receipt; the replicas must settle
it `verified_succeeded`, reading the receipt as `resolver_evidence_reader` (the runtime role has
no SELECT on it). The only departures from the pod: the metrics port is off (two processes on
one host) and mount paths point into a temporary directory.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import yaml

from resolver.core.domain import Outcome
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import ExecutionClient
from resolver.executor.receipts import write_receipt
from tests.helpers.database import new_spec
from tests.helpers.k8s import KUSTOMIZE_BASE, Manifest, env_of, one, render
from tests.helpers.roles import RoleDatabase
from tests.helpers.stores import Storage

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deployment.md"
KID = "k2026a"
# Which role's URL each Secret of the doc's `kubectl create secret` commands holds.
SECRET_ROLES = {
    "resolver-runtime-db": "resolver_runtime",
    "resolver-evidence-db": "resolver_evidence_reader",
    "resolver-migrator-db": "resolver_migrator",
}


def doc_values() -> dict[str, object]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("Example `values.yaml`:") :]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "docs/deployment.md lost its example values"
    values = yaml.safe_load(match.group(1))
    assert isinstance(values, dict)
    return values


def doc_secrets() -> set[str]:
    return set(re.findall(r"create secret generic ([\w-]+)", DOC.read_text(encoding="utf-8")))


def resolver_container(manifests: list[Manifest]) -> tuple[Manifest, Manifest]:
    pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def mounted_files(
    manifests: list[Manifest], pod: Manifest, container: Manifest, root: Path, key_hex: str
) -> dict[str, Path]:
    """Each volume mount of the container as a directory under `root` holding its files."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_maps = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ConfigMap"}
    paths: dict[str, Path] = {}
    for mount in container["volumeMounts"]:
        volume, target = volumes[mount["name"]], root / mount["name"]
        if not {"configMap", "secret"} & set(volume):
            continue  # scratch space (emptyDir): the process's own temp dir serves
        target.mkdir()
        if "configMap" in volume:
            for name, content in config_maps[volume["configMap"]["name"]]["data"].items():
                (target / name).write_text(content, encoding="utf-8")
        elif "secret" in volume:  # the receipt keys: one file per key id
            (target / KID).write_text(key_hex, encoding="ascii")
        paths[mount["mountPath"]] = target
    return paths


def replica_environment(
    role_db: RoleDatabase, container: Manifest, mounts: dict[str, Path], replica: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    for name, item in env_of(container).items():
        if "value" in item:
            value = str(item["value"])
            for mount_path, local in mounts.items():
                if value == mount_path or value.startswith(f"{mount_path}/"):
                    value = str(local) + value[len(mount_path) :]
                    break
            env[name] = value
        elif "secretKeyRef" in item["valueFrom"]:
            secret = item["valueFrom"]["secretKeyRef"]["name"]
            if secret in SECRET_ROLES:
                env[name] = role_db.urls[SECRET_ROLES[secret]]
            else:  # a provider token from extraEnv: any value, the test never calls it
                env[name] = "unused-token"
        elif "fieldRef" in item["valueFrom"]:
            env[name] = replica
    env["RESOLVER_HTTP_PORT"] = "0"  # two replicas on one host
    return env


def crash_after_the_receipt(role_db: RoleDatabase, keys: KeyRing) -> str:
    """An executor that wrote its mutation's receipt and died before completing."""
    with Storage(role_db.urls["resolver_executor"]) as store:
        client = ExecutionClient(store, owner="executor-1", lease_seconds=1.0)
        spec = client.create_dispatch(new_spec("db.mutation"))
        lease = client.start(client.lease(spec.dispatch_id))
    with psycopg.connect(role_db.urls["resolver_executor"]) as conn, conn.transaction():
        write_receipt(
            conn,
            lease,
            outcome=Outcome.SUCCEEDED,
            result_code="applied",
            receipt_id=f"m-{lease.dispatch_id}",
            keys=keys,
        )
    return lease.dispatch_id


def resolution_of(role_db: RoleDatabase, dispatch_id: str) -> dict[str, object] | None:
    rows = role_db.admin_rows(
        "SELECT r.source, r.finding, e.state FROM approved_action_recovery_resolutions r"
        f" JOIN approved_action_executions e USING (dispatch_id) WHERE dispatch_id = '{dispatch_id}'"
    )
    return rows[0] if rows else None


def replicas_connected(role_db: RoleDatabase) -> int:
    rows = role_db.admin_rows(
        "SELECT count(DISTINCT application_name) AS n FROM pg_stat_activity"
        " WHERE application_name IN ('resolver:replica-0', 'resolver:replica-1')"
    )
    return int(rows[0]["n"])


def test_the_doc_example_wires_every_role_it_creates() -> None:
    _, container = resolver_container(render(doc_values()))
    refs = {
        item["valueFrom"]["secretKeyRef"]["name"]
        for item in env_of(container).values()
        if "secretKeyRef" in item.get("valueFrom", {})
    }
    assert (
        {"resolver-runtime-db", "resolver-evidence-db"}
        <= refs
        <= doc_secrets() | {"payments-receipts"}
    )
    evidence = env_of(container)["RESOLVER_EVIDENCE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert evidence["name"] == "resolver-evidence-db"


def test_kustomize_wires_the_evidence_reader_too() -> None:
    manifests = [
        m
        for path in sorted(KUSTOMIZE_BASE.glob("*.yaml"))
        for m in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if isinstance(m, dict) and m.get("kind") == "Deployment"
    ]
    (container,) = manifests[0]["spec"]["template"]["spec"]["containers"]
    ref = env_of(container)["RESOLVER_EVIDENCE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert (ref["name"], ref["key"]) == ("resolver-evidence-database", "url")


def test_replicas_under_the_documented_roles_settle_a_receipt(
    role_db: RoleDatabase, tmp_path: Path
) -> None:
    manifests = render(doc_values())
    pod, container = resolver_container(manifests)
    key_hex = secrets.token_hex(32)
    mounts = mounted_files(manifests, pod, container, tmp_path, key_hex)
    keys = KeyRing({KID: bytes.fromhex(key_hex)}, signing_kid=KID)
    dispatch_id = crash_after_the_receipt(role_db, keys)

    replicas = [
        subprocess.Popen(
            [sys.executable, "-m", "resolver", *container["args"]],
            env=replica_environment(role_db, container, mounts, f"replica-{n}"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    try:
        # The execution lease (1 s) runs out on the database clock, then a replica's next
        # cycle (cadence 2 s) claims it; the resolution row is the signal, polled.
        # Both replicas connected (their pools open after the signal handlers are set) is
        # the other signal: only then may they be stopped and asked to exit 0.
        deadline = time.monotonic() + 90
        settled, running = None, 0
        while (settled is None or running < 2) and time.monotonic() < deadline:
            exited = [r for r in replicas if r.poll() is not None]
            assert not exited, [r.stderr.read() for r in exited if r.stderr]
            settled = resolution_of(role_db, dispatch_id)
            running = replicas_connected(role_db)
            if settled is None or running < 2:
                time.sleep(0.2)
    finally:
        for replica in replicas:
            replica.send_signal(signal.SIGTERM)
        codes = [replica.wait(timeout=60) for replica in replicas]
    errors = [replica.stderr.read() if replica.stderr else "" for replica in replicas]
    assert settled == {
        "source": "automatic",
        "finding": "verified_succeeded",
        "state": "succeeded",
    }, errors
    assert codes == [0, 0], errors
    # The evidence was read by the evidence reader: the runtime role cannot read it at all.
    with (
        psycopg.connect(role_db.urls["resolver_runtime"]) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT 1 FROM action_receipts")
