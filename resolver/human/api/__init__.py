"""The manual-resolution HTTP API: what the composition root, the command and tests use."""

from resolver.human.api.app import (
    BIGINT_MAX,
    MAX_BODY_BYTES,
    RateLimiter,
    create_app,
    openapi_document,
)

__all__ = ["BIGINT_MAX", "MAX_BODY_BYTES", "RateLimiter", "create_app", "openapi_document"]
