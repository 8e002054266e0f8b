"""The read routes' port: cases, the open lists and the decisions, scoped to the user."""

from __future__ import annotations

from typing import Any

import msgspec

from resolver.core.domain import (
    NO_FILTER,
    ActionSummary,
    Case,
    CaseFilter,
    CaseList,
    CaseSort,
    DecisionFilter,
    DecisionRecord,
    FoundDispatch,
    ManualQueueItem,
)
from resolver.db.statements import statement
from resolver.db.store.case_rows import (
    case,
    decision_record,
    proposal_record,
    queue_item,
    two_person,
)
from resolver.db.store.handle import PortStore, Row


class PostgresCaseReader(PortStore):
    """Keyset pages, capped counts and whole cases, each read in one transaction."""

    def list_cases(
        self,
        user_id: str,
        which: CaseList,
        limit: int,
        after: tuple[int, str] | None = None,
        filters: CaseFilter = NO_FILTER,
        sort: CaseSort = CaseSort.AGE,
        after_key: str = "",
    ) -> list[ManualQueueItem]:
        """One keyset page of the manual queue or the waiting list: oldest first, or grouped
        by `sort` first (then oldest first within each value); `after_key` is the sort value
        of the last row of the page before."""
        after_ms, after_id = after if after is not None else (-1, "")
        params = {
            **_case_filter(user_id, filters, self._db.now_ms),
            "limit": limit,
            "after_since_ms": after_ms,
            "after_dispatch_id": after_id,
            "sort": sort.value,
            "after_key": after_key,
        }
        name = "manual_queue_page" if which is CaseList.MANUAL else "waiting_page"
        return [queue_item(row) for row in self._db.filtered(name, params)]

    def count_cases(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
    ) -> int:
        """How many open cases match, counted up to `count_cap`."""
        params = {**_case_filter(user_id, filters, self._db.now_ms), "count_cap": count_cap}
        name = "manual_queue_total" if which is CaseList.MANUAL else "waiting_total"
        (row,) = self._db.filtered(name, params)  # an aggregate answers one row
        return int(row["total"])

    def case_counts(
        self,
        user_id: str,
        which: CaseList,
        filters: CaseFilter,
        count_cap: int,
    ) -> dict[str, dict[str, int]]:
        """The matching open cases counted by action type, reason, project and owner."""
        params = {**_case_filter(user_id, filters, self._db.now_ms), "count_cap": count_cap}
        name = "manual_queue_counts" if which is CaseList.MANUAL else "waiting_counts"
        counts: dict[str, dict[str, int]] = {
            "action_type": {},
            "reason": {},
            "project_id": {},
            "owner": {},
        }
        for row in self._db.filtered(name, params):
            counts[row["dimension"]][row["value"]] = int(row["cases"])
        return counts

    def get_case(self, user_id: str, dispatch_id: str) -> Case | None:
        """The whole case, or None when it is unknown or the user may not read its project."""
        params = {"user_id": user_id, "dispatch_id": dispatch_id, "now_ms": self._db.now_ms}
        with self._db.transaction() as conn:
            row = conn.execute(statement("case_get"), params).fetchone()
            if row is None:
                return None

            # The case row says which of these exist: a settled case mostly has none, and
            # each read skipped is a round trip saved.
            def rows_if(present: bool, name: str, params: dict[str, Any]) -> list[Row]:
                return conn.execute(statement(name), params).fetchall() if present else []

            authorizations = rows_if(
                row["has_authorizations"],
                "case_authorizations",
                {"mutation_id": row["resolution_mutation_id"]},
            )
            by_dispatch = {"dispatch_id": dispatch_id}
            late = rows_if(row["has_late_evidence"], "case_late_evidence", by_dispatch)
            proposals = rows_if(row["has_proposals"], "case_proposals", by_dispatch)
        return msgspec.structs.replace(
            case(row, authorizations, late),
            two_person_decisions=two_person(row["two_person_outcomes"]),
            proposals=tuple(proposal_record(p) for p in proposals),
        )

    def find_dispatches(self, user_id: str, q: str) -> list[FoundDispatch]:
        """Every readable dispatch whose dispatch id, idempotency key or approval id is `q`."""
        return _found(self._db.all("dispatch_find", {"user_id": user_id, "q": q}))

    def find_by_words(self, user_id: str, words: str) -> list[FoundDispatch]:
        """Every readable dispatch whose summary of what was approved contains `words` (its
        title, a fact's label or value, any case), newest first."""
        return _found(self._db.all("dispatch_find_words", {"user_id": user_id, "summary": words}))

    def list_decisions(
        self,
        user_id: str,
        filters: DecisionFilter,
        limit: int,
        before: tuple[int, int] | None = None,
    ) -> list[DecisionRecord]:
        """One keyset page of manual decisions, newest first."""
        before_ms, before_id = before if before is not None else (2**63 - 1, 2**63 - 1)
        params = {
            **_decision_filter(user_id, filters),
            "before_ms": before_ms,
            "before_id": before_id,
            "limit": limit,
        }
        return [decision_record(row) for row in self._db.filtered("decisions_page", params)]

    def count_decisions(self, user_id: str, filters: DecisionFilter, count_cap: int) -> int:
        """How many manual decisions match, counted up to `count_cap`."""
        (row,) = self._db.filtered(  # an aggregate answers one row
            "decisions_total", {**_decision_filter(user_id, filters), "count_cap": count_cap}
        )
        return int(row["total"])


def _found(rows: list[Row]) -> list[FoundDispatch]:
    return [
        FoundDispatch(**{**row, "action_summary": ActionSummary.from_stored(row["action_summary"])})
        for row in rows
    ]


def _case_filter(user_id: str, filters: CaseFilter, now_ms: int | None) -> dict[str, Any]:
    return {
        "user_id": user_id,
        "project_id": filters.project_id,
        "action_type": filters.action_type,
        "last_finding": filters.last_finding.value if filters.last_finding else None,
        "summary": filters.summary,
        "open_proposal": filters.open_proposal,
        "owner": filters.owner,
        "last_reason": filters.last_reason,
        "q": filters.q,
        "min_age_ms": filters.min_age_ms,
        "now_ms": now_ms,
    }


def _decision_filter(user_id: str, filters: DecisionFilter) -> dict[str, Any]:
    finding = filters.overridden_finding
    return {
        "user_id": user_id,
        "project_id": filters.project_id,
        "actor_user_id": filters.user_id,
        "action_type": filters.action_type,
        "overridden_finding": finding.value if finding is not None else None,
        "q": filters.q,
        "since_ms": filters.since_ms,
        "until_ms": filters.until_ms,
    }
