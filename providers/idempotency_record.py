"""`idempotency_record`: a downstream service's own idempotency record, read where it keeps it.

Many services record each request's idempotency key, what the request was and what came of it
in their own database, to answer a retried request without doing it twice. This provider reads
that record with a configured query, through a login that may only SELECT, from PostgreSQL or
MariaDB/MySQL, and never calls the service. The executor sends its request with the dispatch's
idempotency key and a binding v1 token (`resolver.executor.idempotency_binding`), which the
service stores in the record; the record counts only if that token binds it to this dispatch.

| the query's answer                                   | finding                            |
|------------------------------------------------------|------------------------------------|
| no row                                               | missing (`no_record`)              |
| one bound row, status in `succeeded` / `failed`      | verified_succeeded / _failed       |
| one bound row, status in `still_running`             | still_running                      |
| one row without a token                              | conflict (`record_not_bound`)      |
| a token malformed, foreign, altered or for another dispatch | conflict (a receipt reason) |
| one bound row, status in no list                     | conflict (`unknown_status`)        |
| more than one row                                    | conflict (`several_records`)       |
| source down or slow; grant, table, column missing    | unavailable (outage; configuration) |
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from providers._bound_record import MISSING, RECORD_REASONS, Statuses, judge_record
from providers._declared import MISSING_FOR_AN_HOUR
from resolver.db import dsn
from resolver.db.readonly_mariadb import MARIADB_SOURCE_REASONS, ReadOnlyMariaDatabase
from resolver.evidence import (
    RECEIPT_REASONS,
    SQL_SOURCE_REASONS,
    Capability,
    ConfigError,
    DispatchIdentity,
    Finding,
    FindingKind,
    KeyRing,
    ProviderFailure,
    ReadOnlyDatabase,
    Reason,
    Row,
    SourceMisconfigured,
    StorageUnavailable,
    declare,
    parse_provider_settings,
)

NAME = "idempotency_record"
# The columns the query answers: `status` and `binding` always, `result_code` if it has one.
_STATUS, _BINDING, _RESULT = "status", "binding", "result_code"
# What a query may ask by name: the identity's key and, to narrow a shared table, its ids.
PARAMETERS = ("idempotency_key", "dispatch_id", "project_id", "action_type")
_PARAMETER = re.compile(r"%\(([a-z_]+)\)s")
_SEVERAL = Finding(FindingKind.CONFLICT, cause="several_records")
_OUTAGE = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE)


class IdempotencyRecordSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dialect: Literal["postgresql", "mariadb"] = Field(
        description="postgresql, or mariadb for MariaDB and MySQL"
    )
    database_url: str | None = Field(
        default=None, description="a URL without a password; put one with it in database_url_env"
    )
    database_url_env: str | None = Field(
        default=None, description="the environment variable holding the reader's URL"
    )
    query: str = Field(
        min_length=1,
        max_length=2000,
        description="one SELECT answering status and binding (and result_code) by "
        "%(idempotency_key)s",
    )
    statuses: Statuses
    timeout_seconds: float = Field(default=5.0, gt=0, le=60, description="use 0 < s <= 60")

    @field_validator("query")
    @classmethod
    def _a_select_with_known_parameters(cls, value: str) -> str:
        if not re.match(r"^\s*(select|with)\b", value, re.I) or ";" in value.rstrip().rstrip(";"):
            raise ValueError("must be one SELECT (or WITH ... SELECT) statement")
        unknown = set(_PARAMETER.findall(value)) - set(PARAMETERS)
        if unknown:
            raise ValueError(f"names {sorted(unknown)}; a query may name {list(PARAMETERS)}")
        if "idempotency_key" not in _PARAMETER.findall(value):
            raise ValueError("must select by %(idempotency_key)s")
        return value.strip().rstrip(";")

    @model_validator(mode="after")
    def _one_source(self) -> IdempotencyRecordSettings:
        if (self.database_url is None) == (self.database_url_env is None):
            raise ValueError("set exactly one of database_url and database_url_env")
        if self.database_url is not None and _has_password(self.database_url):
            raise ValueError(
                "database_url holds a password; put the URL in the variable named by "
                "database_url_env instead"
            )
        return self


def _has_password(url: str) -> bool:
    if url.startswith(("mysql://", "mariadb://")):
        return bool(re.match(r"^[a-z]+://[^/@:]+:[^/@]*@", url))
    return bool(dsn.SECRET_KEYS.intersection(dsn.parse(url)))


def _url(settings: IdempotencyRecordSettings) -> str:
    if settings.database_url is not None:
        return settings.database_url
    name = settings.database_url_env or ""
    url = os.environ.get(name)
    if not url:
        raise ConfigError(
            f"database_url_env: environment variable {name} is not set; export it with the "
            "service database reader's URL"
        )
    return url


class _Source(Protocol):
    def fetch_configured(self, query: str, params: Mapping[str, Any]) -> list[Row]: ...

    def close(self) -> None: ...


class _MariaSource:
    def __init__(self, database: ReadOnlyMariaDatabase) -> None:
        self._database = database

    def fetch_configured(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self._database.fetch(query, params)

    def close(self) -> None:
        self._database.close()


class IdempotencyRecordProvider:
    """One query per dispatch, on the page's thread; every wait bounded by the timeout."""

    capability = Capability.AUTOMATIC

    def __init__(self, source: _Source, settings: IdempotencyRecordSettings, keys: KeyRing) -> None:
        self._source = source
        self._query = settings.query
        self._statuses = settings.statuses
        self._keys = keys
        self.timeout_seconds = settings.timeout_seconds

    def inspect(self, identity: DispatchIdentity) -> Finding:
        params = {name: getattr(identity, name) for name in PARAMETERS}
        try:
            rows = self._source.fetch_configured(self._query, params)
        except StorageUnavailable:
            return _OUTAGE
        except SourceMisconfigured as exc:
            return Finding(
                FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause=exc.cause
            )
        if not rows:
            return MISSING
        if len(rows) > 1:
            return _SEVERAL
        return self._judge(identity, rows[0])

    def _judge(self, identity: DispatchIdentity, row: Row) -> Finding:
        if _STATUS not in row or _BINDING not in row:
            # The query answers the wrong columns: a configuration error, never evidence.
            return Finding(
                FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause="bad_query"
            )
        return judge_record(
            identity,
            status=row[_STATUS],
            token=row[_BINDING],
            result_code=row.get(_RESULT),
            statuses=self._statuses,
            keys=self._keys,
        )

    def close(self) -> None:
        self._source.close()


def _open(settings: IdempotencyRecordSettings) -> _Source:
    url = _url(settings)
    if settings.dialect == "mariadb":
        return _MariaSource(ReadOnlyMariaDatabase(url, timeout_seconds=settings.timeout_seconds))
    database = ReadOnlyDatabase(
        url, timeout_seconds=settings.timeout_seconds, application_name=f"resolver-{NAME}"
    )
    database.open()
    return database


@declare(
    reasons=(
        *RECORD_REASONS,
        Reason(
            "several_records",
            "the service holds more than one record for this key",
        ),
        Reason("bad_query", "the configured query does not answer the status and binding columns"),
        *RECEIPT_REASONS,
        *SQL_SOURCE_REASONS,
        *MARIADB_SOURCE_REASONS,
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
)
def create(settings: Mapping[str, Any]) -> IdempotencyRecordProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(IdempotencyRecordSettings, settings, NAME)
    keys = KeyRing.from_environment().require_keys(NAME)
    return IdempotencyRecordProvider(_open(parsed), parsed, keys)
