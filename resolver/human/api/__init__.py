"""The manual-resolution HTTP API: what the composition root, the command and tests use."""

from resolver.core.domain import BIGINT_MAX
from resolver.human.api.app import create_app, openapi_document
from resolver.human.api.limits import RateLimiter
from resolver.human.api.models import MAX_BODY_BYTES

__all__ = ["BIGINT_MAX", "MAX_BODY_BYTES", "RateLimiter", "create_app", "openapi_document"]
