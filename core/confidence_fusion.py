"""Uncertainty fusion of any retrievers' ranked lists (UMG-RAG's fusion, on its own).

UMG-RAG weighs each expert's list, per query, by how sure that list is: the entropy of its
score distribution. This module does the same for lists that come from anywhere (a BM25
retriever, a vector store, a reranker), so the fusion composes with the retrievers an app
already runs. For each list ``l`` with scores ``s``:

* its confidence ``c_l = entropy_confidence(standardize(s), temperature)``: a peaked list
  (one clear winner) is trusted more than a flat one;
* each item gets a contribution from its place in the list (``scaling``): ``"rank"`` (the
  default) gives the item at 1-based rank ``r`` ``1 / (r + c)``, a reciprocal-rank
  contribution (``c`` = :data:`DEFAULT_RANK_CONSTANT`); ``"minmax"`` gives its score
  min-max scaled to [0, 1];
* an item's fused score is ``sum_l weight_l * c_l * contribution_l(item)``, an item missing
  from a list getting nothing from it.

So the scores decide how much a list is trusted on this query, and the ranks what each of
its items brings: with equal confidences, ``"rank"`` is reciprocal-rank fusion. Rank
contributions are the default because the lists an app fuses are short and their scores
are on unrelated scales: min-max scaling of five scores gives the fifth nothing and lets
one gap decide the rest (``python -m core.evaluation.fusion_sweep`` prints both, on every
dev set). UMG-RAG's own fusion, over 50-long lists of its experts, scales scores.

A list that carries no scores (LangChain's ``BM25Retriever`` returns none) is given rank
scores ``1 / (rank + c)`` and, since its rank scores have the same shape on every query, the
mean confidence of the lists that do carry scores (0.5 when none does). When every
confidence is zero (all lists flat), the weights alone decide.

Nothing here imports a framework; the adapters in ``langchain_bridge`` and
``llama_index_bridge`` turn their documents into :class:`RankedList` and back.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from core.native.fusion import fuse_weighted
from core.strategies.umg.uncertainty import (
    check_temperature,
    entropy_confidence,
    minmax_normalize,
    standardize,
)

__all__ = [
    "DEFAULT_RANK_CONSTANT",
    "DEFAULT_SCALING",
    "DEFAULT_TEMPERATURE",
    "FusedItem",
    "RankedList",
    "Scaling",
    "check_rank_constant",
    "check_scaling",
    "check_temperature",
    "check_weights",
    "fuse_ranked_lists",
    "item_key",
    "list_confidences",
]

DEFAULT_TEMPERATURE = 0.25
"""Softmax temperature of the confidence, on z-scores.

Chosen with ``python -m core.evaluation.fusion_sweep`` on the three dev sets together, with
5 and 10 results per retriever: the best mean gain over ``EnsembleRetriever`` of the
temperatures swept (0.1 to 4), though every one of them lay within 0.7 points of it; rank
contributions beat min-max scaled scores at every temperature. UMG-RAG's own fusion keeps
its temperature (:class:`~core.strategies.umg.UMGConfig`), set on its 50-long lists."""
Scaling = Literal["rank", "minmax"]
"""How an item's place in its list becomes its contribution: its rank, or its min-max scaled score."""
DEFAULT_SCALING: Scaling = "rank"
"""Reciprocal-rank contributions, weighted by each list's confidence (see the module's notes)."""
DEFAULT_RANK_CONSTANT = 1.0
"""The ``c`` of a rank contribution ``1 / (rank + c)`` (1-based ranks).

Chosen with the temperature by ``python -m core.evaluation.fusion_sweep`` (c in 0, 1, 2, 5,
10, 60), on the three dev sets together, with 5 and 10 results per retriever: of the
settings at or above ``EnsembleRetriever`` on every set at both list lengths, c = 1 with
T = 0.25 has the best mean gain over it (+1.8 points; c = 0, at +1.9, trails it on one set
by less than one question). ``EnsembleRetriever``'s own c = 60 flattens a short list's
ranks, so an item both lists hold low beats either list's first, and leaves little for the
confidences to weigh: with them it trails the ensemble by 0.3 to 3.7 points."""
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


def check_scaling(scaling: object) -> Scaling:
    """``scaling`` if it is ``"rank"`` or ``"minmax"``.

    Raises:
        ValueError: Any other value.
    """
    if scaling == "rank" or scaling == "minmax":
        return scaling
    raise ValueError(f"scaling must be 'rank' or 'minmax', got {scaling!r}")


def check_rank_constant(c: object) -> float:
    """``c`` if it is a finite number >= 0 (the ``c`` of ``1 / (rank + c)``).

    Raises:
        ValueError: Any other value.
    """
    if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c < 0:
        raise ValueError(f"c must be a finite number >= 0, got {c!r}")
    return float(c)


