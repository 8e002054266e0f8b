"""The example order-desk agent as the crash matrix drives it, one phase per process.

    python tests/langgraph/crash_agent.py <database_url> <thread> <tool> <phase> <json>

`phase`: `start` (run until the approval interrupt), `resume` (answer it with the approval in
`<json>` and, when `<json>` names a `crash` step, SIGKILL this process at that step), or
`restart` (continue the thread from its last checkpoint, as a process started after a crash).
Prints one JSON line: the interrupt it stopped at, or the reply and the tool results. The
crash injection lives here, in the tests: the product only reports its steps to an observer.
The matrix's rig runs `run` in a process forked for the phase (tests/langgraph/harness.py).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.types import Command

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "langgraph"))

import order_agent  # noqa: E402

from resolver.evidence.receipts import KeyRing  # noqa: E402
from resolver.integrations.langgraph import ApprovedActionNode  # noqa: E402

LEASE_SECONDS = 2.0
TOOL_ARGS: dict[str, dict[str, Any]] = {
    "create_order": {"order_id": "ord-9", "customer": "acme", "sku": "widget", "quantity": 2},
    "cancel_order": {"order_id": "ord-7"},
    "adjust_stock": {"sku": "gadget", "delta": 4},
    "set_status": {"order_id": "ord-7", "status": "shipped"},
}


def killer(at: str | None) -> Any:
    def observe(step: str, dispatch_id: str) -> None:
        if step == at:
            os.kill(os.getpid(), signal.SIGKILL)

    return observe


def outcome(result: dict[str, Any]) -> dict[str, Any]:
    if "__interrupt__" in result:
        return {"interrupt": result["__interrupt__"][0].value}
    messages = result["messages"]
    tools = [json.loads(str(m.content)) for m in messages if isinstance(m, ToolMessage)]
    return {"reply": str(messages[-1].content), "tools": tools}


def run(url: str, thread: str, tool: str, phase: str, argument: str) -> dict[str, Any]:
    """One phase of the agent, in this process: where it stopped, as `outcome` says."""
    given = json.loads(argument)
    observer = killer(given.get("crash"))
    keys = KeyRing.from_environment()
    config = {"configurable": {"thread_id": thread}}
    plan = [(tool, TOOL_ARGS[tool])]
    with (
        ApprovedActionNode(
            order_agent.tools(),
            database_url=url,
            keys=keys,
            lease_seconds=LEASE_SECONDS,
            recovery_wait_seconds=120,
            observer=observer,
        ) as node,
        PostgresSaver.from_conn_string(url) as saver,
    ):
        graph = order_agent.build(node, plan, saver, observer)
        if phase == "start":
            saver.setup()
            result = graph.invoke(
                {"messages": [HumanMessage(f"please {tool}")]}, config, durability="sync"
            )
        elif phase == "resume":
            result = graph.invoke(Command(resume=given["approval"]), config, durability="sync")
        else:
            result = graph.invoke(None, config, durability="sync")
    return outcome(result)


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:6])), flush=True)
