"""The operator console's files: a static page, its scripts and the config it is told."""

# No `from __future__ import annotations`: FastAPI resolves the endpoint annotations.

import json
from importlib import resources
from pathlib import PurePosixPath

from fastapi import APIRouter, Response

from resolver.core.declarations import ReasonCatalogue
from resolver.human.api.problems import STEP_UP_ACR_VALUES, ApiError
from resolver.human.console_config import ConsoleConfig

# What the console may fetch: the page, its ES modules (served as they are, no build step) and
# its stylesheet, as shipped in the wheel's console directory; and config.json, built from
# ConsoleConfig. Nothing else answers, whatever the name asked for.
CONSOLE_CONFIG = "config.json"
MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def console_router(
    config: ConsoleConfig, reasons: ReasonCatalogue, strong_auth_seconds: int = 300
) -> APIRouter:
    """Every file read once, served from memory with the console's security headers;
    `reasons` are the declared evidence reason codes the console words and flags."""
    assets = resources.files("resolver.human") / "console"
    cached: dict[str, tuple[bytes, str]] = {}
    for entry in assets.iterdir():
        media_type = MEDIA_TYPES.get(PurePosixPath(entry.name).suffix)
        if media_type is not None and entry.is_file():
            cached[entry.name] = (entry.read_bytes(), media_type)
    # How long a strong sign-in counts for a decision (the console says when it runs out);
    # what a decision's sign-in asks the identity provider for (the step-up's acr_values: a
    # console whose token expired mid-decision signs in again as the decision needs, once);
    # and what each evidence reason code means, as the providers declare it.
    document = {
        **config.public_document(),
        "strong_auth_seconds": strong_auth_seconds,
        "step_up_acr_values": STEP_UP_ACR_VALUES,
        "evidence_reasons": reasons.public_document(),
    }
    cached[CONSOLE_CONFIG] = (json.dumps(document).encode(), "application/json")
    headers = {
        "Content-Security-Policy": config.content_security_policy(),
        "Referrer-Policy": "no-referrer",
    }
    router = APIRouter(include_in_schema=False)

    def serve(name: str) -> Response:
        content, media_type = cached[name]
        return Response(content, media_type=media_type, headers=headers)

    @router.get("/console")
    def console() -> Response:
        return serve("index.html")

    @router.get("/console/{name}")
    def console_asset(name: str) -> Response:
        if name not in cached or name == "index.html":
            raise ApiError(404, "not_found", "no such page")
        return serve(name)

    return router
