"""An order-desk agent whose tools change an ERP only with a person's approval, and survive a
crash at any moment: a LangGraph graph (its own PostgreSQL checkpointer) whose tool node is
the resolver's `ApprovedActionNode`.

    pip install -e '.[langgraph]'
    python examples/langgraph/order_agent.py            # a private PostgreSQL, approvals asked
    python examples/langgraph/order_agent.py --yes      # every approval granted at once

With `DATABASE_URL` set it uses that database (migrated with `resolver migrate` first, the ERP
tables created if missing). Kill it at any point (`kill -9`) and run it again with the
`--thread` it printed: the graph resumes from its last checkpoint, the tool node asks the
resolver what became of the dispatch, and no order is created twice. No language model is
needed: the model is a script, the graph, the checkpointer and the database are real.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

sys.path.insert(0, str(Path(__file__).resolve().parent))
import orders

from resolver.executor import ActionSummary, KeyRing, Outcome
from resolver.integrations.langgraph import (
    Approval,
    ApprovedAction,
    ApprovedActionNode,
    EffectCall,
    EffectResult,
    Observer,
    unobserved,
)

PROJECT = "order-desk"
APPROVAL_SECONDS = 300
# The demo's receipt key, used only when RESOLVER_RECEIPT_KEYS is unset.
DEMO_KEY = "agent-k1=" + "5a" * 32


def _effect(operation: Callable[..., orders.Answer], *names: str) -> Any:
    def effect(conn: Any, call: EffectCall) -> EffectResult:
        applied, code, response = operation(
            conn, call.idempotency_key, **{n: call.args[n] for n in names}
        )
        return EffectResult(
            Outcome.SUCCEEDED if applied else Outcome.FAILED,
            code,
            receipt_id=f"erp:{call.idempotency_key}",
            detail=response,
        )

    return effect


def tools() -> list[ApprovedAction]:
    """The four write tools: each a change of the ERP a person approves first."""
    return [
        ApprovedAction(
            name="create_order",
            action_type="erp.order.create",
            project_id=PROJECT,
            summarize=lambda a: ActionSummary.of(
                f"Create order {a['order_id']} for {a['customer']}",
                {"Item": f"{a['quantity']} x {a['sku']}"},
            ),
            effect=_effect(orders.create_order, "order_id", "customer", "sku", "quantity"),
        ),
        ApprovedAction(
            name="cancel_order",
            action_type="erp.order.cancel",
            project_id=PROJECT,
            summarize=lambda a: ActionSummary.of(f"Cancel order {a['order_id']}"),
            effect=_effect(orders.cancel_order, "order_id"),
        ),
        ApprovedAction(
            name="adjust_stock",
            action_type="erp.stock.adjust",
            project_id=PROJECT,
            summarize=lambda a: ActionSummary.of(
                f"Adjust stock of {a['sku']}", {"Change": f"{a['delta']:+d}"}
            ),
            effect=_effect(orders.adjust_stock, "sku", "delta"),
        ),
        ApprovedAction(
            name="set_status",
            action_type="erp.order.status",
            project_id=PROJECT,
            summarize=lambda a: ActionSummary.of(f"Set order {a['order_id']} to {a['status']}"),
            effect=_effect(orders.set_status, "order_id", "status"),
        ),
    ]


class ScriptedModel:
    """The model: calls the planned tools one after another, then replies with what each
    call came to. A real model plugs in the same way (a node answering an AIMessage)."""

    def __init__(self, plan: Sequence[tuple[str, Mapping[str, Any]]], observer: Observer) -> None:
        self._plan = list(plan)
        self._observe = observer

    def __call__(self, state: MessagesState) -> dict[str, Any]:
        results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if len(results) < len(self._plan):
            name, args = self._plan[len(results)]
            call = {"name": name, "args": dict(args), "id": f"call-{len(results) + 1}"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        self._observe("replying", "")
        lines = []
        for message in results:
            body = json.loads(str(message.content))
            lines.append(f"{message.name}: {body['state']} ({body.get('result_code')})")
        return {"messages": [AIMessage(content="Done. " + "; ".join(lines))]}


def build(
    node: ApprovedActionNode,
    plan: Sequence[tuple[str, Mapping[str, Any]]],
    checkpointer: PostgresSaver,
    observer: Observer | None = None,
) -> Any:
    """agent -> tools -> agent ... -> END, checkpointed in PostgreSQL."""
    graph = StateGraph(MessagesState)
    graph.add_node("agent", ScriptedModel(plan, observer or unobserved))
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def database_now_ms(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT resolver_now_ms(NULL)").fetchone()
    assert row is not None
    return int(row[0])


def approve(url: str) -> dict[str, Any]:
    """What the platform's approval UI records: an approval request id and its expiry."""
    expires_at_ms = database_now_ms(url) + APPROVAL_SECONDS * 1000
    return Approval.granted(f"ar-{uuid.uuid4().hex[:12]}", expires_at_ms)


