"""JSON logs on stderr for everything: our structlog events and every stdlib logger
(uvicorn, alembic, libraries), tracebacks included as structured fields."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import Processor

from resolver.core.errors import ConfigError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def parse_level(value: str) -> str:
    """A level name (any case), or a ConfigError naming the variable and the choices."""
    level = value.strip().upper()
    if level not in LEVELS:
        raise ConfigError(
            f"RESOLVER_LOG_LEVEL={value!r} is not a log level; use one of {', '.join(LEVELS)}"
        )
    return level


def configure(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Every log line is one JSON object; `stream` defaults to the current stderr."""
    level = parse_level(level)
    out = stream if stream is not None else sys.stderr
    # Locals in a traceback may hold a token or a connection string: never render them.
    exceptions = structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
    stamp: list[Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *stamp],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                exceptions,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # The pool's reconnect chatter would repeat what StorageUnavailable already reports.
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        # uvicorn may have installed its own text handlers; its lines go through the root's.
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *stamp,
            exceptions,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level]),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )


def uvicorn_options() -> dict[str, Any]:
    """uvicorn without its own logging setup and access log: the API's edge writes a JSON
    access line without the query string instead."""
    return {"log_config": None, "access_log": False}
