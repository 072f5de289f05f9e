"""Framework-neutral value types shared by every strategy and adapter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TITLE_FROM_FILE_NAME", "BuildReport", "Chunk", "Document", "Retrieved"]

#: Metadata key marking a ``title`` that is only the file's name (``bridge-rag index`` gives a
#: text without a title its file's stem): shown as the title, never taken for what the
#: document is about, so ``report-44`` never becomes an entity.
TITLE_FROM_FILE_NAME = "title_from_file_name"


@dataclass(frozen=True)
class Document:
    """An input document.

    Attributes:
        text: The document's text.
        id: A stable identifier; generated from the text's hash when omitted.
        metadata: Arbitrary JSON-like metadata, copied onto every chunk.
    """

    text: str
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Chunk:
    """A contiguous piece of a document.

    Attributes:
        id: Unique chunk id (``"{doc_id}::{order}"``).
        doc_id: The id of the document it came from.
        order: Position of the chunk in its document (0-based).
        text: The chunk's text (exactly ``document.text[start:end]``).
        start: Character offset of the chunk in the document.
        end: Character offset one past the chunk's end.
        metadata: The document's metadata.
    """

    id: str
    doc_id: str
    order: int
    text: str
    start: int
    end: int
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Retrieved:
    """One retrieval result, with provenance.

    Attributes:
        id: The chunk (or abstract) id.
        text: Its text.
        score: The strategy's score (higher is better).
        metadata: The document's metadata plus provenance: how the result was found.
    """

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class BuildReport:
    """What an index build did and how long each step took.

    Attributes:
        counts: Named counts (chunks, abstracts per level, entities, ...).
        seconds: Wall-clock seconds per step, in the order the steps ran.
    """

    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        """Sum of all step times."""
        return float(sum(self.seconds.values()))

    def __str__(self) -> str:
        lines = ["build report"]
        lines += [f"  {k:<28} {v:>10,}" for k, v in self.counts.items()]
        lines += [f"  {k + ' (s)':<28} {v:>10.2f}" for k, v in self.seconds.items()]
        lines.append(f"  {'total (s)':<28} {self.total_seconds:>10.2f}")
        return "\n".join(lines)
