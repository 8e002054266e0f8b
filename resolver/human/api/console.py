"""The operator console's files: a static page, its scripts and the config it is told."""

# No `from __future__ import annotations`: FastAPI resolves the endpoint annotations.

import json
from importlib import resources

from fastapi import APIRouter, Response

from resolver.core.declarations import ReasonCatalogue
from resolver.human.api.problems import ApiError
from resolver.human.console_config import ConsoleConfig

# What the console may fetch; config.json is built from ConsoleConfig, the rest ship in the wheel.
CONSOLE_CONFIG = "config.json"
CONSOLE_FILES = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "auth.js": "text/javascript",
    "app.css": "text/css",
    CONSOLE_CONFIG: "application/json",
}


def console_router(
    config: ConsoleConfig, reasons: ReasonCatalogue, strong_auth_seconds: int = 300
) -> APIRouter:
    """Every file read once, served from memory with the console's security headers;
    `reasons` are the declared evidence reason codes the console words and flags."""
    assets = resources.files("resolver.human") / "console"
    cached = {
        name: (assets / name).read_bytes() for name in CONSOLE_FILES if name != CONSOLE_CONFIG
    }
    # How long a strong sign-in counts for a decision: the console says when it runs out.
    document = {
        **config.public_document(),
        "strong_auth_seconds": strong_auth_seconds,
        "evidence_reasons": reasons.public_document(),
    }
    cached[CONSOLE_CONFIG] = json.dumps(document).encode()
    headers = {
        "Content-Security-Policy": config.content_security_policy(),
        "Referrer-Policy": "no-referrer",
    }
    router = APIRouter(include_in_schema=False)

    def serve(name: str) -> Response:
        return Response(cached[name], media_type=CONSOLE_FILES[name], headers=headers)

    @router.get("/console")
    def console() -> Response:
        return serve("index.html")

    @router.get("/console/{name}")
    def console_asset(name: str) -> Response:
        if name not in CONSOLE_FILES or name == "index.html":
            raise ApiError(404, "not_found", "no such page")
        return serve(name)

    return router
