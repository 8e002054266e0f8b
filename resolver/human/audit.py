"""Verifying the audit chain of manual decisions (`resolver audit verify`).

Each act of a person (a manual decision, a reject or withdrawal of a proposal) appends a link
in its own statement: its canonical content and `hash = sha256(prev_hash || content)`, the
first link's `prev_hash` being 64 zeros. The verifier walks the chain in order and names the
first link that breaks, by kind:

- `seq_gap`: a link is missing (or the chain does not start at 1);
- `prev_hash`: a link does not point at its predecessor's hash (a link removed or reordered);
- `hash`: a link's hash is not the hash of its predecessor's and its content (content or hash
  edited);
- `facts_changed`: the stored resolution or authorization facts no longer produce the
  content the link recorded (a fact edited after the decision);
- `facts_missing`: a link's decision and authorization facts are gone, and no prune run
  removed them (no recorded export carries the link);
- `unsigned_fact`: an authorization fact without the API's signature, in a link after the
  first signed one (facts recorded before signing began are counted, not refused);
- `unbound_fact`: a fact that does not name its act (payload v1), in a link after the first
  one whose facts do (facts signed before are counted, not refused);
- `unknown_signing_key` / `bad_signature`: with the API's public keys, a fact signed by a key
  the file does not hold, or whose signature does not verify (a fact written by hand);
- `act_mismatch`: a fact's act, mutation id, proposal or person is not its link's event (a
  propose fact where a confirm belongs, a decide fact in a two-person link, the close of
  another proposal, a fact signed for another request);
- `wrong_person`: a confirmation or reject by the proposer, a withdrawal by anyone else;
- `proposal_not_open`: a confirmation, reject or withdrawal of a proposal an earlier link
  already ended, or made after it expired;
- `fact_reused`: a signature or an act's mutation id that an earlier link already carries (a
  signed fact counts once);
- `head`: the head row is missing, or does not name the last link (links removed from the end);
- `anchor`: the chain no longer holds the head recorded earlier outside the database;
- `unlinked`: a manual resolution recorded since the chain began has no link;
- `export`: a link the retention export carries differs from the one still stored, or lies
  outside the range of links the run that recorded the export removed.

Retention (`resolver prune --include-audit`) deletes a decision's link with its facts and
writes the link into its export first; the run records the export's sha256 and the range of
links it removed. `verify_chain` takes the exported links of recorded runs
(`recorded_exports`) and walks the stored and the exported links as one chain; without the
export, the first pruned link is a `seq_gap`.

Links are a person's acts: each decision (one person's, or a confirmation with both
people's facts), and since facts name their act (payload v2) each reject and withdrawal of a
proposal, with the proposer's and the closer's facts.

What it proves: no link, and no fact still stored, was changed, removed or inserted after
the decision without also rewriting every later link and the head in a way the hashes match;
each decision's authorization facts were signed by the API's key (with the public keys),
which no database role holds, so no database write, the owner's included, invents a person
or a person's authentication; and, for every link since facts name their act, that each fact
was signed for exactly that link's act and request, counted once, and that each confirmation
or close follows an open proposal by the right person. A v1 fact proves who decided what, not
in which act, nor that its signature was used once.

What it does not prove: that a role able to rewrite the whole chain and the head
consistently (the table owner, with the triggers disabled) did not remove or replace a tail of
decisions; keep the exports and the head line `resolver audit verify` prints outside the
database (`--anchor`) to detect that. Nor that the API itself, with its
signing key, signed only what a verified token said: the key is the trust anchor.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from resolver.core.domain import Act, AuditLink
from resolver.core.ports import AuditReader
from resolver.human.signing import ActFacts, DecisionFacts, check_fact, fact_act

GENESIS_HASH = "0" * 64


def link_hash(prev_hash: str, content: str) -> str:
    """The hash the database wrote: sha256 over the UTF-8 of prev_hash || content, hex."""
    return hashlib.sha256((prev_hash + content).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class AuditBreak:
    """The first link (or fact) that does not verify."""

    seq: int | None
    mutation_id: str | None
    reason: str

    def describe(self) -> str:
        where = f"seq {self.seq}" if self.seq is not None else "the chain"
        of = f" (mutation {self.mutation_id})" if self.mutation_id else ""
        return f"{where}{of}: {self.reason}"


@dataclass
class ChainWalk:
    """Verifies links fed in order, page after page; remembers where it stands. `exported`
    holds the links of pruned decisions by seq: a gap in the stored chain is walked through
    them, and a stored link that was exported too must equal its export."""

    seq: int = 0
    hash: str = GENESIS_HASH
    links: int = 0
    pruned: int = 0
    exported: Mapping[int, AuditLink] | None = None
    public_keys: Mapping[str, Ed25519PublicKey] | None = None
    anchor: tuple[int, str] | None = None
    unsigned: int = 0
    unbound: int = 0
    signed_seen: bool = False
    anchor_seen: bool = False
    acts_since_ms: int | None = None
    """When the first link whose facts name their act was recorded (None: none yet)."""
    consumed: set[bytes] = field(default_factory=set)
    """A short digest of every signature and act mutation id seen since then: each counts once."""
    closed_proposals: set[int] = field(default_factory=set)
    """The proposals an earlier link confirmed, rejected or withdrew."""

    def feed(self, links: Iterable[AuditLink]) -> AuditBreak | None:
        for link in links:
            found = self.fill(link.seq) or self._step(link)
            if found is not None:
                return found
            copy = (self.exported or {}).get(link.seq)
            if copy is not None and _stored(copy) != _stored(link):
                reason = "export: differs from the stored link"
                return AuditBreak(link.seq, link.mutation_id, reason)
        return None

    def fill(self, before_seq: int | None = None) -> AuditBreak | None:
        """Walk the exported links that come next, up to (not including) `before_seq`."""
        exported = self.exported or {}
        while (before_seq is None or self.seq + 1 < before_seq) and self.seq + 1 in exported:
            found = self._step(exported[self.seq + 1])
            if found is not None:
                return found
        return None

    def _step(self, link: AuditLink) -> AuditBreak | None:
        found = self._check(link) or self._check_facts(link)
        if found is None:
            self.seq, self.hash = link.seq, link.hash
            self.links += 1
            if self.anchor is not None and self.anchor[0] == link.seq:
                if self.anchor[1] != link.hash:
                    return AuditBreak(
                        link.seq,
                        link.mutation_id,
                        "anchor: the anchored head's "
                        "hash is not this link's: the chain was rewritten",
                    )
                self.anchor_seen = True
        return found

    def _check_facts(self, link: AuditLink) -> AuditBreak | None:
        """The authorization facts the link records: signed, naming their act once facts do,
        (with the API's public keys) signed by the API, and each the act of this link."""
        try:
            content = json.loads(link.content)
            event = content.get("event")
            decision = _decision(content)
            facts = list(content["authorizations"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return AuditBreak(link.seq, link.mutation_id, "facts_changed: content unreadable")
        signed = [isinstance(f, dict) and "signature" in f for f in facts]
        if not all(signed):
            if self.signed_seen or any(signed) or event is not None:
                reason = "unsigned_fact: an authorization fact carries no signature"
                return AuditBreak(link.seq, link.mutation_id, reason)
            self.unsigned += 1  # recorded before the API signed facts
            return None
        self.signed_seen = True
        bound = [isinstance(f, dict) and "act" in f for f in facts]
        if not all(bound) or event is None:
            if self.acts_since_ms is not None or any(bound) or event is not None:
                reason = "unbound_fact: an authorization fact names no act"
                return AuditBreak(link.seq, link.mutation_id, reason)
            self.unbound += 1  # signed before facts named their act
        elif self.acts_since_ms is None:
            self.acts_since_ms = link.recorded_at_ms
        if self.public_keys is not None:
            for fact in facts:
                why = check_fact(fact, decision, self.public_keys)
                if why is not None:
                    user = fact.get("user_id")
                    return AuditBreak(link.seq, link.mutation_id, f"{why}: the fact of {user!r}")
        if event is None:
            return None
        why = _act_problem(link, content, facts) or self._once_problem(content, facts)
        return None if why is None else AuditBreak(link.seq, link.mutation_id, why)

    def _once_problem(self, content: dict[str, Any], facts: list[dict[str, Any]]) -> str | None:
        """A proposal this act ends is still open, and no fact of it was counted before."""
        proposal = content.get("proposal")
        if proposal is not None:
            # _act_problem checked the facts: the proposer's propose and one closing act.
            (closer,) = [a for a in map(fact_act, facts) if a is not None and a.act != Act.PROPOSE]
            if proposal["proposal_id"] in self.closed_proposals:
                return f"proposal_not_open: proposal {proposal['proposal_id']} was already ended"
            if not proposal["proposed_at_ms"] <= closer.verified_at_ms < proposal["expires_at_ms"]:
                return (
                    f"proposal_not_open: proposal {proposal['proposal_id']} was not open when "
                    f"the {closer.act.value} was verified"
                )
        keys = [k for f in facts for k in _once_keys(f)]
        if len(set(keys)) != len(keys) or self.consumed.intersection(keys):
            return "fact_reused: a signature or mutation id an earlier fact already used"
        self.consumed.update(keys)
        if proposal is not None:
            self.closed_proposals.add(proposal["proposal_id"])
        return None

    def _check(self, link: AuditLink) -> AuditBreak | None:
        def broken(reason: str) -> AuditBreak:
            return AuditBreak(link.seq, link.mutation_id, reason)

        if link.seq != self.seq + 1:
            return broken(f"seq_gap: expected seq {self.seq + 1}")
        if link.prev_hash != self.hash:
            return broken("prev_hash: does not point at the previous link's hash")
        if link.hash != link_hash(link.prev_hash, link.content):
            return broken("hash: not the hash of the previous hash and this content")
        if link.facts_content is None:
            copy = (self.exported or {}).get(link.seq)
            if copy is None:
                return broken(
                    "facts_missing: the decision and its authorization facts are gone and no "
                    "recorded prune export carries this link"
                )
            self.pruned += 1
        elif link.facts_content != link.content:
            return broken("facts_changed: the stored decision no longer matches its link")
        return None

    def check_head(self, head: tuple[int, str] | None) -> AuditBreak | None:
        if head is None:
            return AuditBreak(None, None, "head: the head row is missing")
        if head != (self.seq, self.hash):
            return AuditBreak(head[0], None, "head: the head does not name the last link")
        if self.anchor is not None and self.anchor[0] > 0 and not self.anchor_seen:
            return AuditBreak(
                self.anchor[0], None, "anchor: the chain no longer reaches the anchored head"
            )
        return None


def _decision(content: Mapping[str, Any]) -> DecisionFacts:
    """The decision a link's facts were signed over: the link's own, or for a reject or
    withdrawal the proposal's."""
    source = content["proposal"] if content.get("event") in CLOSE_EVENTS else content
    return DecisionFacts(
        dispatch_id=str(content["dispatch_id"]),
        outcome=str(source["outcome"]),
        expected_execution_version=int(source["expected_execution_version"]),
        evidence_digest=source["evidence_digest"],
    )


CLOSE_EVENTS = frozenset({Act.REJECT.value, Act.WITHDRAW.value})


def _act_problem(
    link: AuditLink, content: Mapping[str, Any], facts: list[dict[str, Any]]
) -> str | None:
    """Why the facts of a link (since facts name their act) are not exactly its event: one
    decide fact; or the proposer's propose fact and a second person's confirm; or the
    proposer's fact and the closer's reject or withdraw. None when they are."""
    try:
        acts = [fact_act(f) for f in facts]
        event = Act(content["event"])
        proposal = content.get("proposal")
    except (ValueError, KeyError, TypeError):
        return "act_mismatch: a fact or the link names an unknown act"
    if content.get("mutation_id") != link.mutation_id or content.get("dispatch_id") != (
        link.dispatch_id
    ):
        return "act_mismatch: the content names another request than its link"
    if event is Act.DECIDE:
        return _decide_problem(link, content, acts, facts)
    if not _is_proposal(proposal) or len(acts) != 2:
        return f"act_mismatch: a {event.value} link carries a proposal and two facts"
    # A close carries the proposer's fact, then the closer's; a confirmation orders its two
    # facts by person, like every decision.
    first = 0 if event in CLOSE_EVENTS or (acts[0] and acts[0].act is Act.PROPOSE) else 1
    proposer, closer = acts[first], acts[1 - first]
    proposer_fact, closer_fact = facts[first], facts[1 - first]
    if (
        proposer is None
        or closer is None
        or proposer.act is not Act.PROPOSE
        or proposer.mutation_id != proposal["mutation_id"]
        or proposer.proposal_id is not None
        or proposer_fact.get("user_id") != proposal["proposed_by"]
        or closer.act is not event
        or closer.mutation_id != link.mutation_id
        or closer.proposal_id != proposal["proposal_id"]
    ):
        return (
            f"act_mismatch: a {event.value} link needs the proposer's propose fact and the "
            f"{event.value} fact of this request and proposal"
        )
    if event is Act.CONFIRM and (
        content.get("actor_user_id") != proposal.get("proposed_by")
        or any(
            content.get(k) != proposal.get(k)
            for k in ("outcome", "expected_execution_version", "evidence_digest")
        )
    ):
        return "act_mismatch: the confirmation settles another decision than its proposal"
    same = closer_fact.get("user_id") == proposer_fact.get("user_id")
    if same != (event is Act.WITHDRAW):
        who = "the proposer" if same else "someone other than the proposer"
        return f"wrong_person: a {event.value} by {who}"
    return None


def _decide_problem(
    link: AuditLink,
    content: Mapping[str, Any],
    acts: list[ActFacts | None],
    facts: list[dict[str, Any]],
) -> str | None:
    (act,) = acts if len(acts) == 1 else (None,)
    if (
        act is None
        or act.act is not Act.DECIDE
        or act.mutation_id != link.mutation_id
        or act.proposal_id is not None
        or content.get("proposal") is not None
        or facts[0].get("user_id") != content.get("actor_user_id")
    ):
        return "act_mismatch: a decide link carries one decide fact of its own request"
    return None


def _is_proposal(proposal: object) -> TypeGuard[dict[str, Any]]:
    """The proposal a link names, with the fields the checks read, of their types."""
    return (
        isinstance(proposal, dict)
        and all(
            isinstance(proposal.get(k), int) and not isinstance(proposal.get(k), bool)
            for k in ("proposal_id", "proposed_at_ms", "expires_at_ms")
        )
        and isinstance(proposal.get("mutation_id"), str)
        and isinstance(proposal.get("proposed_by"), str)
    )


def _once_keys(fact: Mapping[str, Any]) -> list[bytes]:
    """Short digests of what a fact may use once: its signature and its act's mutation id."""
    return [
        hashlib.blake2b(f"{kind}:{fact[name]}".encode(), digest_size=16).digest()
        for kind, name in (("s", "signature"), ("m", "mutation_id"))
    ]


PAGE = 500


@dataclass(frozen=True, slots=True)
class AuditReport:
    links: int
    pruned: int
    head_seq: int | None
    head_hash: str | None
    broken: AuditBreak | None
    unsigned: int = 0
    unbound: int = 0
    signatures_checked: bool = False

    def head_line(self, at_ms: int) -> str:
        """The head as one JSON line, for a log shipper or an anchor file (`--anchor`)."""
        return json.dumps(
            {
                "kind": "resolver.audit.head",
                "seq": self.head_seq,
                "hash": self.head_hash,
                "links": self.links,
                "verified_at_ms": at_ms,
            },
            sort_keys=True,
            separators=(",", ":"),
        )


def read_anchor(path: Path) -> tuple[int, str]:
    """The head a previous `resolver audit verify` printed: the file's last non-empty line."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        document = json.loads(lines[-1])
        seq, hash_ = int(document["seq"]), str(document["hash"])
    except (OSError, ValueError, IndexError, KeyError, TypeError) as exc:
        raise ExportUnreadable(f"{path}: not a head line ({type(exc).__name__})") from None
    return seq, hash_


def verify_chain(
    reader: AuditReader,
    page: int = PAGE,
    exported: Mapping[int, AuditLink] | None = None,
    *,
    public_keys: Mapping[str, Ed25519PublicKey] | None = None,
    anchor: tuple[int, str] | None = None,
) -> AuditReport:
    """Walk the whole chain, page by page (bounded memory for the stored links), through the
    `exported` links of pruned ranges, then the head and stray decisions."""
    walk = ChainWalk(exported=exported, public_keys=public_keys, anchor=anchor)
    broken: AuditBreak | None = None
    after = 0
    while broken is None:
        links = reader.audit_links(after, page)
        broken = walk.feed(links)
        if links:
            after = links[-1].seq
        if len(links) < page:
            break
    if broken is None:
        broken = walk.fill()  # a pruned range at the end of the stored chain
    head = reader.audit_head()
    if broken is None:
        broken = walk.check_head(head)
    if broken is None:
        stray = reader.audit_unlinked(walk.acts_since_ms)
        if stray is not None:
            broken = AuditBreak(None, stray[0], f"unlinked: dispatch {stray[1]} has no link")
    head_seq, head_hash = head if head is not None else (None, None)
    return AuditReport(
        walk.links,
        walk.pruned,
        head_seq,
        head_hash,
        broken,
        unsigned=walk.unsigned,
        unbound=walk.unbound,
        signatures_checked=public_keys is not None,
    )


def _stored(link: AuditLink) -> tuple[int, str, str, str, str, str, int]:
    """What a link stores (its facts' content is the verifier's own rebuild, not stored)."""
    return (
        link.seq,
        link.mutation_id,
        link.dispatch_id,
        link.content,
        link.prev_hash,
        link.hash,
        link.recorded_at_ms,
    )


def unrecorded_exports(reader: AuditReader, paths: Iterable[Path]) -> list[Path]:
    """The exports whose sha256 no prune run recorded: not the file a run wrote (edited,
    truncated, or from another database), whatever their links say."""
    return [
        path
        for path in paths
        if not reader.audit_export_recorded(hashlib.sha256(path.read_bytes()).hexdigest())
    ]


def recorded_exports(
    reader: AuditReader, paths: Iterable[Path]
) -> tuple[dict[int, AuditLink], list[str]]:
    """The exported links a prune run vouches for, and what is wrong with the rest: an export
    whose sha256 no run recorded is not used at all, and a link outside the range of links
    its run removed is refused (a link whose facts are missing verifies only against the run
    that removed them)."""
    links: dict[int, AuditLink] = {}
    problems: list[str] = []
    for path in paths:
        carried = exported_links([path])  # an unreadable file is refused before anything
        run = reader.audit_prune_run(hashlib.sha256(path.read_bytes()).hexdigest())
        if run is None:
            problems.append(f"export {path}: its sha256 is no prune run's export_digest")
            continue
        for seq, link in carried.items():
            if not run.covers(seq):
                problems.append(
                    f"export {path}: seq {seq} is outside the links prune run {run.run_id} removed"
                )
                continue
            seen = links.setdefault(seq, link)
            if _stored(seen) != _stored(link):
                raise ExportUnreadable(f"seq {seq} is exported twice, differently")
    return links, problems


class ExportUnreadable(ValueError):
    """An export file is not the retention export: not JSON Lines, or a malformed link."""


def exported_links(paths: Iterable[Path]) -> dict[int, AuditLink]:
    """The audit links the retention exports carry (records without one are skipped), by seq;
    the same seq twice with different links is refused (one export was altered)."""
    links: dict[int, AuditLink] = {}
    for link in _read_links(paths):
        seen = links.setdefault(link.seq, link)
        if _stored(seen) != _stored(link):
            raise ExportUnreadable(f"seq {link.seq} is exported twice, differently")
    return links


def _read_links(paths: Iterable[Path]) -> Iterator[AuditLink]:
    for path in paths:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                    carried = [record.get("audit_link"), *(record.get("close_links") or [])]
                    for raw in carried:
                        if raw is not None:
                            yield _exported_link(raw)
                except (ValueError, AttributeError, KeyError, TypeError) as exc:
                    raise ExportUnreadable(f"{path}:{number}: not an export record") from exc


def _exported_link(raw: Mapping[str, Any]) -> AuditLink:
    """One link as a retention export carries it (a decision's, or a reject's or withdrawal's)."""
    return AuditLink(
        seq=int(raw["seq"]),
        mutation_id=str(raw["mutation_id"]),
        dispatch_id=str(raw["dispatch_id"]),
        content=str(raw["content"]),
        prev_hash=str(raw["prev_hash"]),
        hash=str(raw["hash"]),
        recorded_at_ms=int(raw["recorded_at_ms"]),
        facts_content=None,
    )
