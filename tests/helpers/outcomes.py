"""Reading the outcome feed in a test: the whole feed once its horizon has passed now.

The feed hands out a record only once every transaction that could still commit below it has
ended, and that horizon is the cluster's: a transaction in any database of the same server (a
test on another worker, the fixture copying the next test database) holds it back. A test that
read once right after its own commit could find nothing on a busy server, so it waits for the
horizon to pass the moment it asks, then reads everything: a record too many fails the test as
surely as one missing.
"""

from __future__ import annotations

import psycopg

from resolver.core.domain import OutcomeRecord
from resolver.outcomes import OutcomeFeed
from tests.helpers.telemetry import wait_for

HORIZON_SECONDS = 120.0


def feed_of(database_url: str, *, project_id: str | None = None) -> list[OutcomeRecord]:
    """Every record in the feed once the horizon has passed every transaction begun before
    this call (all that had committed by then is readable)."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
    assert row is not None
    target = int(row[0])
    with OutcomeFeed(database_url) as feed:
        wait_for(
            "the feed's horizon past this moment",
            lambda: True if int(feed.cursor_now().split(":")[0]) >= target else None,
            timeout_seconds=HORIZON_SECONDS,
        )
        return feed.read(limit=1000, project_id=project_id)
