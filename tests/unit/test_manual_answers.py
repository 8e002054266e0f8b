"""Every answer the database gives a human write means one thing to the caller: a result, or
one refusal (the sets themselves are tied to the SQL functions in
tests/integration/schema/test_domain_sets.py)."""

from __future__ import annotations

from resolver.core.domain import ManualCommitAnswer, ProposalCloseAnswer
from resolver.human.manual import CLOSE_REFUSALS, CLOSED, PROPOSAL_REFUSALS, WRITTEN


def test_each_answer_of_the_manual_commit_is_a_result_or_a_refusal() -> None:
    assert set(WRITTEN) | set(PROPOSAL_REFUSALS) == set(ManualCommitAnswer)
    assert set(WRITTEN).isdisjoint(PROPOSAL_REFUSALS)
    assert WRITTEN[ManualCommitAnswer.PROPOSED].value == "proposed"


def test_each_answer_of_a_proposal_close_is_a_result_or_a_step_up() -> None:
    handled = [set(CLOSED), {ProposalCloseAnswer.STALE_AUTH}]
    assert set().union(*handled) == set(ProposalCloseAnswer)
    assert sum(map(len, handled)) == len(ProposalCloseAnswer)  # none handled twice


def test_the_refusals_of_a_close_are_the_service_s_own_reading_of_the_case() -> None:
    """A close the database refuses raises (RS007, RS008); the service names why from the
    case it read, with the codes the API documents."""
    assert {code for code, _ in CLOSE_REFUSALS.values()} == {
        "no_proposal",
        "not_proposer",
        "own_proposal",
        "conflict",
    }
