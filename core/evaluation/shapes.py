"""Corpus shapes: the benchmark passages as the documents users actually have.

Every passage of the benchmark corpora is one short document whose ``title`` names its
subject. Most users' documents are not like that: a markdown file or a web page carries its
title only as its first line, a PDF or a ticket often has none, and a report or a manual is
one long document of many sections. :class:`CorpusShape` turns the passages into each of
these shapes so that a benchmark can measure whether a method's gains survive them:

- ``titles``: ``meta`` (the title as ``metadata["title"]`` *and* as the text's first line,
  the shape of the dev corpora), ``text`` (only as the first line) or ``none`` (nowhere).
- ``documents``: ``passages`` (each passage its own document) or ``grouped`` (the shuffled
  passages stored as the consecutive sections of long documents, ``sections`` each, with
  ``metadata["source"]`` naming the document, so a document's name no longer names each
  section's subject; a section starts with its heading line under ``--titles text``), or
  ``own`` for a corpus that is already long documents (reports: each passage a paragraph
  of its ``document``): each document's paragraphs joined in order, blank line between,
  as a user's loader hands a file over, ``metadata["source"]`` its name, no title.

Gold stays the passage id. With grouped documents a retrieved unit (a chunk, a window)
counts for the passages it contains (:class:`PassageAttribution`): a passage counts when at
least half of its text lies in the unit, or when it makes up at least half of the unit.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from core.evaluation.metrics import doc_ids_of
from core.text import split_sentences
from core.types import Document, Retrieved

__all__ = ["CorpusShape", "PassageAttribution", "shaped_documents"]

TitlePlacement = Literal["meta", "text", "none"]
Grouping = Literal["passages", "grouped", "own"]
TITLE_PLACEMENTS: tuple[TitlePlacement, ...] = ("meta", "text", "none")
GROUPINGS: tuple[Grouping, ...] = ("passages", "grouped", "own")


@dataclass(frozen=True)
class CorpusShape:
    """How the benchmark passages are handed to the strategies.

    Attributes:
        titles: Where a passage's title goes: ``meta`` (metadata and first line of the text),
            ``text`` (first line only) or ``none``.
        documents: ``passages`` (one document each), ``grouped`` (``sections`` consecutive
            passages of the shuffled corpus as the sections of one document) or ``own`` (a
            corpus of documents, :meth:`of_documents`: each of its documents as one).
        sections: Passages per grouped document.
    """

    titles: TitlePlacement = "meta"
    documents: Grouping = "passages"
    sections: int = 20

    def __post_init__(self) -> None:
        if self.titles not in TITLE_PLACEMENTS:
            raise ValueError(f"titles must be one of {', '.join(TITLE_PLACEMENTS)}, got {self.titles!r}")
        if self.documents not in GROUPINGS:
            raise ValueError(f"documents must be one of {', '.join(GROUPINGS)}, got {self.documents!r}")
        if isinstance(self.sections, bool) or not isinstance(self.sections, int) or self.sections < 2:
            raise ValueError(f"sections must be an int >= 2, got {self.sections!r}")
        if self.documents == "grouped" and self.titles == "meta":
            raise ValueError(
                "a grouped document has no single title to put in its metadata; "
                "use titles 'text' (each section starts with its heading) or 'none'"
            )
        if self.documents == "own" and self.titles != "none":
            raise ValueError("a corpus of documents has no titles; use titles 'none' with documents 'own'")

    @classmethod
    def of_documents(cls) -> CorpusShape:
        """The shape of a corpus of long documents: each one whole, no titles."""
        return cls(titles="none", documents="own")

    @property
    def is_default(self) -> bool:
        """True for the dev corpora's own shape (titles in metadata and text, one passage each)."""
        return self.titles == "meta" and self.documents == "passages"

    def passage_text(self, passage: Mapping[str, str]) -> str:
        """The text indexed for a passage: ``title``, a newline, ``text`` (only ``text`` without titles)."""
        return passage["text"] if self.titles == "none" else f"{passage['title']}\n{passage['text']}"

    def label(self) -> str:
        """A short description, e.g. ``titles removed, 20-section documents``."""
        if self.documents == "own":
            return "each document whole (its paragraphs in order), no titles"
        grouped = f"{self.sections}-section documents"
        docs = "one document per passage" if self.documents == "passages" else grouped
        where = {"meta": "in metadata and text", "text": "in the first line only", "none": "removed"}
        where_titles = where[self.titles]
        return f"titles {where_titles}, {docs}"


