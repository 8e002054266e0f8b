"""The contract kit as docs/providers.md describes it: its extra, and its scenario table."""

from __future__ import annotations

import re
import textwrap
import tomllib
from pathlib import Path
from typing import Any

from resolver.evidence import DispatchIdentity, Finding, FindingKind, ProviderFailure
from resolver.evidence.contract import EXPECTED, REQUIRED, Scenario, undeclared_reasons
from tests.helpers.database import SQL

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "providers.md"


def test_the_contract_extra_installs_pytest() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = project["optional-dependencies"]["contract"]
    assert any(re.match(r"pytest\b", requirement) for requirement in extra)
    assert "[contract]" in DOC.read_text(encoding="utf-8")


def test_the_scenario_table_is_the_kit_s() -> None:
    rows = re.findall(
        r"^\s*\| `(\w+)` \| [^|]+ \| `(\w+)` \| (yes|no) \|$",
        DOC.read_text(encoding="utf-8"),
        re.M,
    )
    documented = {name: (finding, optional) for name, finding, optional in rows}
    assert documented == {
        scenario.value: (EXPECTED[scenario].value, "no" if scenario in REQUIRED else "yes")
        for scenario in Scenario
    }


def provider_example() -> str:
    (block,) = [
        b
        for b in re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
        if "class RefundProvider" in b
    ]
    return textwrap.dedent(block)


def test_the_whole_provider_example_runs(database_url: str, sql: SQL) -> None:
    # The page's example provider, as written, against a real source: no row is missing, a
    # row it cannot bind is a conflict, never a success.
    sql.all("CREATE TABLE refunds (idempotency_key text PRIMARY KEY, state text NOT NULL)")
    namespace: dict[str, Any] = {}
    exec(compile(provider_example(), "providers.md", "exec"), namespace)
    provider = namespace["create"]({"database_url": database_url, "timeout_seconds": 2})
    try:
        identity = DispatchIdentity(
            schema_version=1,
            dispatch_id="d-doc",
            approval_request_id="ar-doc",
            project_id="p",
            action_type="billing.refund",
            action_digest="a" * 64,
            attempt=1,
            started_at_ms=1,
            idempotency_key="idem-doc",
        )
        assert provider.inspect(identity) == Finding(FindingKind.MISSING, cause="no_refund")
        sql.all("INSERT INTO refunds VALUES ('idem-doc', 'done')")
        conflict = provider.inspect(identity)
        assert conflict == Finding(FindingKind.CONFLICT, cause="refund_not_bound")
        sql.all("DROP TABLE refunds")
        unavailable = provider.inspect(identity)
        assert unavailable == Finding(
            FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause="sqlstate_42p01"
        )
        # What it declares: every code it gave, the tampering flag, its window.
        declaration = namespace["create"].declaration
        assert undeclared_reasons(declaration, [conflict, unavailable]) == set()
        reasons = {r.code: r for r in declaration.reasons}
        assert reasons["refund_not_bound"].suggests_tampering
        assert declaration.escalate_after_seconds == {FindingKind.MISSING: 3600}
    finally:
        provider.close()
