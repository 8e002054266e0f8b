"""A real S3-compatible server on loopback for the object-storage tests: moto's server mode
in its own process, with signature checking and IAM policies switched on, behind a small
proxy that records every request and can answer 503 SlowDown or hold a reply.

Three principals, each with the policy the docs give it: the reader (the provider's
read-only policy), the writer (an executor's publishing policy) and an admin that plants
what no well-behaved writer would (an overwrite, a foreign object).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import botocore.session
from botocore.client import BaseClient
from botocore.config import Config

from resolver.evidence.object_store import ObjectStoreSettings, make_client

REGION = "us-east-1"
BUCKET = "receipts"
"""Keeps every version: what the docs require."""
UNVERSIONED_BUCKET = "receipts-unversioned"
"""Keeps no versions: `object_receipt` reads it only with `accept_overwritable_store`."""
PREFIX = "receipts/"

_SERVER = """
import sys, threading
import moto.iam.access_control as access
from moto.server import ThreadedMotoServer

# moto checks a version listing as the action s3:ListObjectVersions (the API operation's
# name); AWS checks s3:ListBucketVersions, the name the docs' policies grant.
_AWS_ACTIONS = {"s3:ListObjectVersions": "s3:ListBucketVersions"}
_checked = access.S3IAMRequest.__init__

def _as_aws_names(self, *args, **kwargs):
    _checked(self, *args, **kwargs)
    self._action = _AWS_ACTIONS.get(self._action, self._action)

access.S3IAMRequest.__init__ = _as_aws_names
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()  # runs until the test closes our stdin
server.stop()
"""


def reader_policy(bucket: str, prefix: str) -> dict[str, Any]:
    """docs/providers.md's read-only policy: read receipts (and their versions) under the
    prefix, list that prefix's versions (so an absent key answers 404, not 403), and read
    whether the bucket keeps versions."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                "Resource": f"arn:aws:s3:::{bucket}/{prefix}*",
            },
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:ListBucketVersions"],
                "Resource": f"arn:aws:s3:::{bucket}",
                "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            },
            {
                "Effect": "Allow",
                "Action": "s3:GetBucketVersioning",
                "Resource": f"arn:aws:s3:::{bucket}",
            },
        ],
    }


