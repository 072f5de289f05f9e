"""Candidate scoring: top-k cosine over selected rows of an in-memory embedding matrix.

:func:`top_k_cosine` (C++, one query) scores rows of the matrix in place, and
:func:`top_k_cosine_groups` ranks several candidate sets in one pass, each row scored once;
:func:`top_k_products` scores a batch of queries against already gathered rows with one
BLAS product per block of queries, for the exact modes of the vector searches.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from core._native import top_k_cosine, top_k_cosine_groups

__all__ = ["top_k_cosine", "top_k_cosine_groups", "top_k_products"]

_QUERY_BLOCK = 256


def top_k_products(
    queries: npt.NDArray[np.float32],
    vectors: npt.NDArray[np.float32],
    ids: npt.NDArray[np.int64],
    k: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Exact top ``k`` of ``vectors`` (whose row ids are ``ids``) per query, by inner product.

    Best first; ties go to the lower id (every row scoring the k-th best score is a
    candidate, so a tie at the cut is broken by id too).

    Args:
        queries: ``(q, dim)`` query vectors.
        vectors: ``(len(ids), dim)`` candidate vectors.
        ids: The id of each candidate.
        k: Results per query.

    Returns:
        ``(ids, scores)`` of shape ``(q, k)``, padded with -1 and -inf.
    """
    out_ids = np.full((queries.shape[0], k), -1, dtype=np.int64)
    out_scores = np.full((queries.shape[0], k), -np.inf, dtype=np.float32)
    kk = min(k, ids.size)
    if kk == 0:
        return out_ids, out_scores
    for start in range(0, queries.shape[0], _QUERY_BLOCK):
        sims = queries[start : start + _QUERY_BLOCK] @ vectors.T
        cuts = -np.partition(-sims, kk - 1, axis=1)[:, kk - 1]  # the kk-th best score per query
        for j in range(sims.shape[0]):
            hit = np.flatnonzero(sims[j] >= cuts[j])
            order = hit[np.lexsort((ids[hit], -sims[j, hit]))][:kk]
            out_ids[start + j, :kk] = ids[order]
            out_scores[start + j, :kk] = sims[j, order]
    return out_ids, out_scores
