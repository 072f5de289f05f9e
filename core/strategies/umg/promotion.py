"""Parent promotion: fine retrieval hits become their parent sentence windows, de-duplicated.

A retriever over small chunks (a sentence or two) finds precise evidence but hands the
reader fragments; their surrounding sentences are often needed to understand them. Parent
promotion, the "P" of UMGP-RAG, replaces each *fine* hit (one covering at most
``fine_max_sentences`` sentences) by the window of ``parent_size`` consecutive sentences of
its document that overlaps it most, then removes the overlaps this creates within each
document (several hits promoted into the same or into overlapping windows), keeping the
best score. The result is a shorter list of locally coherent passages.

The functions here are framework-neutral: the LangChain ``ParentPromotionCompressor`` and the
LlamaIndex ``ParentPromotionPostprocessor`` map their documents or nodes to
:class:`PromotionItem` and back. Interval de-duplication runs in C++
(:func:`core.native.fusion.merge_intervals`).

Example:
    >>> text = "One. Two. Three. Four. Five. Six."
    >>> hit = PromotionItem(doc_id="d", start=17, end=22, score=0.9, text="Four.", id="d#3")
    >>> [(p.text, p.id, p.promoted) for p in promote_to_parents([hit], {"d": text}, parent_size=3, stride=3)]
    [('Four. Five. Six.', 'd::s3-6', True)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from core.native.fusion import MergedIntervals, merge_intervals
from core.text import sentence_windows, split_sentences

if TYPE_CHECKING:
    from core.store import ChunkStore

__all__ = [
    "MODES",
    "Promoted",
    "PromotionItem",
    "promote_to_parents",
    "texts_from_spans",
    "texts_from_store",
]

#: The de-duplication modes :func:`promote_to_parents` accepts.
MODES: tuple[str, ...] = ("keep_best", "union")


@dataclass(frozen=True)
class PromotionItem:
    """One retrieval hit to promote.

    Attributes:
        doc_id: The id of the document the hit comes from; None when unknown (the item then
            passes through unchanged).
        start: Character offset of the hit in its document; None when unknown.
        end: Character offset one past its end; None when unknown.
        score: The hit's score (higher is better).
        text: The hit's text.
        metadata: The hit's metadata (copied onto the result).
        id: The hit's id, reported among the merged members; None for
            ``"{doc_id}@{start}-{end}"``.
    """

    doc_id: str | None
    start: int | None
    end: int | None
    score: float
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None

    @property
    def key(self) -> str:
        """The id reported for this item (``id`` or ``"{doc_id}@{start}-{end}"``)."""
        return self.id if self.id is not None else f"{self.doc_id}@{self.start}-{self.end}"


@dataclass(frozen=True)
class Promoted:
    """One output passage of :func:`promote_to_parents`.

    Attributes:
        id: The best member's id, or ``"{doc_id}::s{sent_start}-{sent_end}"`` when the
            passage is not the best member's own span (the unit-id scheme of UMG-RAG).
        doc_id: The document id (None for an item that passed through without one).
        start: Character offset of the passage in its document (None when unknown).
        end: Character offset one past its end.
        sent_start: First sentence of the passage (None when the document is unknown).
        sent_end: One past its last sentence.
        score: The best member's score.
        text: The passage: the parent window's (or merged span's) text, else the hit's text.
        metadata: The best member's metadata plus ``promoted``, ``merged_ids`` and, when the
            document is known, the offsets (``start_index`` and ``end_index`` unless other
            keys are given), ``sent_start`` and ``sent_end``.
        promoted: Whether the passage differs from the best member's own span.
        member_ids: Ids of every input item the passage stands for, best first.
        index: Input index of the best member.
    """

    id: str
    doc_id: str | None
    start: int | None
    end: int | None
    sent_start: int | None
    sent_end: int | None
    score: float
    text: str
    metadata: dict[str, Any]
    promoted: bool
    member_ids: tuple[str, ...]
    index: int


@dataclass
class _Span:
    """An item's span after promotion (character and sentence offsets)."""

    group: int
    start: int
    end: int
    sent_start: int = -1
    sent_end: int = -1
    doc_id: str = ""
    known: bool = False  # a document text backs the span


