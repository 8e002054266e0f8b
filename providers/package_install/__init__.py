"""`package_install`: install record, verified target and atomic commit marker, all matching.

The installer writes three insert-only facts, keyed by dispatch: the verified target
(`package_install_targets`: version and content digest of the staged tree), the atomic
commit marker (`package_commit_markers`, written with the atomic publish) and, last, the
install record (`package_install_records`: binding, expected version/digest, outcome). A
directory existing proves nothing; only the three facts together do.

| evidence                                                              | finding          |
|-----------------------------------------------------------------------|------------------|
| none of the three facts                                               | missing          |
| record succeeded + target + marker, all bound and matching            | verified_succeeded |
| record failed, bound, and no commit marker                            | verified_failed  |
| a target or marker but no install record                              | conflict         |
| record succeeded, target or marker missing or not matching            | conflict         |
| record bound to another key/digest/attempt, or versions/digests differ | conflict        |
| database unreachable, timeout, not migrated                           | unavailable      |

A target or marker without a record is `no_install_record` (the installer stopped between
publishing and recording: an honest gap, not a forgery); a record that names another key,
digest or attempt is `identity_mismatch`; a success missing its target or marker, or with
differing versions or digests, is `half_published`.

Partial facts are `conflict`, not `missing`: the executor's lease has expired, nobody will
complete the set, and a half-published install is exactly what a human must look at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

from providers._declared import MISSING_FOR_AN_HOUR, receipt_reason
from providers._sql import SqlPageProvider, SqlSourceSettings
from resolver.evidence import (
    SQL_SOURCE_REASONS,
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
    ProviderSchema,
    Reason,
    RetainedTable,
    Row,
    canonical_json,
    declare,
    parse_provider_settings,
    sha256_hex,
)

NAME = "package_install"
EVIDENCE_KIND = "package_install.v1"

SELECT_INSTALL_FACTS: LiteralString = """
SELECT i.dispatch_id,
       r.dispatch_id IS NOT NULL AS has_record,
       r.idempotency_key, r.action_digest, r.attempt, r.target_version,
       r.content_digest AS record_content_digest, r.outcome, r.result_code, r.recorded_at_ms,
       t.dispatch_id IS NOT NULL AS has_target,
       t.installed_version, t.content_digest AS target_content_digest, t.observed_at_ms,
       m.dispatch_id IS NOT NULL AS has_marker,
       m.content_digest AS marker_content_digest, m.committed_at_ms
FROM unnest(%(dispatch_ids)s::text[]) AS i(dispatch_id)
LEFT JOIN package_install_records AS r ON r.dispatch_id = i.dispatch_id
LEFT JOIN package_install_targets AS t ON t.dispatch_id = i.dispatch_id
LEFT JOIN package_commit_markers AS m ON m.dispatch_id = i.dispatch_id
"""

# Each conflict with its reason code, kept on the control and shown to the operator.
_MISSING = Finding(FindingKind.MISSING, cause="no_install_facts")
# The installer stopped (or lost its last write) between publishing and recording: an honest
# gap for a person to check, not a sign of forgery.
_NO_RECORD = Finding(FindingKind.CONFLICT, cause="no_install_record")
_UNBOUND = Finding(FindingKind.CONFLICT, cause="identity_mismatch")
_PUBLISHED_FAILURE = Finding(FindingKind.CONFLICT, cause="failed_but_published")
_HALF_PUBLISHED = Finding(FindingKind.CONFLICT, cause="half_published")


class PackageInstallSettings(SqlSourceSettings):
    pass


class PackageInstallProvider(SqlPageProvider):
    """One READ ONLY query per page joining the three facts."""

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        ids = [i.dispatch_id for i in identities]
        rows = self._fetch(SELECT_INSTALL_FACTS, {"dispatch_ids": ids})
        if isinstance(rows, Finding):
            return dict.fromkeys(ids, rows)
        by_id = {row["dispatch_id"]: row for row in rows}
        return {i.dispatch_id: judge(i, by_id[i.dispatch_id]) for i in identities}


def judge(identity: DispatchIdentity, facts: Row) -> Finding:
    """The finding the three facts prove for one identity."""
    record, target, marker = facts["has_record"], facts["has_target"], facts["has_marker"]
    if not (record or target or marker):
        return _MISSING
    if not record:
        return _NO_RECORD
    if not _bound(identity, facts):
        return _UNBOUND
    if facts["outcome"] == Outcome.FAILED:
        # A failed install must not have published anything.
        if marker:
            return _PUBLISHED_FAILURE
        return Finding.verified(Outcome.FAILED, evidence_digest(facts), facts["result_code"])
    if not (target and marker) or not _matching(facts):
        return _HALF_PUBLISHED
    return Finding.verified(Outcome.SUCCEEDED, evidence_digest(facts), facts["result_code"])


def _bound(identity: DispatchIdentity, facts: Row) -> bool:
    return bool(
        facts["idempotency_key"] == identity.idempotency_key
        and facts["action_digest"] == identity.action_digest
        and facts["attempt"] == identity.attempt
    )


def _matching(facts: Row) -> bool:
    return bool(
        facts["installed_version"] == facts["target_version"]
        and facts["target_content_digest"] == facts["record_content_digest"]
        and facts["marker_content_digest"] == facts["record_content_digest"]
    )


def evidence_digest(facts: Row) -> str:
    """sha256 of the canonical joined facts: the same facts always yield the same digest."""
    return sha256_hex(canonical_json({"evidence": EVIDENCE_KIND, **facts}))


@declare(
    reasons=(
        Reason("no_install_facts", "no install record, target or commit marker was found"),
        Reason(
            "no_install_record",
            "the package was staged or published, but the installer never wrote its install record",
        ),
        receipt_reason("identity_mismatch"),
        Reason("half_published", "the package is only partly published"),
        Reason("failed_but_published", "the install reports failure, yet something was published"),
        *SQL_SOURCE_REASONS,
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
    # Its three tables: this package's migrations/, definitions.sql and grants.sql.
    schema=ProviderSchema(
        __name__,
        retained=(
            RetainedTable("package_install_records"),
            RetainedTable("package_install_targets"),
            RetainedTable("package_commit_markers"),
        ),
    ),
)
def create(settings: Mapping[str, Any]) -> PackageInstallProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(PackageInstallSettings, settings, NAME)
    return PackageInstallProvider(parsed.open_database(NAME), parsed.timeout_seconds)
