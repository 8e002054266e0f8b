"""How the live demo shows itself: a redrawn table on a terminal, plain lines elsewhere."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from resolver.demo.executor import Story
from resolver.demo.live import LiveView

if TYPE_CHECKING:
    from rich.console import RenderableType

Renderer = Callable[[LiveView], None]


def plain_renderer(out: TextIO, *, every_seconds: float = 2.0) -> Renderer:
    """One summary line every few seconds and each event once: for logs, CI and pipes."""
    shown_events: set[str] = set()
    shown_url: list[str | None] = [None]
    last = [0.0]

    def render(view: LiveView) -> None:
        for event in view.events:
            if event not in shown_events:
                shown_events.add(event)
                out.write(f"event {event}\n")
        if view.console_url and view.console_url != shown_url[0]:
            shown_url[0] = view.console_url
            out.write(f"console: {view.console_url}\n")
        if time.monotonic() - last[0] >= every_seconds:
            last[0] = time.monotonic()
            out.write(summary_line(view) + "\n")
        out.flush()

    return render


def summary_line(view: LiveView) -> str:
    status = view.status
    controls = status.controls_by_status() if status else {}
    due = status.by_queue()["due"] if status else "?"
    resolved = view.resolved if view.resolved is not None else "?"
    replicas = " ".join(f"{r.name}={r.state}:{r.claimed}c/{r.resolved}r" for r in view.replicas)
    sent = sum(view.executor.dispatched.values())
    return (
        f"t={view.elapsed_seconds:.0f}s phase={view.phase!r} dispatched={sent} "
        f"due={due} armed={controls.get('armed', 0)} "
        f"manual={controls.get('manual', 0)} resolved={resolved} "
        f"late={view.executor.late_committed}won/{view.executor.late_replayed}replayed "
        f"replicas: {replicas}"
    )


def rich_renderer() -> tuple[Renderer, Callable[[], None]]:
    """A live-updating terminal view (rich); returns the renderer and a function to close it."""
    from rich.console import Group
    from rich.live import Live

    live = Live(auto_refresh=False, screen=False, transient=False)
    live.start()
    printed: list[str | None] = [None]

    def render(view: LiveView) -> None:
        if view.console_url and view.console_url != printed[0]:
            # Above the live region and soft-wrapped: the terminal wraps it, so it copies as
            # one line (a box around it would add borders and newlines to the copy).
            printed[0] = view.console_url
            live.console.print("operator console (DEMO-ONLY token, valid a few minutes):")
            live.console.print(view.console_url, soft_wrap=True, style="cyan", highlight=False)
        live.update(Group(*_panels(view)), refresh=True)

    return render, live.stop


def _panels(view: LiveView) -> list[RenderableType]:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    status = view.status
    controls = status.controls_by_status() if status else {}
    backlog = Table(title="Recovery controls (database)", expand=True)
    for column in ("due now", "armed", "manual queue", "resolved", "oldest claimable"):
        backlog.add_column(column, justify="right")
    backlog.add_row(
        str(status.by_queue()["due"]) if status else "?",
        str(controls.get("armed", 0)),
        str(controls.get("manual", 0)),
        str(view.resolved) if view.resolved is not None else "?",
        f"{status.oldest_claimable_age_seconds:.1f}s" if status else "?",
    )
    replicas = Table(title="Replicas (`resolver run`, from each one's /metrics)", expand=True)
    for column in ("replica", "state", "claimed", "resolved", "fence rejected"):
        replicas.add_column(column, justify="left" if column in ("replica", "state") else "right")
    for r in view.replicas:
        style = "red" if r.state == "killed" else ("green" if r.state == "running" else "yellow")
        replicas.add_row(
            r.name,
            Text(r.state, style=style),
            str(r.claimed),
            str(r.resolved),
            str(r.fence_rejected),
        )
    executor = Table(title="Executor simulator (dispatches by story)", expand=True)
    for story in Story:
        executor.add_column(story.value, justify="right")
    executor.add_column("late: completion won / replayed", justify="right")
    executor.add_row(
        *(str(view.executor.dispatched.get(s, 0)) for s in Story),
        f"{view.executor.late_committed} / {view.executor.late_replayed}",
    )
    lines = Text("\n".join(view.events) or "…")
    header = Text(f"{view.phase}   t={view.elapsed_seconds:.0f}s", style="bold")
    events = Panel(lines, title="events")
    parts: list[RenderableType] = [header, backlog, replicas, executor, events]
    if view.console_url:
        parts.append(
            Text(
                "The operator console link is printed above (and in console-url.txt in the "
                "data directory): open it and decide a manual item. Ctrl-C stops everything.",
                style="cyan",
            )
        )
    return parts
