"""What the SQL providers share: their settings, and the page-at-once provider shape."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

from pydantic import BaseModel, ConfigDict, Field

from resolver.db import dsn
from resolver.db.connect import Pooler, pooler_from_env
from resolver.evidence import (
    Capability,
    ConfigError,
    DispatchIdentity,
    Finding,
    FindingKind,
    ProviderFailure,
    ReadOnlyDatabase,
    Row,
    SourceMisconfigured,
    StorageUnavailable,
)

DEFAULT_URL_ENV = "RESOLVER_DATABASE_URL"
# The evidence reader's own URL (the chart and kustomize set it from a Secret): SQL providers
# read through it when it is set, so they never need the runtime role's privileges.
EVIDENCE_URL_ENV = "RESOLVER_EVIDENCE_DATABASE_URL"
_OUTAGE = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE)


class SqlSourceSettings(BaseModel):
    """The settings every SQL provider takes; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    database_url: str | None = Field(
        default=None,
        description="set database_url to a URL without a password, or use database_url_env",
    )
    database_url_env: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "name the environment variable that holds the evidence database URL (unset: "
            f"{EVIDENCE_URL_ENV}, else {DEFAULT_URL_ENV})"
        ),
    )
    timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="use a number of seconds in (0, 60]"
    )
    max_connections: int = Field(
        default=2, ge=1, le=16, description="use 1..16 connections per provider"
    )
    pooler: Pooler | None = Field(
        default=None,
        description="use transaction, session or none (unset: RESOLVER_DATABASE_POOLER)",
    )

    def resolve_url(self, environ: Mapping[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ
        if self.database_url is not None:
            if dsn.SECRET_KEYS.intersection(dsn.parse(self.database_url)):
                # Config files are not secret stores; passwords come from the environment.
                raise ConfigError(
                    "database_url: holds a password; put the whole URL in an environment "
                    "variable and name it with database_url_env"
                )
            return self.database_url
        name = self.database_url_env or (
            EVIDENCE_URL_ENV if env.get(EVIDENCE_URL_ENV) else DEFAULT_URL_ENV
        )
        url = env.get(name)
        if not url:
            raise ConfigError(
                f"database_url_env: environment variable {name} is not set; "
                "export it with the evidence database URL or set database_url"
            )
        return url

    def open_database(self, provider: str) -> ReadOnlyDatabase:
        database = ReadOnlyDatabase(
            self.resolve_url(),
            timeout_seconds=self.timeout_seconds,
            max_connections=self.max_connections,
            application_name=f"resolver-provider:{provider}",
            pooler=pooler_from_env() if self.pooler is None else self.pooler,
        )
        database.open()
        return database


class SqlPageProvider(ABC):
    """Answers a whole page with one READ ONLY query; `inspect` is a page of one."""

    capability = Capability.AUTOMATIC
    # Every wait is bounded by timeout_seconds (pool wait, connect, statement_timeout, TCP
    # user timeout): the reconciler may call it on its own thread, no hand-off to a pool.
    bounds_own_time = True

    def __init__(self, database: ReadOnlyDatabase, timeout_seconds: float) -> None:
        self._database = database
        self.timeout_seconds = timeout_seconds

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return self.inspect_page([identity])[identity.dispatch_id]

    def _fetch(self, query: LiteralString, params: Mapping[str, Any]) -> list[Row] | Finding:
        """The rows, or the classified `unavailable` finding every item of the page gets."""
        try:
            return self._database.fetch(query, params)
        except StorageUnavailable:
            return _OUTAGE
        except SourceMisconfigured as exc:
            return Finding(
                FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause=exc.cause
            )

    @abstractmethod
    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]: ...

    def close(self) -> None:
        self._database.close()
