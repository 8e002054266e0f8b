"""The late-evidence port: claim due watches, record the looks, close elapsed windows."""

from __future__ import annotations

from collections.abc import Sequence

from resolver.core.domain import LateObservation, LateRecord, LateWatch
from resolver.db.store.handle import PortStore
from resolver.db.store.rows import encode_items, late_watch


class PostgresLateEvidenceStore(PortStore):
    """Every call is one statement on the database clock."""

    def claim_late_watches(
        self, owner: str, limit: int, lease_ms: int, window_ms: int
    ) -> list[LateWatch]:
        """Due open watches inside the window, under a fresh token (SKIP LOCKED)."""
        params = {
            "owner": owner,
            "limit": limit,
            "lease_ms": lease_ms,
            "window_ms": window_ms,
            "now_ms": self._db.now_ms,
        }
        return [late_watch(row) for row in self._db.all("late_watch_claim", params)]

    def record_late_observations(
        self,
        owner: str,
        observations: Sequence[LateObservation],
        window_ms: int,
    ) -> list[LateRecord]:
        """The fenced record of one page of looks; only the fenced ones are answered."""
        items = encode_items(
            [
                {
                    "dispatch_id": o.watch.identity.dispatch_id,
                    "watch_token": o.watch.watch_token,
                    "finding": o.finding.kind.value,
                    "evidence_digest": o.finding.evidence_digest,
                    "result_code": o.finding.result_code,
                    "observation_id": o.observation_id,
                    "delay_ms": o.next_look_ms,
                }
                for o in observations
            ]
        ).decode("utf-8")
        params = {"items": items, "owner": owner, "window_ms": window_ms, "now_ms": self._db.now_ms}
        by_id = {o.observation_id: o for o in observations}
        return [
            LateRecord(
                watch=by_id[row["observation_id"]].watch,
                finding=by_id[row["observation_id"]].finding.kind,
                recorded=row["recorded"],
                agrees=row["agrees"],
                observation_id=row["observation_id"],
            )
            for row in self._db.all("late_watch_record", params)
        ]

    def expire_late_watches(self, window_ms: int, limit: int) -> int:
        """Close up to `limit` open watches whose window elapsed; how many were closed."""
        params = {"window_ms": window_ms, "limit": limit, "now_ms": self._db.now_ms}
        return len(self._db.all("late_watch_expire", params))
