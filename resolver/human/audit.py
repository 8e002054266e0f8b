"""Verifying the audit chain of manual decisions (`resolver audit verify`).

Each manual decision's statement appends a link: its canonical content and
`hash = sha256(prev_hash || content)`, the first link's `prev_hash` being 64 zeros. The
verifier walks the chain in order and names the first link that breaks:

- `seq_gap`: a link is missing (or the chain does not start at 1);
- `prev_hash`: a link does not point at its predecessor's hash (a link removed or reordered);
- `hash`: a link's hash is not the hash of its predecessor's and its content (content or hash
  edited);
- `facts_changed`: the stored resolution or authorization facts no longer produce the
  content the link recorded (a fact edited after the decision);
- `head`: the head row does not name the last link (links removed from the end);
- `unlinked`: a manual resolution recorded since the chain began has no link.

What it proves: no link, and no fact still stored, was changed, removed or inserted after
the decision without also rewriting every later link and the head, in a way the hashes do
not match. What it does not prove: that a role able to rewrite the whole chain and the head
consistently (the table owner, with the triggers disabled) did not; keep the exported chain
or a recent head hash (`resolver audit verify` prints it) outside the database to detect
that. A pruned resolution leaves its link, so a pruned range stays verifiable by its hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from resolver.core.domain import AuditLink
from resolver.core.ports import AuditReader

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
    """Verifies links fed in order, page after page; remembers where it stands."""

    seq: int = 0
    hash: str = GENESIS_HASH
    links: int = 0
    pruned: int = 0

    def feed(self, links: Iterable[AuditLink]) -> AuditBreak | None:
        for link in links:
            found = self._check(link)
            if found is not None:
                return found
            self.seq, self.hash = link.seq, link.hash
            self.links += 1
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
            self.pruned += 1
        elif link.facts_content != link.content:
            return broken("facts_changed: the stored decision no longer matches its link")
        return None

    def check_head(self, head_seq: int, head_hash: str) -> AuditBreak | None:
        if (head_seq, head_hash) != (self.seq, self.hash):
            return AuditBreak(head_seq, None, "head: the head does not name the last link")
        return None


PAGE = 500


@dataclass(frozen=True, slots=True)
class AuditReport:
    links: int
    pruned: int
    head_seq: int
    head_hash: str
    broken: AuditBreak | None


def verify_chain(reader: AuditReader, page: int = PAGE) -> AuditReport:
    """Walk the whole chain, page by page (bounded memory), then the head and stray decisions."""
    walk = ChainWalk()
    broken: AuditBreak | None = None
    while broken is None:
        links = reader.audit_links(walk.seq, page)
        broken = walk.feed(links)
        if len(links) < page:
            break
    head_seq, head_hash = reader.audit_head()
    if broken is None:
        broken = walk.check_head(head_seq, head_hash)
    if broken is None:
        stray = reader.audit_unlinked()
        if stray is not None:
            broken = AuditBreak(None, stray[0], f"unlinked: dispatch {stray[1]} has no link")
    return AuditReport(walk.links, walk.pruned, head_seq, head_hash, broken)
