"""Unauthenticated probes that answer a status word only: the API port may face users, so the
schema revision and failure reasons stay on the metrics port."""

# No `from __future__ import annotations`: FastAPI resolves the endpoint annotations.

from collections.abc import Callable

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from resolver.core.liveness import Probe


def probes_router(readiness: Callable[[], Probe] | None) -> APIRouter:
    """`/healthz` always; `/readyz` when the composition root gives a readiness check."""
    router = APIRouter(include_in_schema=False)

    # On the event loop, not the thread pool: it answers while the loop does, even when every
    # worker thread waits for the database.
    @router.get("/healthz")
    async def healthz() -> Response:
        return JSONResponse({"status": "ok"})

    if readiness is not None:
        ready = readiness

        @router.get("/readyz")
        def readyz() -> Response:
            ok = ready().ok
            return JSONResponse(
                {"status": "ready" if ok else "not_ready"}, status_code=200 if ok else 503
            )

    return router
