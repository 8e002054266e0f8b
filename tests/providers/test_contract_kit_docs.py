"""The contract kit as docs/providers.md describes it: its extra, and its scenario table."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from resolver.evidence.contract import EXPECTED, REQUIRED, Scenario

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
