"""Cluster index: top-k cosine search whose cost grows with the square root of the rows.

An inverted file over rows of a float32 matrix of unit vectors: spherical k-means (seeded,
on a sample) splits the rows into about ``4 * sqrt(N)`` lists; a search scores the query
against every centroid and scans the best lists until ``probe_rows`` rows were scored
(C++, GIL released). Below ``exact_below`` rows the index is one list and the search is
exact: one BLAS product of all the queries with the rows, which reads the rows once for a
whole batch of queries. The index stores the list layout only; the vectors stay in the
caller's matrix (an exact index over a subset of rows caches a contiguous copy of them).

Measured on the grown musique graph of the BubbleRAG benchmark (64,198 node vectors,
1,014 lists, the concepts of 100 questions): ``probe_rows`` = 2,048 finds 95 % of the exact
top 3 in 4.0 ms per question, against 30.5 ms for the exact product.

BubbleRAG uses it to find anchor nodes and relation edges, so a query's cost does not
grow with the whole graph.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from core._native import ClusterIndex as _NativeClusterIndex
from core.persist import array_from_bytes, array_to_bytes

__all__ = ["DEFAULT_EXACT_BELOW", "DEFAULT_PROBE_ROWS", "ClusterIndex"]

DEFAULT_PROBE_ROWS = 2048
DEFAULT_EXACT_BELOW = 16_384
_BLOCK = 8192
_LISTS_PER_SQRT = 4
_SAMPLE_PER_LIST = 40
_ITERATIONS = 8

FloatMatrix = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


class ClusterIndex:
    """Lists of row ids with a centroid each, searchable against the matrix they index.

    Attributes:
        centroids: One unit vector per list (lists x dim).
        offsets: List ``c`` holds ``rows[offsets[c]:offsets[c + 1]]``.
        rows: The indexed row ids, grouped by list (ascending within a list).
        trained_on: How many rows the centroids were trained on (0: one exact list).
    """

    def __init__(self, centroids: FloatMatrix, offsets: IntArray, rows: IntArray, trained_on: int) -> None:
        """Wraps a validated layout (use :meth:`build` or :meth:`from_files`).

        Raises:
            ValueError: The layout is inconsistent (offsets, repeated or negative rows).
        """
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.rows = np.ascontiguousarray(rows, dtype=np.int64)
        self.trained_on = int(trained_on)
        self._native = _NativeClusterIndex(self.centroids, self.offsets, self.rows)
        self._exact: tuple[FloatMatrix, FloatMatrix] | None = None  # (matrix, its listed rows)
        self._all_rows = bool(np.array_equal(self.rows, np.arange(self.rows.size)))

    @property
    def num_lists(self) -> int:
        """How many lists (1: exact search)."""
        return int(self._native.num_lists)

    def __len__(self) -> int:
        return len(self._native)

    @classmethod
    def build(
        cls,
        matrix: FloatMatrix,
        rows: IntArray | None = None,
        *,
        exact_below: int = DEFAULT_EXACT_BELOW,
        seed: int = 0,
        reuse: ClusterIndex | None = None,
    ) -> ClusterIndex:
        """Indexes ``matrix[rows]`` (all rows when ``rows`` is None).

        Args:
            matrix: Unit row vectors, float32.
            rows: Row ids to index (unique, in range).
            exact_below: With fewer rows than this, one list: exact search.
            seed: Seed of the k-means sample and initial centroids.
            reuse: A previous index of the same matrix: its centroids are kept (only the rows
                are assigned) while the rows have not doubled since it was trained.

        Raises:
            ValueError: ``matrix`` is not two-dimensional or ``rows`` is out of range.
        """
        if matrix.ndim != 2:
            raise ValueError(f"matrix must be two-dimensional, got shape {matrix.shape}")
        ids = np.arange(matrix.shape[0], dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= matrix.shape[0]):
            raise ValueError(f"rows must lie within 0..{matrix.shape[0] - 1}")
        ids = np.unique(ids)
        n, dim = ids.size, matrix.shape[1]
        if n < max(exact_below, 2):
            return cls(np.zeros((1, dim), np.float32), np.asarray([0, n], np.int64), ids, 0)
        if (
            reuse is not None
            and reuse.trained_on
            and reuse.centroids.shape[1] == dim
            and n <= 2 * reuse.trained_on
        ):
            centroids, trained_on = reuse.centroids, reuse.trained_on
        else:
            centroids, trained_on = _spherical_kmeans(matrix, ids, seed), n
        assign = _nearest(matrix, ids, centroids)
        order = np.lexsort((ids, assign))
        offsets = np.zeros(centroids.shape[0] + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(np.bincount(assign, minlength=centroids.shape[0]))
        return cls(centroids, offsets, ids[order], trained_on)

    def search(
        self, queries: FloatMatrix, matrix: FloatMatrix, k: int, probe_rows: int = DEFAULT_PROBE_ROWS
    ) -> tuple[IntArray, FloatMatrix]:
        """Top ``k`` rows per query (a row each), best first; id -1 and score -inf pad.

        Raises:
            ValueError: Wrong widths, or a matrix without the indexed rows.
        """
        if self.num_lists > 1:
            return self._native.search(queries, matrix, k, probe_rows)
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.centroids.shape[1]:
            raise ValueError(f"queries must be two-dimensional with {self.centroids.shape[1]} columns")
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        self._native.search(q[:0], matrix, 0, 0)  # the same checks of the matrix as a real search
        rows = self._exact_rows(matrix)
        norms = np.linalg.norm(q, axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            sims = (q / np.where(norms > 0, norms, 1.0)) @ rows.T
        sims[np.isnan(sims)] = -np.inf
        kk = min(k, self.rows.size)
        ids = np.full((q.shape[0], k), -1, dtype=np.int64)
        scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
        if kk:
            cuts = -np.partition(-sims, kk - 1, axis=1)[:, kk - 1]  # the kk-th best score per query
            for i in range(q.shape[0]):
                # every row scoring at least the cut, so ties at the cut go to the lowest row ids
                cand = np.flatnonzero(sims[i] >= cuts[i])
                order = cand[np.lexsort((self.rows[cand], -sims[i, cand]))][:kk]
                ids[i, :kk] = self.rows[order]
                scores[i, :kk] = sims[i, order]
        return ids, scores

    def _exact_rows(self, matrix: FloatMatrix) -> FloatMatrix:
        """The listed rows of ``matrix``: the matrix itself when it lists them all, else a cached copy."""
        if self._all_rows and self.rows.size == matrix.shape[0]:
            return matrix
        cached = self._exact
        if cached is None or cached[0] is not matrix:
            cached = (matrix, np.ascontiguousarray(matrix[self.rows]))
            self._exact = cached
        return cached[1]

    def memory_bytes(self) -> int:
        """Bytes held by the layout, plus the copied rows of an exact index over a subset."""
        copied = self._exact[1].nbytes if self._exact is not None else 0
        return int(self._native.memory_bytes()) + int(copied)

    def to_files(self, prefix: str) -> dict[str, bytes]:
        """The layout as named byte blobs (no pickle)."""
        return {
            f"{prefix}centroids.npy": array_to_bytes(self.centroids),
            f"{prefix}offsets.npy": array_to_bytes(self.offsets),
            f"{prefix}rows.npy": array_to_bytes(self.rows),
            f"{prefix}trained_on.npy": array_to_bytes(np.asarray([self.trained_on], dtype=np.int64)),
        }

    @classmethod
    def from_files(
        cls, files: Mapping[str, bytes], prefix: str, dim: int, num_rows: int
    ) -> ClusterIndex | None:
        """Reads :meth:`to_files` output; None when absent (older indexes: rebuild it).

        Raises:
            ValueError: The files are malformed or do not fit a matrix of ``num_rows`` x ``dim``.
        """
        if f"{prefix}centroids.npy" not in files:
            return None
        try:
            centroids = array_from_bytes(files[f"{prefix}centroids.npy"], dtype=np.float32, ndim=2)
            offsets = array_from_bytes(files[f"{prefix}offsets.npy"], dtype=np.int64, ndim=1)
            rows = array_from_bytes(files[f"{prefix}rows.npy"], dtype=np.int64, ndim=1)
            trained = array_from_bytes(files[f"{prefix}trained_on.npy"], dtype=np.int64, ndim=1)
        except KeyError as exc:
            raise ValueError(f"the cluster index files are missing {exc}; rebuild the index") from exc
        if centroids.shape[1:] != (dim,) or trained.shape != (1,) or int(trained[0]) < 0:
            raise ValueError("the cluster index files do not match the vectors; rebuild the index")
        if rows.size and int(rows.max()) >= num_rows:
            raise ValueError("the cluster index lists rows the matrix does not have; rebuild the index")
        return cls(centroids, offsets, rows, int(trained[0]))


def _nearest(matrix: FloatMatrix, ids: IntArray, centroids: FloatMatrix) -> IntArray:
    """Index of the most similar centroid per row (blocked, so memory stays bounded)."""
    out = np.empty(ids.size, dtype=np.int64)
    for start in range(0, ids.size, _BLOCK):
        block = matrix[ids[start : start + _BLOCK]]
        out[start : start + _BLOCK] = np.argmax(block @ centroids.T, axis=1)
    return out


def _spherical_kmeans(matrix: FloatMatrix, ids: IntArray, seed: int) -> FloatMatrix:
    """About ``4 * sqrt(n)`` unit centroids from a seeded sample (empty lists keep their centroid)."""
    n = ids.size
    lists = max(2, math.ceil(_LISTS_PER_SQRT * math.sqrt(n)))
    rng = np.random.default_rng(seed)
    sample_ids = np.sort(rng.choice(ids, size=min(n, _SAMPLE_PER_LIST * lists), replace=False))
    sample = np.ascontiguousarray(matrix[sample_ids], dtype=np.float32)
    centroids = sample[np.sort(rng.choice(sample.shape[0], size=lists, replace=False))].copy()
    local = np.arange(sample.shape[0], dtype=np.int64)
    for _ in range(_ITERATIONS):
        assign = _nearest(sample, local, centroids)
        order = np.argsort(assign, kind="stable")
        counts = np.bincount(assign, minlength=lists)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        filled = counts > 0
        sums = np.add.reduceat(sample[order], starts[filled], axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        ok = norms[:, 0] > 0
        target = np.flatnonzero(filled)[ok]
        centroids[target] = sums[ok] / norms[ok]
    return centroids
