"""The test database as tests see it: direct SQL, dispatch specs, and the executor world."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from resolver.core.domain import DispatchSpec, ExecutionLease, action_digest
from resolver.executor.client import ExecutionClient
from tests.helpers.stores import Storage

# A fixed database-clock instant (ms) for tests that inject time: 2100-01-01. Some tests mix it
# with the real clock (a lease taken at T0 is still live when a receipt's write checks it on the
# database clock), so it must stay ahead of the real clock for as long as the suite lives.
T0 = 4_102_444_800_000


EXEC_LEASE_MS = 1_000


@dataclass
class SQL:
    """Direct SQL for assertions and for seeding as a foreign-language executor would."""

    conn: psycopg.Connection[dict[str, Any]]

    def all(self, query: str, *params: Any) -> list[dict[str, Any]]:
        cur = self.conn.execute(query, params or None)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []

    def one(self, query: str, *params: Any) -> dict[str, Any]:
        rows = self.all(query, *params)
        assert len(rows) == 1, rows
        return rows[0]

    def control(self, dispatch_id: str) -> dict[str, Any]:
        return self.one(
            "SELECT * FROM approved_action_recovery_controls WHERE dispatch_id = %s", dispatch_id
        )

    def execution(self, dispatch_id: str) -> dict[str, Any]:
        return self.one(
            "SELECT * FROM approved_action_executions WHERE dispatch_id = %s", dispatch_id
        )

    def resolutions(self, dispatch_id: str) -> list[dict[str, Any]]:
        return self.all(
            "SELECT * FROM approved_action_recovery_resolutions WHERE dispatch_id = %s", dispatch_id
        )


_ids = itertools.count(1)


def new_spec(action_type: str = "test.action", **overrides: Any) -> DispatchSpec:
    n = next(_ids)
    dispatch_id = overrides.pop("dispatch_id", f"d-{n:06d}")
    fields: dict[str, Any] = {
        "dispatch_id": dispatch_id,
        "approval_request_id": f"ar-{dispatch_id}",
        "project_id": "proj-1",
        "action_type": action_type,
        "action_digest": action_digest({"action": action_type, "n": n}),
        "idempotency_key": f"idem-{dispatch_id}",
    }
    fields.update(overrides)
    return DispatchSpec(**fields)


@dataclass
class World:
    """A test's view of the platform: an executor writing through the executor API."""

    store: Storage
    executor: ExecutionClient
    specs: dict[str, DispatchSpec] = field(default_factory=dict)

    def started(self, action_type: str = "test.action", now_ms: int = T0) -> ExecutionLease:
        """A dispatch past the start barrier whose lease ends at now_ms + EXEC_LEASE_MS."""
        spec = self.executor.create_dispatch(new_spec(action_type))
        self.specs[spec.dispatch_id] = spec
        executor = self.executor.at(now_ms)
        return executor.start(executor.lease(spec.dispatch_id))

    def crashed(self, count: int = 1, action_type: str = "test.action") -> list[ExecutionLease]:
        """Executions that crossed the barrier at T0 and whose executor then died."""
        return [self.started(action_type) for _ in range(count)]


SECRET = "s3cret-pw"  # trust auth ignores it; it must never appear in a response


def with_password(url: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{SECRET}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, *parts[2:]))
