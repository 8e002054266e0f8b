"""Typed errors, one class per failure the caller must treat differently."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any


class ResolverError(Exception):
    """Base of every error the resolver raises on purpose."""


class ConfigError(ResolverError):
    """A configuration value is wrong; the message names the key and the fix."""


def settings_error(
    errors: Iterable[Mapping[str, Any]],
    *,
    prefix: str = "RESOLVER_",
    secret_fields: Collection[str] = frozenset(),
) -> ConfigError:
    """One line for a pydantic-settings model's validation errors (`exc.errors()`): each
    variable with what is wrong and, unless it may hold a secret, what it was."""
    lines = []
    for error in errors:
        loc = "_".join(str(part) for part in error["loc"]).upper()
        key = f"{prefix}{loc}" if loc else "configuration"
        msg = str(error["msg"]).removeprefix("Value error, ")
        got = "" if loc.lower() in secret_fields else f" (got {error.get('input')!r})"
        lines.append(f"{key}: {msg}{got}" if loc else msg)
    return ConfigError("invalid configuration: " + "; ".join(lines))


class StorageUnavailable(ResolverError):
    """PostgreSQL could not be reached or the transaction failed transiently.

    Nothing moved: every write of the failed call was rolled back. Retrying later is safe.
    """


class SourceMisconfigured(ResolverError):
    """An evidence source answered but refused the request in a way waiting will not fix.

    A missing GRANT, a broken query, an undefined table or column (told by SQLSTATE class,
    never by message text), or an HTTP 401/403. Nothing moved; the finding is `unavailable`,
    and the failure is reported as `configuration` so that an operator fixes it.

    `cause` is a short code of the refusal (`sqlstate_42501`, `http_403`): the operator's
    first clue, logged and shown in /readyz. It never carries the source's message text.
    """

    def __init__(self, message: str, *, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class MigrationFailed(ResolverError):
    """PostgreSQL refused a migration or grants statement (e.g. a role roles.sql creates is
    missing, or the migration role lacks a privilege); the attempt rolled back."""


class MigrationLockTimeout(StorageUnavailable):
    """Migration DDL kept hitting its lock_timeout (a long transaction holds a table); every
    attempt rolled back, so the schema is as it was."""


class SchemaNotReady(ResolverError):
    """The database answers but is not migrated to the revision this code expects."""


class ConstraintViolation(ResolverError):
    """A database constraint refused a write; `constraint` names it. Nothing was written."""

    def __init__(self, message: str, constraint: str | None = None) -> None:
        super().__init__(message)
        self.constraint = constraint


class NotFound(ResolverError):
    """The dispatch (or execution) does not exist."""


class FenceConflict(ResolverError):
    """A fenced write lost: owner/token/version/state no longer match, or a replay drifted.

    `current` (for the API's problem document) is the dispatch's state as read when the
    refusal was explained: `{state, version, control_status}`, or None when not read.
    """

    def __init__(self, message: str, *, current: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.current = current


class ProposalConflict(FenceConflict):
    """A two-person decision that did not settle: `code` says why (second_person_required,
    proposal_rejected, proposal_voided, proposal_limit, proposal_closed, no_proposal,
    not_proposer, own_proposal); the API answers it as a 409 problem with that code."""

    def __init__(
        self, code: str, message: str, *, current: dict[str, object] | None = None
    ) -> None:
        super().__init__(message, current=current)
        self.code = code


class TamperAcknowledgementRequired(FenceConflict):
    """`confirm_succeeded` on a case whose evidence conflicts for a reason that suggests
    forgery or tampering, without the decision's `tamper_acknowledged`: nothing was written.
    The API answers a 409 problem with this code."""

    code = "tamper_acknowledgement_required"


class FactConsumed(ResolverError):
    """The database refused a person's signed fact as already used (SQLSTATE RS007): its
    mutation id or signature was recorded before, or the API verified its token further from
    the database clock than the policy's leeway. Nothing was written; the caller tells its own
    replay from a reuse."""


class ActRefused(ResolverError):
    """The database refused a person's signed fact because the act it names does not fit
    (SQLSTATE RS008): another function's act, a proposal that is not open, a confirmation by
    the proposer or of another decision, a first decision whose case changed. Nothing was
    written."""


class LeaseLost(FenceConflict):
    """The caller's execution lease expired or was taken over; it may no longer start."""


class PermissionDenied(ResolverError):
    """The user lacks `approval.recover` on the project, or the grant changed under them."""


class StrongAuthRequired(ResolverError):
    """The authentication is too old or not strong enough (no accepted `amr` value)."""


class NotLeasable(ResolverError):
    """The dispatch cannot be leased: it is executing, terminal, or leased by someone alive."""


class InvalidDispatch(ResolverError):
    """A dispatch specification is malformed (ids, digest, idempotency key)."""


class ReceiptRejected(ResolverError):
    """A receipt failed shape, size, identity, digest or signature checks (a `conflict`).

    `reason` is a low-sensitivity code (e.g. `bad_signature`, `identity_mismatch`) that may
    be logged and counted; the message never quotes the receipt or a secret.
    """

    def __init__(self, message: str, reason: str = "rejected") -> None:
        super().__init__(message)
        self.reason = reason


class RetentionRefused(ResolverError):
    """The database refused a prune request (a cut-off in the future, a missing export
    digest, a batch size out of range, a run that is not open). Nothing was deleted."""


class LockTimeout(StorageUnavailable):
    """A statement waited longer than its lock_timeout for a row another transaction holds
    (an operator's open `SELECT ... FOR UPDATE`, a prune batch); it rolled back whole.

    Nothing moved. The other transaction decides when a retry can succeed."""


class StatementTimeout(StorageUnavailable):
    """A statement ran longer than its statement_timeout and was cancelled; its transaction
    rolled back whole. Nothing moved; retrying later is safe."""


class CommitUnknown(ResolverError):
    """The reply to the mutation's COMMIT was lost and a re-read could not tell whether it
    committed. Never repeat the side effect: recovery settles it from evidence (or a human)."""


class MutationNotCommitted(ResolverError):
    """The reply to the mutation's COMMIT was lost and a re-read proves it rolled back: its
    receipt does not exist, so neither does the mutation. Nothing was completed."""


class OutcomeTimeout(ResolverError):
    """A dispatch was not settled within the time a caller waited for it.

    Nothing moved on its account: `status` is the dispatch as last read (still `leased`,
    `executing` or `recovery_required`), and waiting again is safe.
    """

    def __init__(self, message: str, status: object) -> None:
        super().__init__(message)
        self.status = status
