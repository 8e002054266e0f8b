"""Each domain set is spelled once in the database and once in Python, and the two agree.

The database reads its sets from resolver_terminal_states(), resolver_finding_kinds(),
resolver_finding_outcome(), resolver_decision_settles() and the routing rule
resolver_finding_status(); Python from resolver.core.domain. The console's copies of the
shapes are compared with Python's too, and so are the answers of the human writes.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from resolver.core.domain import (
    ACTION_TYPE_PATTERN,
    ACTION_TYPE_REGEX,
    BIGINT_MAX,
    FINDING_ROUTE,
    ID_REGEX,
    REASON_CODE_REGEX,
    TERMINAL_STATES,
    Decision,
    ExecutionState,
    Finding,
    FindingKind,
    ManualCommitAnswer,
    Outcome,
    ProposalCloseAnswer,
)
from resolver.core.domain.outcomes import OutcomeKind, SettledBy
from resolver.db.definitions import schema_script

ROOT = Path(__file__).resolve().parents[3]
CONSOLE = ROOT / "resolver" / "human" / "console"


def _console_source() -> str:
    """Every module of the console, one after the other."""
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(CONSOLE.glob("*.js")))


def _one(url: str, query: str, *params: object) -> object:
    with psycopg.connect(url) as conn:
        row = conn.execute(query, params or None).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def test_the_terminal_states_are_one_set(database_url: str) -> None:
    in_sql = _one(database_url, "SELECT resolver_terminal_states()")
    assert set(in_sql) == {state.value for state in TERMINAL_STATES}  # type: ignore[call-overload]
    assert set(ExecutionState) > TERMINAL_STATES


def test_the_finding_kinds_and_their_routing_are_one_rule(database_url: str) -> None:
    kinds = [kind.value for kind in FindingKind]
    assert set(_one(database_url, "SELECT resolver_finding_kinds()")) == set(kinds)  # type: ignore[call-overload]
    routes = _one(
        database_url,
        "SELECT json_object_agg(k, resolver_finding_status(k)) FROM unnest(%s::text[]) AS k",
        kinds,
    )
    assert routes == {kind.value: status.value for kind, status in FINDING_ROUTE.items()}
    assert set(FINDING_ROUTE) == set(FindingKind)


def test_what_verified_evidence_settles_is_one_mapping(database_url: str) -> None:
    settles = _one(
        database_url,
        "SELECT json_object_agg(k, resolver_finding_outcome(k)) FROM unnest(%s::text[]) AS k",
        [kind.value for kind in FindingKind],
    )
    in_python: dict[str, str | None] = {kind.value: None for kind in FindingKind}
    for outcome in Outcome:
        finding = Finding.verified(outcome, "0" * 64, "ok")
        in_python[finding.kind.value] = finding.outcome.value if finding.outcome else None
    assert settles == in_python


def test_what_each_decision_settles_is_one_mapping(database_url: str) -> None:
    names = [decision.value for decision in Decision] + ["not_a_decision"]
    settles = _one(
        database_url,
        "SELECT json_object_agg(d, resolver_decision_settles(d)) FROM unnest(%s::text[]) AS d",
        names,
    )
    assert settles == {
        **{decision.value: decision.terminal_state.value for decision in Decision},
        "not_a_decision": None,
    }
    # Every decision settles a terminal state, and each terminal state has its decision.
    assert {decision.terminal_state for decision in Decision} == TERMINAL_STATES


ACTION_TYPES = [
    *["a", "z" * 64, "z" * 65, "", "a.b_c-d", "a0", "pkg.install", "A", "0a", "_a", ".a"],
    *["a b", "a\n", "a/b", "a:b", "aé", "a*", "a" + "-" * 63],
]


def test_python_and_the_database_check_one_action_type_shape(database_url: str) -> None:
    # The dispatch's check is the database's helper, spelled as a length and character
    # classes: it gives the Python pattern's verdict on every edge (and so does the pattern
    # itself, run by PostgreSQL).
    assert "resolver_is_action_type(p_action_type)" in schema_script()
    verdicts = _one(
        database_url,
        "SELECT json_object_agg(v, json_build_array(coalesce(resolver_is_action_type(v), false),"
        " v ~ %s)) FROM unnest(%s::text[]) AS v",
        ACTION_TYPE_REGEX,
        ACTION_TYPES,
    )
    expected = {v: ACTION_TYPE_PATTERN.match(v) is not None for v in ACTION_TYPES}
    assert verdicts == {v: [ok, ok] for v, ok in expected.items()}


@pytest.mark.parametrize(
    ("domain", "members"),
    [("resolver_outcome_kind", OutcomeKind), ("resolver_settled_by", SettledBy)],
)
def test_the_outcome_feeds_sets_are_pythons(
    database_url: str, domain: str, members: type[OutcomeKind] | type[SettledBy]
) -> None:
    # A feed record's kind and who settled it: a domain's check in the database, an enum in
    # Python. The check names exactly the enum's members.
    check = _one(
        database_url,
        "SELECT pg_get_constraintdef(k.oid) FROM pg_constraint AS k WHERE k.contypid = %s::regtype",
        domain,
    )
    assert set(re.findall(r"'([a-z_]+)'::text", str(check))) == {m.value for m in members}
    with psycopg.connect(database_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(f"SELECT 'unknown'::{domain}")  # type: ignore[call-overload]


def test_the_bigint_bound_is_the_databases(database_url: str) -> None:
    assert _one(database_url, "SELECT %s::numeric::bigint", BIGINT_MAX) == BIGINT_MAX
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        _one(database_url, "SELECT %s::numeric::bigint", BIGINT_MAX + 1)


# Each set as an inline list, in either quoting: where the grep of the spelled-out set looks.
TERMINAL_LIST = re.compile(r"""(['"])succeeded\1,\s*(['"])failed\2,\s*(['"])blocked\3""")


def _spellings(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{n}"
        for path in paths
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TERMINAL_LIST.search(line)
    ]


def test_the_terminal_set_is_spelled_once_in_sql_and_once_in_python() -> None:
    resolver = ROOT / "resolver"
    migrations = resolver / "db" / "migrations"
    sql = [p for p in resolver.rglob("*.sql") if migrations not in p.parents]
    python = list(resolver.rglob("*.py"))
    assert [s.split(":")[0] for s in _spellings(sql)] == [
        "resolver/db/schema/functions/01_recovery_core.sql"
    ]
    assert [s.split(":")[0] for s in _spellings(python)] == ["resolver/core/domain/sets.py"]
    # The console tells a settled execution by its finish time (a CHECK ties the two).
    assert _spellings(list(resolver.rglob("*.js"))) == []


def _js_regex(name: str) -> str:
    found = re.findall(rf"const {name} = /(.+)/;", _console_source())
    assert len(found) == 1, f"{name} is not defined once in the console's modules"
    return str(found[0])


def test_the_consoles_shapes_are_pythons() -> None:
    assert _js_regex("ID_SHAPE") == ID_REGEX
    # The reason code as an HTML `pattern` attribute: anchored by the browser, escaped once
    # more inside the JavaScript string.
    source = _console_source()
    attributes = set(re.findall(r'name: "reason_code"[^}]*pattern: "([^"]+)"', source))
    unescaped = {a.replace("\\\\", "\\") for a in attributes}
    assert unescaped == {REASON_CODE_REGEX.removeprefix("^").removesuffix("$")}


# The answers of the human writes: each a literal of its function's body in SQL, and one
# enum in Python (the store parses the answer into it, the service maps every member).
def _body(url: str, function: str) -> str:
    bodies = _one(url, "SELECT array_agg(prosrc) FROM pg_proc WHERE proname = %s", function)
    assert isinstance(bodies, list) and len(bodies) == 1, function
    return str(bodies[0])


def test_the_manual_commits_answers_are_one_set(database_url: str) -> None:
    body = _body(database_url, "resolver_commit_manual")
    assert set(re.findall(r"'([a-z_]+)'::text", body)) == set(ManualCommitAnswer)


def test_the_proposal_closes_answers_are_one_set(database_url: str) -> None:
    body = _body(database_url, "resolver_proposal_close")
    answers = set(re.findall(r"\bresult := '([a-z_]+)'", body))
    closed_as = re.search(r"v_closed_as := CASE [^;]*", body)
    assert closed_as, "how the close names a closed proposal"
    answers |= set(re.findall(r"(?:THEN|ELSE) '([a-z_]+)'", closed_as.group()))
    assert answers == set(ProposalCloseAnswer)
