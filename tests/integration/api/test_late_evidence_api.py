"""Late evidence over real HTTP: the case lists it, the decisions list says `contradicted`."""

from __future__ import annotations

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import FindingKind
from resolver.core.late_evidence import LateEvidenceSettings, LateEvidenceWatcher
from resolver.core.provider import ProviderRegistry
from tests.helpers.api import auth, body
from tests.helpers.oidc import token
from tests.helpers.providers import ScriptedProvider, fixed, verified
from tests.helpers.stores import Storage


def test_a_contradicting_receipt_shows_in_the_case_and_the_decisions_list(
    api: httpx.Client,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    store: Storage,
) -> None:
    dispatch_id, version = manual_item
    headers = auth(token(signing_key))
    # confirm_failed; the receipt then says the action succeeded.
    decided = api.post(
        f"/v1/dispatches/{dispatch_id}/resolution", json=body(version), headers=headers
    )
    assert decided.status_code == 200, decided.text
    case = api.get(f"/v1/dispatches/{dispatch_id}", headers=headers).json()
    assert case["late_evidence"] == []
    (item,) = api.get("/v1/decisions", headers=headers).json()["items"]
    assert item["contradicted"] is None

    provider = ScriptedProvider(fixed(FindingKind.VERIFIED_SUCCEEDED))
    action_type = case["identity"]["action_type"]
    watcher = LateEvidenceWatcher(
        store, ProviderRegistry({action_type: provider}), LateEvidenceSettings(owner="r1")
    )
    report = watcher.run_cycle()  # the database clock, as in production
    assert [r.contradicts for r in report.records] == [True]

    case = api.get(f"/v1/dispatches/{dispatch_id}", headers=headers).json()
    (late,) = case["late_evidence"]
    assert (late["finding"], late["agrees"]) == ("verified_succeeded", False)
    # The digest of the evidence the provider verified for this dispatch's own identity.
    assert late["evidence_digest"] == verified(report.records[0].watch.identity).evidence_digest
    assert late["observed_at_ms"] >= case["resolution"]["resolved_at_ms"]
    # The decision stands.
    assert (case["execution"]["state"], case["resolution"]["outcome"]) == ("failed", "failed")
    (item,) = api.get("/v1/decisions", headers=headers).json()["items"]
    assert item["contradicted"] is True