def _norm(text: str) -> str:
    return " ".join(text.split())


class PassageAttribution:
    """Which passages a retrieved unit stands for.

    For one-passage documents, a unit's passage is its document (``metadata["doc_id"]``, else
    the id before ``::``). For grouped documents, a unit counts for each passage of its
    document of which at least half the text (by characters of whole sentences) lies in the
    unit, or which makes up at least half of the unit.

    Args:
        sections: Grouped document id -> its passages as ``(passage id, section text)`` in
            order (empty: one document per passage).
    """

    def __init__(self, sections: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> None:
        self._sections: dict[str, list[tuple[str, list[str], int]]] = {}
        for doc_id, parts in (sections or {}).items():
            entries = []
            for pid, text in parts:
                sentences = [_norm(text[s:e]) for s, e in split_sentences(text)]
                entries.append((pid, sentences, sum(len(s) for s in sentences)))
            self._sections[doc_id] = entries

    def __call__(self, results: Sequence[Retrieved]) -> list[str]:
        """The passage ids ``results`` stand for, in order of first appearance."""
        if not self._sections:
            return doc_ids_of(results)
        out: dict[str, None] = {}
        for doc_id, r in zip(doc_ids_of(results), results, strict=True):
            parts = self._sections.get(doc_id)
            if parts is None:
                out.setdefault(doc_id)
                continue
            text = _norm(r.text)
            for pid, sentences, size in parts:
                covered = sum(len(s) for s in sentences if s and s in text)
                if covered and (2 * covered >= size or 2 * covered >= len(text)):
                    out.setdefault(pid)
        return list(out)


def shaped_documents(
    passages: Sequence[Mapping[str, str]], shape: CorpusShape, seed: int = 0
) -> tuple[list[Document], PassageAttribution]:
    """The passages as documents of ``shape``, in a shuffled order (``seed``).

    Args:
        passages: ``{"id", "title", "text"}`` rows.
        shape: The corpus shape.
        seed: Shuffle seed (the order of the passages, and so which passages share a
            grouped document).

    Returns:
        The documents and the attribution of retrieved units to passage ids.

    Raises:
        ValueError: ``own`` documents asked of passages that name no document, or the
            passages of a corpus of documents asked as another shape.
    """
    named = bool(passages) and all("document" in p for p in passages)
    if (shape.documents == "own") != named:
        raise ValueError(
            "this corpus is long documents (its passages name their document): read it with "
            "documents 'own' and titles 'none'"
            if named
            else "documents 'own' needs a corpus whose passages name their document"
        )
    if shape.documents == "own":
        return _own_documents(passages, seed)
    order = list(passages)
    random.Random(seed).shuffle(order)
    body = shape.passage_text

    if shape.documents == "passages":
        docs = [
            Document(
                text=body(p), id=p["id"], metadata={"title": p["title"]} if shape.titles == "meta" else {}
            )
            for p in order
        ]
        return docs, PassageAttribution()
    docs = []
    sections: dict[str, list[tuple[str, str]]] = {}
    width = len(str(max(1, (len(order) - 1) // shape.sections + 1)))
    for n, start in enumerate(range(0, len(order), shape.sections), start=1):
        doc_id = f"document-{n:0{width}d}"
        parts = [(p["id"], body(p)) for p in order[start : start + shape.sections]]
        sections[doc_id] = parts
        docs.append(Document(text="\n\n".join(t for _, t in parts), id=doc_id, metadata={"source": doc_id}))
    return docs, PassageAttribution(sections)


def _own_documents(
    passages: Sequence[Mapping[str, str]], seed: int
) -> tuple[list[Document], PassageAttribution]:
    """Each document of a corpus of documents as one, its paragraphs in order; the documents shuffled."""
    sections: dict[str, list[tuple[str, str]]] = {}
    for p in passages:  # already in paragraph order (load_passages)
        sections.setdefault(p["document"], []).append((p["id"], p["text"]))
    names = list(sections)
    random.Random(seed).shuffle(names)
    docs = [
        Document(text="\n\n".join(t for _, t in sections[n]), id=n, metadata={"source": n}) for n in names
    ]
    return docs, PassageAttribution({n: sections[n] for n in names})
