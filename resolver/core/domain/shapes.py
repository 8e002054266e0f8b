"""The shapes of the domain's strings and numbers: identifiers, action types, codes, digests.

Each is spelled once here and once in the database
(resolver/db/schema/functions/01_recovery_core.sql); tests/integration/schema/test_domain_sets.py
compares the two, and the console's copies with these.
"""

from __future__ import annotations

import re

# The one shape of an identifier, in the same text as the database's resolver_is_id; request
# models validate with it as it is. In Python it ends in `\Z`, not `$`: `$` also matches
# before a trailing newline, which PostgreSQL's check would then refuse at commit time.
ID_REGEX = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
ID_PATTERN = re.compile(ID_REGEX.removesuffix("$") + r"\Z")
# The shape of an action type, in the same text as resolver_dispatch_create's check.
ACTION_TYPE_REGEX = r"^[a-z][a-z0-9_.-]{0,63}$"
ACTION_TYPE_PATTERN = re.compile(ACTION_TYPE_REGEX.removesuffix("$") + r"\Z")
RESULT_CODE_PATTERN = re.compile(r"^[a-z0-9_.\-]{1,64}\Z")
REASON_CODE_PATTERN = RESULT_CODE_PATTERN
HEX64_PATTERN = re.compile(r"^[0-9a-f]{64}\Z")
CAUSE_PATTERN = re.compile(r"^[a-z0-9_]{1,32}\Z")
# The same rules as JSON Schema patterns for request models (ECMA regex has no `\Z`; the
# request validator matches whole strings, so `$` cannot pass a trailing newline there).
REASON_CODE_REGEX = r"^[a-z0-9_.\-]{1,64}$"
HEX64_REGEX = r"^[0-9a-f]{64}$"
# PostgreSQL bigint: a larger number would fail in the database, so it is refused before.
BIGINT_MAX = 2**63 - 1


def check_mutation_id(mutation_id: str) -> None:
    """A mutation id, the idempotency key of a terminal write: the one id shape."""
    if not ID_PATTERN.match(mutation_id):
        raise ValueError("mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]")


def check_evidence_digest(evidence_digest: str | None) -> None:
    """An optional evidence digest: a lowercase hex sha256 when given."""
    if evidence_digest is not None and not HEX64_PATTERN.match(evidence_digest):
        raise ValueError("evidence_digest must be a lowercase hex sha256")
