"""The manual-resolution HTTP API: the human queue and explicit, authorized decisions.

The app is assembled here from its parts: the edge every answer leaves through (`edge`), the
problem documents every failure becomes (`problems`), the strict request and response types
(`models`), one router per resource (`decisions`, `cases`, `probes`, `console`), what each
route depends on (`deps`) and the per-user rate limiter (`limits`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import FastAPI

from resolver.core.declarations import ReasonCatalogue
from resolver.core.domain import BIGINT_MAX
from resolver.core.liveness import Probe
from resolver.core.ports import HumanStore
from resolver.core.provider import installed_reasons
from resolver.human.api import cases, decisions
from resolver.human.api.console import console_router
from resolver.human.api.deps import ApiContext
from resolver.human.api.edge import Edge
from resolver.human.api.limits import RateLimiter
from resolver.human.api.probes import probes_router
from resolver.human.api.problems import install_error_handlers
from resolver.human.auth import TokenVerifier
from resolver.human.console_config import ConsoleConfig
from resolver.human.manual import ManualResolutionService
from resolver.human.signing import FactSigner
from resolver.telemetry.observer import ApiObserver, NullApiObserver


def create_app(
    store: HumanStore,
    verifier: TokenVerifier,
    *,
    service: ManualResolutionService | None = None,
    signer: FactSigner | None = None,
    limiter: RateLimiter | None = None,
    observer: ApiObserver | None = None,
    readiness: Callable[[], Probe] | None = None,
    console: ConsoleConfig | None = None,
    reasons: ReasonCatalogue | None = None,
) -> FastAPI:
    """The API app; `service` records decisions (or one is built on `store` with `signer`,
    the API's fact-signing key); `readiness` (the composition root's database and schema check) adds
    `/readyz`, `observer` receives the request, token, step-up and decision events, `console`
    is what the operator console is told (sign-in, link-outs, reason codes), with `reasons`,
    what each evidence reason code means (by default, every installed provider's)."""
    events: ApiObserver = observer or NullApiObserver()
    service = service or ManualResolutionService(store, signer=_required(signer))
    # The schema is not served: it is published in docs/openapi.json (`resolver api
    # --openapi`), so the API port tells an unauthenticated caller nothing it need not know.
    app = FastAPI(
        title="approved-action recovery resolver",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    install_error_handlers(app, events)
    app.add_middleware(Edge, events=events)
    app.state.context = ApiContext(
        store=store,
        service=service,
        verifier=verifier,
        limiter=limiter or RateLimiter(),
        events=events,
    )
    app.include_router(decisions.router)
    app.include_router(cases.router)
    app.include_router(probes_router(readiness))
    app.include_router(
        console_router(
            console or ConsoleConfig(),
            reasons if reasons is not None else installed_reasons(),
            service.max_auth_age_ms // 1000,
        )
    )
    return app


def _required(signer: FactSigner | None) -> FactSigner:
    if signer is None:
        raise ValueError("create_app needs the manual-resolution service or its fact signer")
    return signer


class _NoKeys:
    """No issuer: the document is built, never served."""

    def key(self, kid: str) -> None:
        del kid


def openapi_document() -> dict[str, Any]:
    """The published OpenAPI document (docs/openapi.json); the app serves none."""
    unused = TokenVerifier(issuer="", audience="", keys=_NoKeys())
    # A throwaway key: the document is built, no fact is ever signed.
    signer = FactSigner(Ed25519PrivateKey.generate(), "unused")
    document = create_app(cast(HumanStore, None), unused, signer=signer).openapi()
    # FastAPI's schema model holds bounds as floats: 2**63 - 1 would print as 2**63.
    schemas = document["components"]["schemas"]
    for fenced in ("DecisionRequest", "BulkItem"):
        version = schemas[fenced]["properties"]["expected_execution_version"]
        version.update(minimum=1, maximum=BIGINT_MAX)
    return document
