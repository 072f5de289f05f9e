"""What the parent-promotion post-processors of both frameworks share.

:class:`ParentPromotionSettings` is the pydantic base of LangChain's
``ParentPromotionCompressor`` and LlamaIndex's ``ParentPromotionPostprocessor``: their
common fields, checks, ``from_umg`` and the promotion step itself. Each subclass only reads
its framework's results into :class:`~core.strategies.umg.promotion.PromotionItem` and the
passages back. Needs pydantic (which both frameworks bring); never imports either framework.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Self, TypeVar

from pydantic import BaseModel, Field, model_validator

from core.strategies.umg.promotion import Promoted, PromotionItem, promote_to_parents, texts_from_store

__all__ = ["ParentPromotionSettings", "offset_or_none", "promotion_item", "scores_or_ranks", "texts_by_id"]

R = TypeVar("R")


#: The settings fields that are :func:`~core.strategies.umg.promotion.promote_to_parents` options.
_PROMOTION_OPTIONS = frozenset(
    {"parent_size", "stride", "fine_max_sentences", "mode", "start_key", "end_key"}
)


class ParentPromotionSettings(BaseModel):
    """The settings of a parent-promotion post-processor, and the promotion step.

    See :func:`core.strategies.umg.promotion.promote_to_parents` for what the settings do.
    """

    texts: dict[str, str] = Field(default_factory=dict, description="Full source texts by document id.")
    """Full source document texts by document id."""

    parent_size: int = Field(default=8, ge=1, strict=True, description="Sentences per parent window.")
    """Sentences per parent window."""

    stride: int | None = Field(
        default=None, ge=1, strict=True, description="Step between windows; None for parent_size // 2."
    )
    """Step between parent windows; None for ``max(1, parent_size // 2)``."""

    fine_max_sentences: int = Field(
        default=4, ge=0, strict=True, description="Results covering at most this many sentences are promoted."
    )
    """Results covering at most this many sentences of their source are promoted."""

    mode: Literal["keep_best", "union"] = Field(
        default="keep_best", description="keep_best keeps the best of overlapping passages; union merges."
    )
    """``"keep_best"`` keeps the best of overlapping passages; ``"union"`` merges them."""

    doc_id_key: str = Field(default="doc_id", description="Metadata key of the source document id.")
    """Metadata key of the source document id."""

    start_key: str = Field(default="start_index", description="Metadata key of the start offset.")
    """Metadata key of the start offset in the source document."""

    end_key: str = Field(default="end_index", description="Metadata key of the end offset.")
    """Metadata key of the end offset in the source document."""

    @model_validator(mode="after")
    def _check_stride(self) -> Self:
        if self.stride is not None and self.stride > self.parent_size:
            raise ValueError(f"stride must be <= parent_size ({self.parent_size}), got {self.stride}")
        return self

    @classmethod
    def from_umg(cls, strategy: Any, **kwargs: Any) -> Self:
        """Builds the post-processor over the documents of a UMG-RAG index.

        The texts are rebuilt from the index's sentence-window units in Chroma (see
        :func:`core.strategies.umg.promotion.texts_from_store`), so no source documents are needed.

        Args:
            strategy: A :class:`core.strategies.umg.UMGRAG` (or a retriever wrapping one).
            **kwargs: Other fields (``parent_size``, ``mode``, ...).

        Returns:
            The post-processor.

        Raises:
            TypeError: ``strategy`` has no Chroma store.
        """
        strategy = getattr(strategy, "strategy", strategy)
        store = getattr(strategy, "store", None)
        if store is None:
            raise TypeError(f"from_umg expects a UMGRAG strategy, got {type(strategy).__name__}")
        return cls(texts=texts_from_store(store), **kwargs)

    def _promote(
        self, results: Sequence[R], scores: Sequence[object], item: Callable[[R, float], PromotionItem]
    ) -> list[Promoted]:
        """Parent promotion of a retriever's results; each passage's offsets written back.

        Args:
            results: The results, best first.
            scores: Their scores (rank order is used when one is missing or not finite).
            item: Reads one result, with its score, as a promotion item.

        Returns:
            The passages, best first (see :func:`core.strategies.umg.promotion.promote_to_parents`);
            ``index`` is the position of a passage's best member in ``results``.
        """
        ranked = scores_or_ranks(scores)
        items = [item(r, s) for r, s in zip(results, ranked, strict=True)]
        options = {name: getattr(self, name) for name in _PROMOTION_OPTIONS}
        return promote_to_parents(items, self.texts, **options)


def promotion_item(
    doc_id: object, start: int | None, end: int | None, score: float, text: str, metadata: Any, id: object
) -> PromotionItem:
    """A retrieved result as a promotion item; the ids stringified when given."""
    return PromotionItem(
        doc_id=None if doc_id is None else str(doc_id),
        start=start,
        end=end,
        score=score,
        text=text,
        metadata=dict(metadata),
        id=None if id is None else str(id),
    )


def offset_or_none(value: object) -> int | None:
    """A character offset from metadata: an int (not a bool), else None."""
    return None if isinstance(value, bool) or not isinstance(value, int) else value


def scores_or_ranks(scores: Sequence[object]) -> list[float]:
    """The given scores when every one is a finite number, else scores from the rank order."""
    numbers = [float(s) for s in scores if isinstance(s, int | float) and not isinstance(s, bool)]
    if len(numbers) == len(scores) and all(math.isfinite(s) for s in numbers):
        return numbers
    return [float(len(scores) - i) for i in range(len(scores))]


def texts_by_id(documents: Iterable[tuple[object, str]]) -> dict[str, str]:
    """Full source texts by document id, from ``(id, text)`` pairs.

    Raises:
        ValueError: A document has no id, or two different texts share one.
    """
    texts: dict[str, str] = {}
    for i, (raw, text) in enumerate(documents):
        if raw is None:
            raise ValueError(f"document {i} has no id: set its id or the doc_id metadata its chunks carry")
        doc_id = str(raw)
        if doc_id in texts and texts[doc_id] != text:
            raise ValueError(f"two different documents have the id {doc_id!r}; ids must be unique")
        texts[doc_id] = text
    return texts