def _check_int(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def _offset(value: object) -> int | None:
    """``value`` as an int when it is an integer (bools are not), else None."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    return None


def _covered(sentences: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """Sentences overlapping ``[start, end)`` as ``(first, last_exclusive)``; empty when none."""
    first = last = -1
    for i, (s, e) in enumerate(sentences):
        if s < end and start < e:
            if first < 0:
                first = i
            last = i
        elif s >= end:
            break
    return (first, last + 1) if first >= 0 else (0, 0)


def _best_window(windows: Sequence[tuple[int, int]], first: int, last: int) -> tuple[int, int]:
    """The window overlapping sentences ``[first, last)`` most (ties: the earlier one)."""
    best, best_overlap = windows[0], -1
    for ws, we in windows:
        overlap = min(last, we) - max(first, ws)
        if overlap > best_overlap:
            best, best_overlap = (ws, we), overlap
    return best


def promote_to_parents(
    items: Sequence[PromotionItem],
    texts: Mapping[str, str],
    *,
    parent_size: int = 8,
    stride: int | None = None,
    fine_max_sentences: int = 4,
    mode: Literal["keep_best", "union"] | str = "keep_best",
    start_key: str = "start_index",
    end_key: str = "end_index",
) -> list[Promoted]:
    """Promotes fine hits to their parent sentence windows and removes overlaps per document.

    Each document is split with :func:`core.text.split_sentences`; its parent windows are
    ``sentence_windows(n_sentences, parent_size, stride)``. An item whose span overlaps at
    most ``fine_max_sentences`` sentences (partly covered sentences count) is replaced by the
    parent window that shares the most sentences with it (ties: the earlier window); larger
    items keep their span. Then, within each document, overlapping spans (nested ones
    included; merely adjacent ones do not overlap) are de-duplicated by
    :func:`core.native.fusion.merge_intervals` on character offsets:

    * ``"keep_best"``: spans are visited best score first and one is kept only when it
      overlaps no span already kept; a dropped span becomes a member of the first kept span
      it overlaps.
    * ``"union"``: every run of transitively overlapping spans becomes one passage covering
      their union.

    Items pass through unchanged (``promoted=False``, never merged) when their ``doc_id`` is
    None or missing from ``texts``, when an offset is missing, or when their span is empty,
    does not lie within the document (``0 <= start < end <= len(text)``) or covers no
    sentence.

    Args:
        items: The hits, in any order (usually a retriever's ranking).
        texts: Full document texts by document id.
        parent_size: Sentences per parent window (>= 1).
        stride: Step between parent windows (``1 <= stride <= parent_size``); None for
            ``max(1, parent_size // 2)``.
        fine_max_sentences: Items covering at most this many sentences are promoted (>= 0;
            0 promotes nothing and only de-duplicates).
        mode: ``"keep_best"`` or ``"union"``.
        start_key: Metadata key the passage's start offset is written under.
        end_key: Metadata key the passage's end offset is written under.

    Returns:
        The passages, best score first (NaN scores last; ties by the best member's input
        position). A passage's text is the document's ``text[start:end]`` when its span
        differs from its best member's, else the best member's own text. The function is
        deterministic and does not modify its inputs.

    Raises:
        TypeError: ``parent_size``, ``stride`` or ``fine_max_sentences`` is not an int.
        ValueError: An argument is out of range, or ``mode`` is unknown.
    """
    _check_int("parent_size", parent_size, 1)
    if stride is not None:
        _check_int("stride", stride, 1)
        if stride > parent_size:
            raise ValueError(f"stride must be <= parent_size ({parent_size}), got {stride}")
    _check_int("fine_max_sentences", fine_max_sentences, 0)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if not items:
        return []

    sentences: dict[str, list[tuple[int, int]]] = {}
    spans: list[_Span] = []
    doc_group: dict[str, int] = {}
    for item in items:
        span = _locate(item, texts, sentences)
        if span.known:
            span.group = doc_group.setdefault(span.doc_id, len(doc_group))
            if span.sent_end - span.sent_start <= fine_max_sentences:
                sents = sentences[span.doc_id]
                ws, we = _best_window(
                    sentence_windows(len(sents), parent_size, stride), span.sent_start, span.sent_end
                )
                span.start, span.end, span.sent_start, span.sent_end = sents[ws][0], sents[we - 1][1], ws, we
        spans.append(span)
    # Pass-through items get groups of their own, past every document's group.
    for i, span in enumerate(spans):
        if not span.known:
            span.group = len(doc_group) + i

    scores = np.asarray([float(item.score) for item in items], dtype=np.float32)
    merged = merge_intervals(
        np.asarray([s.group for s in spans], dtype=np.int64),
        np.asarray([s.start for s in spans], dtype=np.int64),
        np.asarray([s.end for s in spans], dtype=np.int64),
        scores,
        mode="union" if mode == "union" else "keep_best",
    )
    members = _members(spans, scores, merged, mode)
    keys = (start_key, end_key)
    out = [_output(row, items, spans, texts, merged, members[row], mode, keys) for row in range(len(members))]
    out.sort(key=_rank)
    return out


def _rank(p: Promoted) -> tuple[bool, float, int]:
    nan = math.isnan(p.score)
    return (nan, 0.0 if nan else -p.score, p.index)


def _locate(
    item: PromotionItem, texts: Mapping[str, str], sentences: dict[str, list[tuple[int, int]]]
) -> _Span:
    """The item's span and the sentences it covers (``known=False`` when it passes through)."""
    s0, e0, doc_id = _offset(item.start), _offset(item.end), item.doc_id
    if s0 is None or e0 is None:
        return _Span(group=-1, start=0, end=0)
    text = texts.get(doc_id) if isinstance(doc_id, str) else None
    if text is None or doc_id is None or not 0 <= s0 < e0 <= len(text):
        return _Span(group=-1, start=max(0, s0), end=max(0, s0, e0))
    if doc_id not in sentences:
        sentences[doc_id] = split_sentences(text)
    first, last = _covered(sentences[doc_id], s0, e0)
    if last == first:
        return _Span(group=-1, start=s0, end=e0)
    return _Span(group=-1, start=s0, end=e0, sent_start=first, sent_end=last, doc_id=doc_id, known=True)


def _visit_order(indices: Iterable[int], scores: npt.NDArray[np.float32]) -> list[int]:
    """Indices best score first (NaN last), ties by index: merge_intervals' visiting order."""
    return sorted(
        indices, key=lambda i: (bool(np.isnan(scores[i])), 0.0 if np.isnan(scores[i]) else -scores[i], i)
    )


def _members(
    spans: Sequence[_Span], scores: npt.NDArray[np.float32], merged: MergedIntervals, mode: str
) -> list[list[int]]:
    """Input indices behind each output row, best first (merge_intervals only counts them)."""
    best = [int(b) for b in merged["best_index"]]
    row_of = {b: row for row, b in enumerate(best)}
    members: list[list[int]] = [[b] for b in best]
    if mode == "keep_best":
        kept = _visit_order(best, scores)
        for i in _visit_order((i for i in range(len(spans)) if i not in row_of), scores):
            s = spans[i]
            owner = next(
                k
                for k in kept
                if spans[k].group == s.group and spans[k].start < s.end and s.start < spans[k].end
            )
            members[row_of[owner]].append(i)
    else:
        rows = {
            (int(g), int(a), int(b)): r
            for r, (g, a, b) in enumerate(zip(merged["group"], merged["start"], merged["end"], strict=True))
        }
        for i in _visit_order((i for i in range(len(spans)) if i not in row_of), scores):
            s = spans[i]
            row = next(
                r for (g, a, b), r in rows.items() if g == s.group and a <= s.start and s.end <= b and a < b
            )
            members[row].append(i)
    counts = [int(c) for c in merged["members"]]
    if [len(m) for m in members] != counts:  # pragma: no cover - a kernel/contract mismatch
        raise RuntimeError("merge_intervals' member counts disagree with the spans; please report this")
    return members


def _output(
    row: int,
    items: Sequence[PromotionItem],
    spans: Sequence[_Span],
    texts: Mapping[str, str],
    merged: MergedIntervals,
    members: Sequence[int],
    mode: str,
    offset_keys: tuple[str, str],
) -> Promoted:
    """The passage of one output row (its offsets written under ``offset_keys``)."""
    b = members[0]
    item, span = items[b], spans[b]
    metadata = dict(item.metadata)
    member_ids = tuple(items[i].key for i in members)
    metadata["merged_ids"] = list(member_ids)
    if not span.known:
        metadata["promoted"] = False
        return Promoted(
            id=item.key,
            doc_id=item.doc_id,
            start=item.start,
            end=item.end,
            sent_start=None,
            sent_end=None,
            score=float(item.score),
            text=item.text,
            metadata=metadata,
            promoted=False,
            member_ids=member_ids,
            index=b,
        )
    start, end, sent_start, sent_end = span.start, span.end, span.sent_start, span.sent_end
    if mode == "union":
        start, end = int(merged["start"][row]), int(merged["end"][row])
        sent_start = min(spans[i].sent_start for i in members)
        sent_end = max(spans[i].sent_end for i in members)
    promoted = (start, end) != (item.start, item.end)
    text = texts[span.doc_id][start:end] if promoted else item.text
    metadata.update(
        {
            "promoted": promoted,
            offset_keys[0]: start,
            offset_keys[1]: end,
            "sent_start": sent_start,
            "sent_end": sent_end,
        }
    )
    return Promoted(
        id=f"{span.doc_id}::s{sent_start}-{sent_end}" if promoted else item.key,
        doc_id=span.doc_id,
        start=start,
        end=end,
        sent_start=sent_start,
        sent_end=sent_end,
        score=float(item.score),
        text=text,
        metadata=metadata,
        promoted=promoted,
        member_ids=member_ids,
        index=b,
    )


def texts_from_spans(spans: Iterable[tuple[str, int, int, str]]) -> dict[str, str]:
    """Rebuilds document texts from pieces that know where they came from.

    Used to get the full texts behind an index that stores only (overlapping) pieces of its
    documents, such as the sentence-window units of UMG-RAG. Each piece is written at its
    offset; characters no piece covers (whitespace between non-overlapping pieces, in
    practice) become spaces, so text inside the pieces, line breaks included, is exact.

    Args:
        spans: ``(doc_id, start, end, text)`` for each piece, with ``len(text) == end - start``.

    Returns:
        Document id -> rebuilt text (as long as the furthest piece end).

    Raises:
        ValueError: A piece's offsets do not match its text, or two pieces disagree.
    """
    pieces: dict[str, list[tuple[int, int, str]]] = {}
    for doc_id, start, end, text in spans:
        if not 0 <= start <= end or end - start != len(text):
            raise ValueError(
                f"piece {doc_id!r}[{start}:{end}] has {len(text)} characters; offsets must match the text"
            )
        pieces.setdefault(doc_id, []).append((start, end, text))
    out: dict[str, str] = {}
    for doc_id, parts in pieces.items():
        buf: list[str | None] = [None] * max(end for _, end, _ in parts)
        for start, _, text in sorted(parts):
            for offset, ch in enumerate(text, start):
                if buf[offset] is not None and buf[offset] != ch:
                    raise ValueError(f"pieces of document {doc_id!r} disagree at character {offset}")
                buf[offset] = ch
        out[doc_id] = "".join(" " if ch is None else ch for ch in buf)
    return out


def texts_from_store(
    store: ChunkStore,
    *,
    doc_id_key: str = "doc_id",
    start_key: str = "start_index",
    end_key: str = "end_index",
) -> dict[str, str]:
    """Rebuilds the document texts of a Chroma collection of located pieces (see :func:`texts_from_spans`).

    Pieces whose metadata lack the document id or offsets are skipped.

    Args:
        store: The collection (for example a UMG-RAG index's ``strategy.store``).
        doc_id_key: Metadata key of the document id.
        start_key: Metadata key of the start offset.
        end_key: Metadata key of the end offset (default ``start + len(text)`` when absent).

    Returns:
        Document id -> rebuilt text.

    Raises:
        ValueError: Pieces disagree with each other or with their offsets.
    """
    stored = store.get(include_embeddings=False)
    spans: list[tuple[str, int, int, str]] = []
    for text, meta in zip(stored.texts, stored.metadatas, strict=True):
        doc_id, start = meta.get(doc_id_key), _offset(meta.get(start_key))
        if doc_id is None or start is None:
            continue
        end = _offset(meta.get(end_key, start + len(text)))
        if end is not None:
            spans.append((str(doc_id), start, end, text))
    return texts_from_spans(spans)
