"""Uncertainty fusion of any retrievers' ranked lists (UMG-RAG's fusion, on its own).

UMG-RAG weighs each expert's list, per query, by how sure that list is: the entropy of its
score distribution. This module does the same for lists that come from anywhere (a BM25
retriever, a vector store, a reranker), so the fusion composes with the retrievers an app
already runs. For each list ``l`` with scores ``s``:

* its confidence ``c_l = entropy_confidence(standardize(s), temperature)``: a peaked list
  (one clear winner) is trusted more than a flat one;
* its scores are min-max scaled to [0, 1];
* an item's fused score is ``sum_l weight_l * c_l * scaled_l(item)``, an item missing from a
  list getting nothing from it.

A list that carries no scores (LangChain's ``BM25Retriever`` returns none) is given rank
scores ``1 / (1 + rank)`` and, since its rank scores have the same shape on every query, the
mean confidence of the lists that do carry scores (0.5 when none does): it is fused like a
weighted reciprocal-rank list. When every confidence is zero (all lists flat), the weights
alone decide.

Nothing here imports a framework; the adapters in ``langchain_bridge`` and
``llama_index_bridge`` turn their documents into :class:`RankedList` and back.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.native.fusion import fuse_weighted
from core.strategies.umg.uncertainty import entropy_confidence, minmax_normalize, standardize

__all__ = ["DEFAULT_TEMPERATURE", "FusedItem", "RankedList", "fuse_ranked_lists", "list_confidences"]

DEFAULT_TEMPERATURE = 1.0
"""Softmax temperature of the confidence, on z-scores (UMG-RAG's default)."""
_NEUTRAL_CONFIDENCE = 0.5  # a scoreless list's confidence when no list has scores


@dataclass(frozen=True)
class RankedList:
    """One retriever's results for a query, best first.

    Attributes:
        keys: Each result's identity (a document id, or its text); repeats count once.
        scores: Each result's score (higher is better), or None when the retriever gave none.
    """

    keys: Sequence[Hashable]
    scores: Sequence[float] | None = None

    def __post_init__(self) -> None:
        if self.scores is not None and len(self.scores) != len(self.keys):
            raise ValueError(f"a ranked list has {len(self.keys)} results but {len(self.scores)} scores")


@dataclass(frozen=True)
class FusedItem:
    """One fused result.

    Attributes:
        key: The result's identity (as in the lists).
        score: Its fused score.
        source: The index of the first list (in the caller's order) that returned it.
    """

    key: Hashable
    score: float
    source: int


def _checked_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1.0] * n
    values = [float(w) for w in weights]
    if len(values) != n:
        raise ValueError(f"{len(values)} weights for {n} retrievers; give one weight per retriever")
    if any(not math.isfinite(w) or w < 0 for w in values):
        raise ValueError(f"weights must be finite and >= 0, got {list(weights)}")
    return values


def _scaled(raw: Sequence[float]) -> npt.NDArray[np.float64]:
    """Min-max scaled scores; a non-finite score counts as the list's lowest."""
    s = np.asarray(raw, dtype=np.float64)
    finite = np.isfinite(s)
    if not finite.all():
        s = np.where(finite, s, s[finite].min() if finite.any() else 0.0)
    return minmax_normalize(s)


def list_confidences(lists: Sequence[RankedList], temperature: float = DEFAULT_TEMPERATURE) -> list[float]:
    """Each list's confidence in [0, 1] (a scoreless list: the mean of the scored ones').

    Raises:
        ValueError: ``temperature`` is not a positive finite number.
    """
    scored = [
        entropy_confidence(standardize(np.asarray(li.scores, dtype=np.float64)), temperature)
        if li.scores is not None
        else None
        for li in lists
    ]
    known = [c for c in scored if c is not None]
    fallback = float(np.mean(known)) if known else _NEUTRAL_CONFIDENCE
    return [fallback if c is None else c for c in scored]


def fuse_ranked_lists(
    lists: Sequence[RankedList],
    weights: Sequence[float] | None = None,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    k: int | None = None,
) -> tuple[list[FusedItem], list[float]]:
    """Fuses ranked lists, each weighted by its per-query confidence.

    Args:
        lists: One list per retriever.
        weights: A prior weight per list (default equal); multiplied by its confidence.
        temperature: Softmax temperature of the confidence (on z-scores).
        k: How many fused results to return; None: all.

    Returns:
        The fused results, best first (ties: the earlier first appearance), and each list's
        confidence.

    Raises:
        ValueError: A weight per list is not given, a weight is negative or not finite, or
            ``k`` < 1.
    """
    w = _checked_weights(weights, len(lists))
    if k is not None and k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    confidences = list_confidences(lists, temperature)
    effective = [wi * ci for wi, ci in zip(w, confidences, strict=True)]
    if not any(effective):
        effective = w  # every list flat: the prior weights alone decide
    ids: dict[Hashable, int] = {}
    source: list[int] = []
    offsets = [0]
    unit_ids: list[int] = []
    scaled: list[npt.NDArray[np.float64]] = []
    for li_index, li in enumerate(lists):
        raw = li.scores if li.scores is not None else [1.0 / (1 + r) for r in range(len(li.keys))]
        for key in li.keys:
            if key not in ids:
                ids[key] = len(ids)
                source.append(li_index)
            unit_ids.append(ids[key])
        scaled.append(_scaled(raw))
        offsets.append(len(unit_ids))
    if not ids:
        return [], confidences
    flat = np.concatenate(scaled).astype(np.float32)
    fused_ids, fused = fuse_weighted(offsets, unit_ids, flat, effective, 0)
    keys = list(ids)
    # fuse_weighted breaks ties by unit id: the order of first appearance, as documented.
    items = [
        FusedItem(keys[i], float(s), source[i])
        for i, s in zip(fused_ids.tolist(), fused.tolist(), strict=True)
    ]
    return (items if k is None else items[:k]), confidences
