"""Find by words of what was approved, over real HTTP and real PostgreSQL: partial and any
case, in every state, only in the caller's projects, in the summary's title, labels and
values (never its JSON keys), with quotes and LIKE wildcards taken literally."""

from __future__ import annotations

import time

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import ActionSummary, Completion, FindingKind, Outcome
from resolver.executor import ExecutionClient
from tests.helpers.api import auth
from tests.helpers.database import SQL, new_spec
from tests.helpers.oidc import token
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.stores import Storage


def find(api: httpx.Client, key: rsa.RSAPrivateKey, words: str) -> list[tuple[str, str]]:
    answer = api.get("/v1/find", params={"words": words}, headers=auth(token(key)))
    assert answer.status_code == 200, answer.text
    return [(item["dispatch_id"], item["matched_by"]) for item in answer.json()["items"]]


def asked(api: httpx.Client, key: rsa.RSAPrivateKey, **params: str) -> int:
    return api.get("/v1/find", params=params, headers=auth(token(key))).status_code


def test_find_by_words_of_what_was_approved_in_every_state_and_only_where_one_may_read(
    api: httpx.Client, signing_key: rsa.RSAPrivateKey, store: Storage, sql: SQL
) -> None:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-2', 1)")
    executor = ExecutionClient(store, owner="pay-worker-3", lease_seconds=0.001)
    now = int(time.time() * 1000)

    def dispatch(title: str, facts: dict[str, str], project: str = "proj-1") -> str:
        summary = ActionSummary.of(title, facts)
        spec = executor.create_dispatch(
            new_spec("pay.refund", action_summary=summary, project_id=project)
        )
        return spec.dispatch_id

    # Open in the manual queue, settled by its executor, and one alice may not read.
    queued = dispatch("Refund 18.50 EUR to customer 4471", {"Order": "ord-7781"})
    lease = executor.at(now).lease(queued)
    executor.at(now).start(lease)
    reconciler(
        store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED)), action_type="pay.refund"
    ).at(now + 10).run_cycle()
    settled = dispatch("Charge 2,490.00 EUR", {"Order": "ord-7782", "Note": 'paid "in full"'})
    done = ExecutionClient(store, owner="pay-worker-3", lease_seconds=60)
    running = done.at(now).start(done.at(now).lease(settled))
    done.at(now + 5).complete(running, Completion(Outcome.SUCCEEDED, "charged", "m-1"))
    hidden = dispatch("Refund to customer 4471", {"Order": "ord-7789"}, project="proj-2")

    # Partial, any case, open and settled alike; proj-2 stays out; newest first.
    assert find(api, signing_key, "ORD-778") == [(settled, "summary"), (queued, "summary")]
    assert find(api, signing_key, "customer 4471") == [(queued, "summary")]
    assert hidden not in [d for d, _ in find(api, signing_key, "ord-7789")]
    # A fact's label is words of the summary too; the JSON's own keys are not.
    assert [d for d, _ in find(api, signing_key, "order")] == [settled, queued]
    assert find(api, signing_key, "facts") == []
    assert find(api, signing_key, "title") == []
    # Quotes match themselves; `%` and `_` are characters, not wildcards.
    assert find(api, signing_key, '"in full"') == [(settled, "summary")]
    assert find(api, signing_key, "2_490") == []
    assert find(api, signing_key, "2%490") == []
    # Ids are found exactly through q, never as words: words find no id.
    by_id = api.get("/v1/find", params={"q": f"idem-{queued}"}, headers=auth(token(signing_key)))
    assert [(i["dispatch_id"], i["matched_by"]) for i in by_id.json()["items"]] == [
        (queued, "idempotency_key")
    ]
    assert find(api, signing_key, f"idem-{queued}") == []
    # Two characters are not a search, a control character is not a query, and one asks for
    # ids or words, not both and not neither.
    assert asked(api, signing_key, words="EU") == 422
    assert asked(api, signing_key, words="ord\n7781") == 422
    assert asked(api, signing_key, q=queued, words="ord-7781") == 422
    assert asked(api, signing_key) == 422