def prepare(url: str) -> None:
    env = os.environ | {"RESOLVER_DATABASE_URL": url}
    subprocess.run([sys.executable, "-m", "resolver", "migrate"], env=env, check=True)
    with psycopg.connect(url, autocommit=True) as conn:
        orders.install(conn)
        orders.seed(conn)


@contextlib.contextmanager
def database() -> Iterator[str]:
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    from resolver.demo import localpg

    cluster = localpg.start(Path(".order-agent") / "pg")
    try:
        yield cluster.url
    finally:
        cluster.stop()


PLAN = [
    ("create_order", {"order_id": "ord-1001", "customer": "acme", "sku": "widget", "quantity": 3}),
    ("set_status", {"order_id": "ord-1001", "status": "packed"}),
]


def converse(graph: Any, url: str, thread: str, *, ask: Callable[[Mapping[str, Any]], bool]) -> str:
    config = {"configurable": {"thread_id": thread}}
    pending = graph.get_state(config)
    if pending.next:
        result = graph.invoke(None, config, durability="sync")  # resume after a crash
    elif pending.values:
        return str(pending.values["messages"][-1].content)
    else:
        start = HumanMessage("Order 3 widgets for acme as ord-1001, then mark it packed.")
        result = graph.invoke({"messages": [start]}, config, durability="sync")
    while "__interrupt__" in result:
        request = result["__interrupt__"][0].value
        answer = approve(url) if ask(request) else Approval.declined()
        result = graph.invoke(Command(resume=answer), config, durability="sync")
    return str(result["messages"][-1].content)


def _ask(request: Mapping[str, Any]) -> bool:
    summary = request["summary"]
    facts = ", ".join(f"{f['label']}: {f['value']}" for f in summary.get("facts", []))
    print(f"approval needed: {summary['title']}" + (f" ({facts})" if facts else ""))
    return input("approve? [y/N] ").strip().lower() == "y"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--yes", action="store_true", help="grant every approval")
    parser.add_argument("--thread", default=None, help="continue this conversation")
    args = parser.parse_args(argv)
    os.environ.setdefault("RESOLVER_RECEIPT_KEYS", DEMO_KEY)
    os.environ.setdefault("RESOLVER_RECEIPT_SIGNING_KID", DEMO_KEY.split("=")[0])
    thread = args.thread or f"order-desk-{uuid.uuid4().hex[:8]}"
    with database() as url:
        prepare(url)
        print(f"thread {thread} (rerun with --thread {thread} after a crash)")
        keys = KeyRing.from_environment()
        with (
            ApprovedActionNode(tools(), database_url=url, keys=keys) as node,
            PostgresSaver.from_conn_string(url) as saver,
        ):
            saver.setup()
            graph = build(node, PLAN, saver)
            reply = converse(graph, url, thread, ask=(lambda _r: True) if args.yes else _ask)
    print(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
