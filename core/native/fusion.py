"""Rank fusion and interval merging: the C++ kernels behind multi-granularity retrieval.

Thin, typed wrappers over ``core._native`` (``csrc/include/bridge/fusion.hpp`` and
``intervals.hpp``). They carry no retrieval policy: which lists to fuse, with what weights,
and how windows map to units is the strategy's business.

Several ranked lists travel *packed*, CSR style: list ``l`` is
``unit_ids[list_offsets[l]:list_offsets[l + 1]]`` (and the same slice of ``scores``), in that
list's rank order; ``list_offsets`` has one entry more than there are lists, starts at 0 and
ends at ``len(unit_ids)``. :func:`pack_lists` builds that layout from Python lists.

All three kernels release the GIL, keep no state and are safe to call from several threads.
Inputs are converted once (integer arrays to int64, scores to float32); integer inputs must
have an integer dtype, so ``[1.0, 2.0]`` as ids is a ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple, TypedDict

import numpy as np
import numpy.typing as npt

from core import _native

__all__ = ["MergedIntervals", "PackedLists", "fuse_weighted", "merge_intervals", "pack_lists", "rrf_fuse"]

IntsLike = Iterable[int] | npt.NDArray[np.integer]
FloatsLike = Iterable[float] | npt.NDArray[np.floating] | npt.NDArray[np.integer]


class MergedIntervals(TypedDict):
    """Columns of :func:`merge_intervals`' result, one row per output interval."""

    group: npt.NDArray[np.int64]
    """Group (document) id."""
    start: npt.NDArray[np.int64]
    """Inclusive start."""
    end: npt.NDArray[np.int64]
    """Exclusive end."""
    score: npt.NDArray[np.float32]
    """Score of the best member."""
    best_index: npt.NDArray[np.int64]
    """Input index of the best member (ties: the lowest index)."""
    members: npt.NDArray[np.int64]
    """How many input intervals the row represents; the column sums to the input length."""


class PackedLists(NamedTuple):
    """Ranked lists in the packed (CSR) layout that :func:`fuse_weighted` and :func:`rrf_fuse` take."""

    list_offsets: npt.NDArray[np.int64]
    """``len(lists) + 1`` offsets into ``unit_ids``, from 0 to ``len(unit_ids)``."""
    unit_ids: npt.NDArray[np.int64]
    """Every list's unit ids, concatenated."""
    scores: npt.NDArray[np.float32] | None
    """Every list's scores, concatenated (``None`` when no scores were given)."""


def pack_lists(
    unit_lists: Sequence[Sequence[int] | npt.NDArray[np.integer]],
    score_lists: Sequence[Sequence[float] | npt.NDArray[np.floating]] | None = None,
) -> PackedLists:
    """Packs ranked lists into the CSR layout of the fusion kernels.

    Args:
        unit_lists: One sequence of unit ids per list, best first.
        score_lists: Optional matching scores, one sequence per list, each as long as its
            ``unit_lists`` entry.

    Returns:
        ``PackedLists(list_offsets, unit_ids, scores)``; ``scores`` is ``None`` when
        ``score_lists`` is.

    Raises:
        ValueError: When ``score_lists`` does not match ``unit_lists`` in shape.

    Example:
        >>> packed = pack_lists([[3, 1], [1]], [[0.9, 0.5], [0.7]])
        >>> packed.list_offsets.tolist(), packed.unit_ids.tolist()
        ([0, 2, 3], [3, 1, 1])
    """
    units = [np.asarray(u, dtype=np.int64).reshape(-1) for u in unit_lists]
    offsets = np.zeros(len(units) + 1, dtype=np.int64)
    if units:
        np.cumsum([len(u) for u in units], out=offsets[1:])
    flat = np.concatenate(units) if units else np.zeros(0, dtype=np.int64)
    if score_lists is None:
        return PackedLists(offsets, flat, None)
    scores = [np.asarray(s, dtype=np.float32).reshape(-1) for s in score_lists]
    if len(scores) != len(units):
        raise ValueError(f"score_lists has {len(scores)} lists, unit_lists has {len(units)}")
    for i, (u, s) in enumerate(zip(units, scores, strict=True)):
        if len(u) != len(s):
            raise ValueError(f"list {i} has {len(u)} unit ids but {len(s)} scores")
    flat_scores = np.concatenate(scores) if scores else np.zeros(0, dtype=np.float32)
    return PackedLists(offsets, flat, flat_scores)