def check_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    """One finite weight >= 0 per list (all 1.0 when ``weights`` is None).

    Raises:
        ValueError: Not one weight per list, or a negative or non-finite weight.
    """
    if weights is None:
        return [1.0] * n
    values = [float(w) for w in weights]
    if len(values) != n:
        raise ValueError(f"{len(values)} weights for {n} retrievers; give one weight per retriever")
    if any(not math.isfinite(w) or w < 0 for w in values):
        raise ValueError(f"weights must be finite and >= 0, got {list(weights)}")
    return values


def _finite(raw: Sequence[float]) -> npt.NDArray[np.float64]:
    """Scores with every value finite and scaled to at most 1 in magnitude (z-scores ignore scale).

    ``+inf`` counts as a clear best (one spread above the finite maximum), NaN and ``-inf``
    as the list's lowest, so one odd score neither silences its list nor wins by default.
    """
    s = np.asarray(raw, dtype=np.float64)
    finite = np.isfinite(s)
    if not finite.all():
        lo, hi = (float(s[finite].min()), float(s[finite].max())) if finite.any() else (0.0, 0.0)
        s = np.where(np.isposinf(s), hi + max(hi - lo, 1.0), np.where(finite, s, lo))
    top = float(np.abs(s).max()) if s.size else 0.0
    return s / top if top > 0 else s  # no overflow in the variance of huge scores


def _scaled(raw: Sequence[float]) -> npt.NDArray[np.float64]:
    """Min-max scaled scores (non-finite ones placed as :func:`_finite` places them)."""
    return minmax_normalize(_finite(raw))


def list_confidences(lists: Sequence[RankedList], temperature: float = DEFAULT_TEMPERATURE) -> list[float]:
    """Each list's confidence in [0, 1] (a scoreless list: the mean of the scored ones').

    An empty list has confidence 0 and does not count among the scored lists (a filter that
    matched nothing says nothing about how sure the other lists are).

    Raises:
        ValueError: ``temperature`` is not a positive finite number.
    """
    scored = [
        entropy_confidence(standardize(_finite(li.scores)), temperature)
        if li.scores is not None and li.keys
        else None
        for li in lists
    ]
    known = [c for c in scored if c is not None]
    fallback = float(np.mean(known)) if known else _NEUTRAL_CONFIDENCE
    return [0.0 if not li.keys else fallback if c is None else c for c, li in zip(scored, lists, strict=True)]


def fuse_ranked_lists(
    lists: Sequence[RankedList],
    weights: Sequence[float] | None = None,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    k: int | None = None,
    scaling: Scaling = DEFAULT_SCALING,
    c: float = DEFAULT_RANK_CONSTANT,
) -> tuple[list[FusedItem], list[float]]:
    """Fuses ranked lists, each weighted by its per-query confidence.

    Args:
        lists: One list per retriever.
        weights: A prior weight per list (default equal); multiplied by its confidence.
        temperature: Softmax temperature of the confidence (on z-scores).
        k: How many fused results to return; None: all.
        scaling: An item's contribution: ``"rank"``, ``1 / (rank + c)`` (1-based ranks);
            ``"minmax"``, its score min-max scaled to [0, 1] (rank scores for a list without
            scores).
        c: The rank constant, as in ``EnsembleRetriever`` (whose default is 60); 1 here
            (:data:`DEFAULT_RANK_CONSTANT`), so the first places weigh most and the
            confidences decide between the lists.

    Returns:
        The fused results, best first (ties: the earlier first appearance), and each list's
        confidence.

    Raises:
        ValueError: A weight per list is not given, a weight is negative or not finite, or
            ``k`` < 1, or an unknown ``scaling``, or ``c`` < 0.
    """
    w = check_weights(weights, len(lists))
    check_scaling(scaling)
    c = check_rank_constant(c)
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
        ranks = [1.0 / (c + 1 + r) for r in range(len(li.keys))]
        for key in li.keys:
            if key not in ids:
                ids[key] = len(ids)
                source.append(li_index)
            unit_ids.append(ids[key])
        if scaling == "rank":
            scaled.append(np.asarray(ranks, dtype=np.float64))
        else:
            scaled.append(_scaled(li.scores if li.scores is not None else ranks))
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


def item_key(
    text: str, metadata: Mapping[str, object], id_key: str | None, source: int, what: str
) -> Hashable:
    """What identifies an item across the fused lists: its text, or ``metadata[id_key]``.

    Args:
        text: The item's text (without metadata).
        metadata: Its metadata.
        id_key: The metadata key naming it; None: its text.
        source: The 0-based index of the list (retriever) it came from, for the message.
        what: What the framework calls an item ("document", "node").

    Raises:
        ValueError: ``id_key`` is given and the item lacks it.
    """
    if id_key is None:
        return text
    if id_key not in metadata:
        raise ValueError(
            f"a {what} from retriever {source + 1} has no metadata[{id_key!r}]; give every {what} "
            f"that key, or leave id_key=None to match {what}s by their text"
        )
    value = metadata[id_key]
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