def writer_policy(bucket: str, prefix: str) -> dict[str, Any]:
    """docs/executor-sdk.md's publishing policy: put and read back receipts, nothing else."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:GetObject"],
                "Resource": f"arn:aws:s3:::{bucket}/{prefix}*",
            }
        ],
    }


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str

    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": REGION,
        }


@dataclass
class Recorder:
    """What reached the store through the proxy, and the faults it injects."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    slow_down: int = 0
    """Answer this many next requests with 503 SlowDown (not forwarded)."""
    throttled: int = 0
    """How many requests were answered 503 SlowDown."""
    hold: frozenset[str] = frozenset()
    """Forward requests of these methods, then keep their replies until `release` is set."""
    release: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)
    delay: frozenset[str] = frozenset()
    """Keep requests of these methods before forwarding them until `forward` is set: a store
    (or a proxy before it) that applies a request long after its client gave up."""
    forward: threading.Event = field(default_factory=threading.Event)
    delayed: int = 0
    """How many requests are held back right now."""
    applied_late: int = 0
    """How many held-back requests were forwarded once `forward` was set."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def methods(self) -> frozenset[str]:
        with self.lock:
            return frozenset(method for method, _ in self.requests)

    def count(self, method: str) -> int:
        with self.lock:
            return sum(1 for m, _ in self.requests if m == method)


_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def _handler(upstream_port: int, recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with recorder.lock:
                recorder.requests.append((self.command, self.path))
                inject = recorder.slow_down > 0
                if inject:
                    recorder.slow_down -= 1
                    recorder.throttled += 1
            if self.command in recorder.delay:
                self._delay_then_forward(body)
                return
            if inject:
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(_SLOW_DOWN)))
                self.end_headers()
                self.wfile.write(_SLOW_DOWN)
                return
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            try:
                # The Host header goes through unchanged: it is part of the signature.
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                if self.command in recorder.hold:
                    recorder.held.set()
                    recorder.release.wait(60)
                    self.close_connection = True
                    return  # the object landed; its reply never reaches the client
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        def _delay_then_forward(self, body: bytes) -> None:
            """Held until `forward`; then sent as it came, its answer to nobody (the client
            closed the connection long ago)."""
            with recorder.lock:
                recorder.delayed += 1
            recorder.forward.wait(120)
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                conn.getresponse().read()
            finally:
                conn.close()
                with recorder.lock:
                    recorder.delayed -= 1
                    recorder.applied_late += 1
            self.close_connection = True

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Proxy


@dataclass
class S3Server:
    upstream_port: int
    proxy_url: str
    recorder: Recorder
    reader: Credentials
    writer: Credentials
    admin: Credentials

    def settings(self, bucket: str = BUCKET, **extra: Any) -> dict[str, Any]:
        """object_receipt's YAML settings for this server (credentials come from the env)."""
        return {
            "bucket": bucket,
            "prefix": PREFIX,
            "endpoint_url": self.proxy_url,
            "region": REGION,
            "addressing_style": "path",
            "timeout_seconds": 2,
            **extra,
        }

    def client(self, who: Credentials, *, direct: bool = False, **config: Any) -> BaseClient:
        """A plain client signing as `who`; `direct`: past the proxy (no faults, unrecorded)."""
        session = botocore.session.get_session()
        return session.create_client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.upstream_port}" if direct else self.proxy_url,
            region_name=REGION,
            aws_access_key_id=who.access_key,
            aws_secret_access_key=who.secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1},
                request_checksum_calculation="when_required",
                **config,
            ),
        )

    def reader_client(self, bucket: str = BUCKET, **extra: Any) -> BaseClient:
        """The provider's client (read-only guard included) signing as the reader."""
        settings = ObjectStoreSettings(**{**self.settings(bucket), **extra})
        return make_client(settings, max_pool=16, read_only=True, session=session_of(self.reader))

    def role_profiles(self, directory: Path, roles: Mapping[str, dict[str, Any]]) -> dict[str, str]:
        """A role per name with its policy, and the shared AWS config files that name each as
        a profile assuming it (`role_arn` with `source_profile`) from one base user that may
        only assume them: the environment to point botocore at those files and this STS."""
        url = f"http://127.0.0.1:{self.upstream_port}"
        iam = self.client_for("iam", self.admin, direct=True)
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
            ],
        }
        arns = {}
        for name, policy in roles.items():
            role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
            iam.put_role_policy(RoleName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
            arns[name] = role["Role"]["Arn"]
        base = f"base-{directory.name}"[:64]
        iam.create_user(UserName=base)
        may_assume = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": sorted(arns.values())}
            ],
        }
        iam.put_user_policy(
            UserName=base, PolicyName="assume", PolicyDocument=json.dumps(may_assume)
        )
        key = iam.create_access_key(UserName=base)["AccessKey"]
        config = "".join(
            f"[profile {name}]\nrole_arn = {arn}\nsource_profile = base\nregion = {REGION}\n"
            for name, arn in arns.items()
        )
        (directory / "config").write_text(f"[profile base]\nregion = {REGION}\n{config}")
        (directory / "credentials").write_text(
            f"[base]\naws_access_key_id = {key['AccessKeyId']}\n"
            f"aws_secret_access_key = {key['SecretAccessKey']}\n"
        )
        return {
            "AWS_CONFIG_FILE": str(directory / "config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(directory / "credentials"),
            "AWS_ENDPOINT_URL_STS": url,
        }

    def client_for(self, service: str, who: Credentials, *, direct: bool = False) -> BaseClient:
        """A client of another service of this server (IAM, STS) signing as `who`."""
        return botocore.session.get_session().create_client(
            service,
            endpoint_url=f"http://127.0.0.1:{self.upstream_port}" if direct else self.proxy_url,
            region_name=REGION,
            aws_access_key_id=who.access_key,
            aws_secret_access_key=who.secret_key,
        )


def session_of(who: Credentials) -> botocore.session.Session:
    session = botocore.session.get_session()
    session.set_credentials(who.access_key, who.secret_key)
    return session


def _admin_call(port: int, path: str, body: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body)
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def _setup(port: int) -> tuple[Credentials, Credentials, Credentials]:
    url = f"http://127.0.0.1:{port}"
    session = botocore.session.get_session()
    anon = {"aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
    iam = session.create_client("iam", endpoint_url=url, region_name=REGION, **anon)
    s3 = session.create_client(
        "s3",
        endpoint_url=url,
        region_name=REGION,
        config=Config(s3={"addressing_style": "path"}),
        **anon,
    )
    for bucket in (BUCKET, UNVERSIONED_BUCKET):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    creds = []
    policies = {
        "reader": [reader_policy(b, PREFIX) for b in (BUCKET, UNVERSIONED_BUCKET)],
        "writer": [writer_policy(b, PREFIX) for b in (BUCKET, UNVERSIONED_BUCKET)],
        "admin": [
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }
        ],
    }
    for name, documents in policies.items():
        iam.create_user(UserName=name)
        for n, document in enumerate(documents):
            iam.put_user_policy(
                UserName=name, PolicyName=f"{name}-{n}", PolicyDocument=json.dumps(document)
            )
        key = iam.create_access_key(UserName=name)["AccessKey"]
        creds.append(Credentials(key["AccessKeyId"], key["SecretAccessKey"]))
    # From here on every request must carry a valid SigV4 signature of a user above and is
    # checked against that user's policies.
    _admin_call(port, "/moto-api/reset-auth", "0")
    reader, writer, admin = creds
    return reader, writer, admin


@contextmanager
def running_s3_server() -> Iterator[S3Server]:
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        reader, writer, admin = _setup(port)
        recorder = Recorder()
        proxy = ThreadingHTTPServer(("127.0.0.1", 0), _handler(port, recorder))
        proxy.daemon_threads = True
        thread = threading.Thread(target=proxy.serve_forever, daemon=True)
        thread.start()
        try:
            yield S3Server(
                port,
                f"http://127.0.0.1:{proxy.server_address[1]}",
                recorder,
                reader,
                writer,
                admin,
            )
        finally:
            recorder.release.set()
            recorder.forward.set()
            proxy.shutdown()
            proxy.server_close()
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
