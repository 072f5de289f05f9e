"""Sentence-window units at several granularities (UMG-RAG's retrieval units).

Every document is split into sentences; for each granularity g, overlapping windows of g
sentences (stride g/2 by default) become units. A window never crosses a heading line
(:func:`core.text.heading_text`): the sections of a long document are windowed each on its
own, as chunks never span two sections. A span that several granularities share (a short
document gives the same whole-document window for every g >= its length) is one unit listed
under each of those granularities, so it is embedded and indexed once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from core.text import is_heading_line, sentence_windows, split_sentences

__all__ = ["UnitTable", "build_units"]


@dataclass
class UnitTable:
    """All units of a corpus.

    Attributes:
        doc_ids: Document id of each unit.
        sent_start: First sentence of each unit (index within its document).
        sent_end: One past the last sentence.
        char_start: Character offset of the unit in its document.
        char_end: Character offset one past its end.
        texts: The unit texts (``document[char_start:char_end]``).
        granularities: The granularities each unit belongs to.
        by_granularity: Unit ids per granularity, in document order.
    """

    doc_ids: list[str] = field(default_factory=list)
    sent_start: list[int] = field(default_factory=list)
    sent_end: list[int] = field(default_factory=list)
    char_start: list[int] = field(default_factory=list)
    char_end: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    granularities: list[list[int]] = field(default_factory=list)
    by_granularity: dict[int, list[int]] = field(default_factory=dict)
    _row_arrays: dict[int, tuple[list[int], int, npt.NDArray[np.int64]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __len__(self) -> int:
        return len(self.doc_ids)

    def rows(self, g: int) -> npt.NDArray[np.int64]:
        """Unit ids of granularity ``g`` as a read-only array.

        The array is kept until that granularity's list changes: the lists only grow (a
        delete marks units dead in the strategy's table), so a list of the same object and
        length holds the same ids.
        """
        members = self.by_granularity.get(g, [])
        kept = self._row_arrays.get(g)
        if kept is not None and kept[0] is members and kept[1] == len(members):
            return kept[2]
        ids = np.asarray(members, dtype=np.int64)
        ids.flags.writeable = False
        self._row_arrays[g] = (members, len(members), ids)
        return ids

    def parent_index(self, parent_g: int) -> Callable[[int], int]:
        """A function mapping a unit id to its parent window at granularity ``parent_g``.

        The parent is the ``parent_g`` window of the same document that overlaps the unit's
        sentences most (ties: the earlier window); a unit with no such window is its own parent.
        """
        per_doc: dict[str, list[int]] = {}
        for u in self.by_granularity.get(parent_g, []):
            per_doc.setdefault(self.doc_ids[u], []).append(u)
        cache: dict[int, int] = {}

        def parent(u: int) -> int:
            if u in cache:
                return cache[u]
            best, best_overlap = u, 0
            s, e = self.sent_start[u], self.sent_end[u]
            for p in per_doc.get(self.doc_ids[u], []):
                overlap = min(e, self.sent_end[p]) - max(s, self.sent_start[p])
                if overlap > best_overlap:
                    best, best_overlap = p, overlap
            cache[u] = best
            return best

        return parent


def build_units(
    documents: Sequence[tuple[str, str]],
    granularities: Sequence[int],
    strides: Sequence[int] | None = None,
) -> UnitTable:
    """Builds the units of ``documents`` at every granularity.

    Args:
        documents: ``(doc_id, text)`` pairs.
        granularities: Window sizes in sentences (each >= 1).
        strides: Stride per granularity; default ``max(1, g // 2)``.

    Returns:
        The unit table (documents in the given order; within a document, units by start,
        then end).

    Raises:
        ValueError: Bad granularities or strides.
    """
    gs = list(granularities)
    if not gs or any(g < 1 for g in gs) or len(set(gs)) != len(gs):
        raise ValueError(f"granularities must be distinct positive ints, got {gs}")
    st = [max(1, g // 2) for g in gs] if strides is None else list(strides)
    if len(st) != len(gs) or any(s < 1 or s > g for s, g in zip(st, gs, strict=True)):
        raise ValueError("strides must give one value per granularity, each between 1 and the granularity")
    table = UnitTable(by_granularity={g: [] for g in gs})
    for doc_id, text in documents:
        sents = split_sentences(text)
        if not sents:
            continue
        spans: dict[tuple[int, int], list[int]] = {}
        for first, last in _sections(text, sents):
            for g, stride in zip(gs, st, strict=True):
                for s, e in sentence_windows(last - first, g, stride):
                    spans.setdefault((first + s, first + e), []).append(g)
        for (s, e), unit_gs in sorted(spans.items()):
            u = len(table.doc_ids)
            cs, ce = sents[s][0], sents[e - 1][1]
            table.doc_ids.append(doc_id)
            table.sent_start.append(s)
            table.sent_end.append(e)
            table.char_start.append(cs)
            table.char_end.append(ce)
            table.texts.append(text[cs:ce])
            table.granularities.append(sorted(unit_gs))
            for g in unit_gs:
                table.by_granularity[g].append(u)
    return table


def _sections(text: str, sents: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sentence ranges ``[first, last)`` of a document's sections: each starts at a heading line.

    A heading is a sentence that is a heading line of its own
    (:func:`core.text.is_heading_line`) followed by more text; the text before the first
    heading is a section too.
    """
    starts = [0]
    for n, (start, end) in enumerate(sents[:-1]):
        if n > 0 and is_heading_line(text, start, end):
            starts.append(n)
    return list(zip(starts, [*starts[1:], len(sents)], strict=True))
