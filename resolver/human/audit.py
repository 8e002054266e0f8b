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

- `export`: a link the retention export carries differs from the one still stored.

Retention (`resolver prune --include-audit`) deletes a decision's link with its facts and
writes the link into its export first. `verify_chain` takes the exported links
(`exported_links` reads them from export files) and walks the stored and the exported links
as one chain, so a pruned range verifies by its hashes; without the export, the first pruned
link is a `seq_gap`.

What it proves: no link, and no fact still stored, was changed, removed or inserted after
the decision without also rewriting every later link and the head, in a way the hashes do
not match. What it does not prove: that a role able to rewrite the whole chain and the head
consistently (the table owner, with the triggers disabled) did not; keep the exports and a
recent head hash (`resolver audit verify` prints it) outside the database to detect that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

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
    """Verifies links fed in order, page after page; remembers where it stands. `exported`
    holds the links of pruned decisions by seq: a gap in the stored chain is walked through
    them, and a stored link that was exported too must equal its export."""

    seq: int = 0
    hash: str = GENESIS_HASH
    links: int = 0
    pruned: int = 0
    exported: Mapping[int, AuditLink] | None = None

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
        found = self._check(link)
        if found is None:
            self.seq, self.hash = link.seq, link.hash
            self.links += 1
        return found

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


def verify_chain(
    reader: AuditReader, page: int = PAGE, exported: Mapping[int, AuditLink] | None = None
) -> AuditReport:
    """Walk the whole chain, page by page (bounded memory for the stored links), through the
    `exported` links of pruned ranges, then the head and stray decisions."""
    walk = ChainWalk(exported=exported)
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
    head_seq, head_hash = reader.audit_head()
    if broken is None:
        broken = walk.check_head(head_seq, head_hash)
    if broken is None:
        stray = reader.audit_unlinked()
        if stray is not None:
            broken = AuditBreak(None, stray[0], f"unlinked: dispatch {stray[1]} has no link")
    return AuditReport(walk.links, walk.pruned, head_seq, head_hash, broken)


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
                    raw = json.loads(line).get("audit_link")
                    if raw is None:
                        continue
                    yield AuditLink(
                        seq=int(raw["seq"]),
                        mutation_id=str(raw["mutation_id"]),
                        dispatch_id=str(raw["dispatch_id"]),
                        content=str(raw["content"]),
                        prev_hash=str(raw["prev_hash"]),
                        hash=str(raw["hash"]),
                        recorded_at_ms=int(raw["recorded_at_ms"]),
                        facts_content=None,
                    )
                except (ValueError, AttributeError, KeyError, TypeError) as exc:
                    raise ExportUnreadable(f"{path}:{number}: not an export record") from exc
