"""The manual-resolution HTTP API: what the composition root, the command and tests use."""

from resolver.core.domain import BIGINT_MAX
from resolver.human.api.app import (
    MAX_BODY_BYTES,
    RateLimiter,
    create_app,
    openapi_document,
)

__all__ = ["BIGINT_MAX", "MAX_BODY_BYTES", "RateLimiter", "create_app", "openapi_document"]