def fuse_weighted(
    list_offsets: IntsLike,
    unit_ids: IntsLike,
    scores: FloatsLike,
    weights: FloatsLike,
    k: int = 0,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Fuses ranked lists by a weighted sum of their scores.

    Each list ``l`` adds ``weights[l] * s`` to each of its units, ``s`` being the unit's best
    score in that list: a unit repeated within one list counts once. Sums run in double
    precision in list order and are rounded to float32 once.

    Non-finite values: NaN scores count as 0; infinite scores are kept; a list of weight 0
    contributes nothing (even an infinite score), but its units still appear; a fused score
    left undefined (``+inf`` from one list, ``-inf`` from another) becomes ``-inf``.

    Args:
        list_offsets: ``L + 1`` offsets (see the module docstring); ``[0]`` for no lists.
        unit_ids: The ``M`` unit ids of all lists, concatenated.
        scores: ``M`` scores matching ``unit_ids`` (converted to float32).
        weights: ``L`` finite weights, one per list (negative weights are allowed).
        k: How many units to return; 0 returns every unit.

    Returns:
        ``(unit_ids, fused)``: the top ``k`` units by fused score descending, ties by unit id
        ascending, as int64 and float32 arrays.

    Raises:
        TypeError: When ids or offsets are not integers, or scores/weights not real numbers.
        ValueError: For malformed offsets, mismatched lengths, a non-finite weight or ``k < 0``.

    Example:
        >>> ids, fused = fuse_weighted([0, 2, 3], [7, 4, 4], [0.5, 0.25, 1.0], [1.0, 0.5])
        >>> ids.tolist(), fused.tolist()
        ([4, 7], [0.75, 0.5])
    """
    return _native.fuse_weighted(list_offsets, unit_ids, scores, weights, k)


def rrf_fuse(
    list_offsets: IntsLike,
    unit_ids: IntsLike,
    k_rrf: float = 60.0,
    k: int = 0,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Fuses ranked lists by reciprocal rank fusion (Cormack et al., 2009).

    Each list adds ``1 / (k_rrf + rank)`` to each of its units, ``rank`` being 1-based. Only
    a unit's first occurrence in a list counts, and later duplicates take no rank: the rank is
    the unit's place among the list's *distinct* units, so a sentence-level list mapped onto
    chunk ids ranks those chunks 1, 2, 3, ... (its induced chunk ranking).

    Args:
        list_offsets: ``L + 1`` offsets (see the module docstring); ``[0]`` for no lists.
        unit_ids: The ``M`` unit ids of all lists, concatenated, each list best first.
        k_rrf: The smoothing constant, finite and ``>= 0`` (60 in the original paper).
        k: How many units to return; 0 returns every unit.

    Returns:
        ``(unit_ids, scores)``: the top ``k`` units by fused score descending, ties by unit id
        ascending, as int64 and float32 arrays.

    Raises:
        TypeError: When ids or offsets are not integers.
        ValueError: For malformed offsets, a bad ``k_rrf`` or ``k < 0``.

    Example:
        >>> ids, scores = rrf_fuse([0, 2, 4], [1, 2, 2, 3], k_rrf=0.0)
        >>> ids.tolist(), scores.tolist()
        ([2, 1, 3], [1.5, 1.0, 0.5])
    """
    return _native.rrf_fuse(list_offsets, unit_ids, k_rrf, k)


def merge_intervals(
    groups: IntsLike,
    starts: IntsLike,
    ends: IntsLike,
    scores: FloatsLike,
    mode: Literal["union", "keep_best"] = "union",
) -> MergedIntervals:
    """Merges scored half-open intervals ``[start, end)`` within groups (e.g. windows within documents).

    Two intervals of the same group overlap when ``a.start < b.end and b.start < a.end``: nested
    intervals overlap, adjacent ones (``[0, 3)`` and ``[3, 5)``) do not. Empty intervals
    (``start == end``) are allowed but overlap nothing, so each is output on its own.

    Scores rank larger first with NaN after every number; ties between inputs go to the
    lowest index.

    * ``"union"``: every maximal set of transitively overlapping intervals of a group becomes
      one interval spanning their union; ``members`` counts them and ``score`` /
      ``best_index`` are those of the best member.
    * ``"keep_best"``: intervals are visited best first and one is kept only when it overlaps
      no interval already kept in its group, so spans stay as short as the inputs. A dropped
      interval adds 1 to the ``members`` of the earliest-kept interval it overlaps.

    Args:
        groups: ``n`` group ids (any int64).
        starts: ``n`` inclusive starts.
        ends: ``n`` exclusive ends, each ``>= start``.
        scores: ``n`` scores (converted to float32).
        mode: ``"union"`` or ``"keep_best"``.

    Returns:
        The output intervals as columns (see :class:`MergedIntervals`), sorted by score
        descending (NaN last), then group, start, end and best_index ascending.

    Raises:
        TypeError: When groups, starts or ends are not integers, or scores not real numbers.
        ValueError: For mismatched lengths, a start after its end or an unknown mode.

    Example:
        >>> out = merge_intervals([0, 0, 0], [0, 2, 10], [3, 5, 12], [0.25, 0.5, 0.375])
        >>> out["start"].tolist(), out["end"].tolist(), out["members"].tolist()
        ([0, 10], [5, 12], [2, 1])
    """
    return _native.merge_intervals(groups, starts, ends, scores, mode)
