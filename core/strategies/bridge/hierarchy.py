"""Grouping by meaning: deterministic, balanced clustering of embeddings for tree levels.

Bridge-RAG's upper levels group abstracts into parents. Grouping by position alone hurt
depth-2 retrieval in the published code, so parents here gather children that are close
in embedding space. The method is recursive principal-direction bisection: split the set
along its first principal component (found by power iteration from a fixed start), sort
by the projection, cut into two halves whose sizes are multiples of the branching factor,
and recurse until a part holds at most ``branching`` items. It is deterministic (same
embeddings, same groups), needs no LLM, and costs O(n d log n).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["group_by_meaning", "weighted_centroids"]

_POWER_ITERATIONS = 25


def _principal_direction(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """First principal direction of the centred rows ``x``, with a fixed sign."""
    xc = (x - x.mean(axis=0)).astype(np.float64)
    v = np.ones(x.shape[1], dtype=np.float64) / np.sqrt(x.shape[1])
    v += xc[0] * 1e-3  # break the symmetry of the all-ones start deterministically
    for _ in range(_POWER_ITERATIONS):
        w = xc.T @ (xc @ v)
        norm = float(np.linalg.norm(w))
        if norm == 0.0:
            break
        v = w / norm
    pivot = int(np.argmax(np.abs(v)))
    out: npt.NDArray[np.float64] = v if v[pivot] >= 0 else -v
    return out


def group_by_meaning(embeddings: npt.NDArray[np.float32], branching: int) -> list[list[int]]:
    """Partitions row indices into groups of at most ``branching`` similar rows.

    Args:
        embeddings: (n, d) float array, one row per item (normalised rows work best).
        branching: Largest group size (>= 2).

    Returns:
        Groups of row indices (each sorted), ordered by their position along the splits.
        Every index appears in exactly one group; all groups but possibly one are full.

    Raises:
        ValueError: ``branching`` < 2 or ``embeddings`` is not two-dimensional.
    """
    if branching < 2:
        raise ValueError(f"branching must be >= 2, got {branching}")
    if embeddings.ndim != 2:
        raise ValueError("embeddings must be a two-dimensional array")
    n = embeddings.shape[0]
    groups: list[list[int]] = []
    stack: list[npt.NDArray[np.int64]] = [np.arange(n, dtype=np.int64)] if n else []
    while stack:
        idx = stack.pop()
        if len(idx) <= branching:
            groups.append(sorted(int(i) for i in idx))
            continue
        proj = embeddings[idx].astype(np.float64) @ _principal_direction(embeddings[idx])
        order = idx[np.lexsort((idx, proj))]  # by projection, ties by index
        n_groups = -(-len(idx) // branching)
        left = (n_groups // 2) * branching
        stack.append(order[left:])  # popped after the left part: groups come out in order
        stack.append(order[:left])
    return groups


def weighted_centroids(
    embeddings: npt.NDArray[np.float32], groups: list[list[int]], weights: npt.NDArray[np.float64]
) -> npt.NDArray[np.float32]:
    """Normalised weighted mean of each group's rows.

    Args:
        embeddings: (n, d) rows.
        groups: Row indices per group.
        weights: (n,) non-negative weight per row (e.g. the chunks each row stands for).

    Returns:
        (len(groups), d) float32 array of L2-normalised centroids (zero rows stay zero).
    """
    out = np.zeros((len(groups), embeddings.shape[1]), dtype=np.float32)
    for g, members in enumerate(groups):
        w = weights[members][:, None]
        c = (embeddings[members].astype(np.float64) * w).sum(axis=0)
        norm = float(np.linalg.norm(c))
        out[g] = c / norm if norm > 0 else c
    return out
