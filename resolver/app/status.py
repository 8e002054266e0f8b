"""`resolver status`: the backlog rendered as a table or as JSON, from the read model that
/metrics reports."""

from __future__ import annotations

from typing import Any

from resolver.core.domain import BacklogSnapshot


def status_document(snapshot: BacklogSnapshot) -> dict[str, Any]:
    """The same figures as the backlog gauges of /metrics, from the same read model."""
    queues = snapshot.by_queue()
    return {
        "controls": snapshot.controls_by_status(),
        "queues": queues,
        "action_types": {
            f"{queue}/{action_type}": count
            for (queue, action_type), count in sorted(snapshot.dispatches.items())
        },
        "due": queues["due"],
        "count_cap": snapshot.count_cap,
        "capped": snapshot.capped,
        "oldest_claimable_age_seconds": snapshot.oldest_claimable_age_seconds,
        "oldest_manual_age_seconds": snapshot.oldest_manual_age_seconds,
    }


def status_text(snapshot: BacklogSnapshot) -> str:
    doc = status_document(snapshot)
    at_least = "at least " if doc["capped"] else ""
    lines = [f"{'queue':<10}{'controls':>10}"]
    lines += [f"{name:<10}{count:>10}" for name, count in doc["queues"].items()]
    lines += [f"  {key:<30}{count:>8}" for key, count in doc["action_types"].items()]
    lines.append(
        f"due now: {at_least}{doc['due']}"
        f"   oldest claimable: {doc['oldest_claimable_age_seconds']:.1f}s"
        f"   oldest manual: {doc['oldest_manual_age_seconds']:.1f}s"
    )
    return "\n".join(lines)
