"""Top-k cosine search over the rows of a float32 matrix: exact when small, faiss HNSW when large.

One interface for every strategy: :meth:`VectorIndex.build` indexes rows of a matrix of unit
vectors (keys are the matrix's row numbers), :meth:`VectorIndex.search` returns the best ``k``
rows per query (best first, ties by lower row id, padded with id -1 and score -inf), optionally
restricted to an ``allowed`` boolean mask over the matrix rows (a metadata filter or a live
mask), and :meth:`VectorIndex.to_files` / :meth:`VectorIndex.from_files` persist it as bytes.

Below ``exact_below`` indexed rows there is no engine: the search is one numpy product. Above,
the rows go into a faiss ``IndexHNSWFlat`` (inner product). A filtered search scans the
allowed rows exactly when they are few (fewer than ``filter_exact_below``, or under 5 % of the
indexed rows), else it runs the HNSW search with an ``IDSelectorBitmap`` and falls back to the
exact scan of the allowed rows for any query that came back with fewer than ``k`` rows while
more are allowed. The scores are recomputed with numpy from the caller's matrix, so they do
not depend on the path that found the rows.

Engine and settings, measured by ``python -m core.evaluation.vector_engines`` on 32,231
all-MiniLM-L6-v2 sentence vectors (384 dims) of the three shared datasets and their 350
questions, one query per call, one thread: faiss HNSW ``M=32, efConstruction=200,
efSearch=96`` (``256`` when filtered) finds 99.2 % of the exact top 10 in 0.65 ms (p50), against
90.3 % in 0.83 ms for the ClusterIndex it replaces (0.68 ms in a quieter run; 0.65 against
0.76 ms when the two were timed interleaved in one process) and 5.2 ms for the exact scan.
With 10 % / 1 % of the rows allowed the search is an exact scan of them (under 8,192 rows):
100 % in 1.0 / 0.07 ms; forced through the HNSW filter at 10 %: 99.5 % in 1.5 ms. The graph
costs 22 s to build single-threaded (ClusterIndex: 1.7 s) and 56 MiB serialised (the vectors
are stored with it). usearch 2.26.6 needed 1.5 to 2 times as long for the same recall here and
its Python API has no filtered (predicate) search, which the ``allowed`` mask needs.

Determinism: the rows are added in batches of at most 100, which faiss inserts on the calling
thread (its OpenMP loop only forks above 100 points per level), and the level generator is
reseeded from ``seed`` and the row's position before every batch; so the same input gives the
same graph, the same bytes and the same results on every run, whatever the OpenMP settings,
also after a save and load. No process-wide state (e.g. ``faiss.omp_set_num_threads``) is
changed: a search of one query runs on the calling thread; a batch of queries uses faiss's
OpenMP threads as the process has them. ``build(..., deterministic=False)`` adds all rows in
one call per graph (parallel, faster, not reproducible).

Shards: one graph holds at most ``HnswSettings.shard_rows`` rows (262,144 by default), in
insertion order; a larger index is several graphs. Each graph is built exactly as it would be
alone, so ``build(..., workers=N)`` builds N graphs at once on N threads (faiss releases the
GIL) and gives the same bytes as one thread: only the wall time changes. A search asks every
graph (one after another, on the calling thread) and merges their hits by exact score. Only
the last graph ever grows, so :meth:`VectorIndex.copy` shares the full ones and clones that
one alone.

Thread safety: concurrent :meth:`VectorIndex.search` calls are safe; :meth:`VectorIndex.add`
must not run concurrently with anything else on the same index.

Persistence: :meth:`VectorIndex.to_files` gives ``{prefix}vector_index.json`` (a header:
format version, engine, row count, dimension, settings, the length and SHA-256 of the engine
bytes), ``{prefix}vector_index_rows.npy`` (the row id of each engine position) and, with an
engine, ``{prefix}vector_index.faiss`` (``faiss.serialize_index``). :meth:`VectorIndex.from_files`
checks the header, the digest, and walks the faiss bytes itself (every size against the bytes
left, the graph's levels, offsets and neighbour ids, the stored vectors against the matrix)
before faiss reads them, so damaged or forged bytes raise ``ValueError`` rather than crash.
No pickle anywhere.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import faiss as _faiss
import numpy as np
import numpy.typing as npt

from core.native.scoring import top_k_products
from core.persist import (
    FileData,
    IndexFiles,
    array_from_bytes,
    array_to_bytes,
    json_from_bytes,
    json_to_bytes,
)

faiss: Any = _faiss  # its bundled stubs lack SearchParametersHNSW, IDSelectorBitmap, RandomGenerator

__all__ = [
    "DEFAULT_EXACT_BELOW",
    "DEFAULT_FILTER_EXACT_BELOW",
    "DEFAULT_SHARD_ROWS",
    "ENGINE_FILE",
    "FORMAT_VERSION",
    "HEADER_FILE",
    "ROWS_FILE",
    "HnswSettings",
    "VectorIndex",
    "shard_file",
]

FloatMatrix = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

DEFAULT_EXACT_BELOW = 4096
DEFAULT_FILTER_EXACT_BELOW = 8192
FILTER_EXACT_FRACTION = 0.05
DENSE_MASK_FRACTION = 0.9
DEFAULT_SHARD_ROWS = 262_144
FORMAT_VERSION = 2  # 1: one graph, its bytes in the header's engine_bytes / engine_sha256
ENGINE = "faiss.IndexHNSWFlat"
FORMAT = "bridge-rag.vector_index"
HEADER_FILE = "vector_index.json"
ROWS_FILE = "vector_index_rows.npy"
ENGINE_FILE = "vector_index.faiss"
_ADD_BATCH = 100  # faiss inserts up to 100 points per level on the calling thread
_MAX_EF = 4096
_MAX_SHARD_ROWS = 2**31 - 1  # faiss numbers a graph's nodes with int32


@dataclass(frozen=True)
class HnswSettings:
    """Settings of the faiss HNSW graph.

    Attributes:
        m: Neighbours per node on the upper levels (``2 * m`` on level 0).
        ef_construction: Candidate list size while inserting.
        ef_search: Candidate list size while searching (at least ``k`` is used).
        filtered_ef_search: Candidate list size of a filtered search (at least ``k``) that
            allows under 90 % of the indexed rows; a mask allowing more (deleted chunks, dead
            edges) searches with ``ef_search``.
        shard_rows: Rows per graph: a larger index is split, in insertion order, into graphs
            of this many rows, built in parallel (``workers``) and searched one after another.
    """

    m: int = 32
    ef_construction: int = 200
    ef_search: int = 96
    filtered_ef_search: int = 256
    shard_rows: int = DEFAULT_SHARD_ROWS

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            high = _MAX_SHARD_ROWS if name == "shard_rows" else _MAX_EF
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"HnswSettings.{name} must be an int in 1..{high}, got {value!r}")
        if self.m < 2 or self.m > 256:
            raise ValueError(f"HnswSettings.m must lie in 2..256, got {self.m}")


class VectorIndex:
    """Rows of a unit-vector matrix, searchable by cosine (see the module docstring).

    Use :meth:`build` or :meth:`from_files`; the vectors of the exact mode stay in the caller's
    matrix, the HNSW engine holds a copy of the indexed rows.
    """

    def __init__(
        self,
        rows: IntArray,
        dim: int,
        *,
        exact_below: int,
        seed: int,
        settings: HnswSettings,
        engines: Sequence[Any] = (),
        mapped: Sequence[bool] | None = None,
    ) -> None:
        """Wraps validated parts (use :meth:`build` or :meth:`from_files`)."""
        self._rows = np.ascontiguousarray(rows, dtype=np.int64)
        self._dim = int(dim)
        self._exact_below = int(exact_below)
        self._seed = int(seed)
        self._settings = settings
        self._engines: list[Any] = list(engines)  # the graphs, in position order; none: exact mode
        # per graph: its vectors are a read-only map of its file (from_files)
        self._mapped: list[bool] = list(mapped) if mapped is not None else [False] * len(self._engines)
        self._exact: tuple[FloatMatrix, FloatMatrix] | None = None  # (matrix, its indexed rows)
        self._params: dict[int, Any] = {}  # unfiltered search parameters by efSearch (read-only)
        self._refresh()

    def _refresh(self) -> None:
        n = self._rows.size
        self._prefix = bool(
            n == 0 or (self._rows[0] == 0 and self._rows[-1] == n - 1 and _sorted(self._rows))
        )
        self._max_row = int(self._rows.max()) if n else -1
        self._exact = None
        self._starts = np.cumsum([0] + [int(e.ntotal) for e in self._engines])  # each graph's first position

    # ---------------------------------------------------------------- properties

    def __len__(self) -> int:
        return int(self._rows.size)

    def __repr__(self) -> str:
        mode = f"hnsw x{len(self._engines)}" if self._engines else "exact"
        return f"VectorIndex(rows={len(self)}, dim={self._dim}, mode={mode!r})"

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return self._dim

    @property
    def rows(self) -> IntArray:
        """The indexed row ids (a copy; engine order in HNSW mode, ascending in exact mode)."""
        return self._rows.copy()

    @property
    def uses_engine(self) -> bool:
        """True when searches go through the HNSW graphs (False: exact numpy scan)."""
        return bool(self._engines)

    @property
    def mapped(self) -> bool:
        """True when some graph reads its vectors from a read-only map of its file (from_files)."""
        return any(self._mapped)

    @property
    def shards(self) -> int:
        """How many HNSW graphs the index holds (0 in exact mode)."""
        return len(self._engines)

    @property
    def settings(self) -> HnswSettings:
        """The HNSW settings (used once the index grows past ``exact_below``)."""
        return self._settings

    @property
    def exact_below(self) -> int:
        """Below this many indexed rows the search is exact."""
        return self._exact_below

    def memory_bytes(self) -> int:
        """Bytes held: the row ids, the graphs' vectors and links, and any cached exact copy."""
        total = self._rows.nbytes + (self._exact[1].nbytes if self._exact is not None else 0)
        for engine in self._engines:
            hnsw = engine.hnsw
            total += engine.ntotal * self._dim * 4
            total += hnsw.neighbors.size() * 4 + hnsw.offsets.size() * 8 + hnsw.levels.size() * 4
        return int(total)

    # ---------------------------------------------------------------- build / add

    @classmethod
    def build(
        cls,
        matrix: FloatMatrix,
        rows: IntArray | None = None,
        *,
        exact_below: int = DEFAULT_EXACT_BELOW,
        seed: int = 0,
        settings: HnswSettings | None = None,
        deterministic: bool = True,
        workers: int = 1,
    ) -> VectorIndex:
        """Indexes ``matrix[rows]`` (all rows when ``rows`` is None; duplicates are ignored).

        Args:
            matrix: Unit row vectors, float32, two-dimensional, finite.
            rows: Row ids to index (in range).
            exact_below: With fewer indexed rows than this, no engine: exact search.
            seed: Seed of the HNSW level generator.
            settings: HNSW settings (default :class:`HnswSettings`).
            deterministic: Add in batches on the calling thread (reproducible graph); False adds
                all rows in one call per graph on faiss's OpenMP threads.
            workers: Threads that build graphs at once (one graph each; see ``shard_rows``).
                The index is the same for any count.

        Returns:
            The index.

        Raises:
            ValueError: Bad matrix, rows out of range, or bad arguments.
        """
        m = _check_matrix(matrix)
        if isinstance(exact_below, bool) or not isinstance(exact_below, int) or exact_below < 0:
            raise ValueError(f"exact_below must be an int >= 0, got {exact_below!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        _check_workers(workers)
        ids = np.unique(_check_rows(rows, m.shape[0]))
        index = cls(
            np.zeros(0, np.int64),
            m.shape[1],
            exact_below=exact_below,
            seed=seed,
            settings=settings or HnswSettings(),
        )
        index._grow(m, ids, deterministic, workers)
        return index

    def add(
        self, matrix: FloatMatrix, rows: IntArray, *, deterministic: bool = True, workers: int = 1
    ) -> None:
        """Indexes more rows of the (grown) matrix; the rows already indexed must be unchanged.

        Cheap in both modes: exact mode only records the rows, HNSW mode inserts them into the
        last graph (and new ones once it is full). Crossing ``exact_below`` builds the graphs
        over every indexed row once.

        Args:
            matrix: The matrix, with the new rows (and the old ones unchanged).
            rows: New row ids (unique, in range, not yet indexed).
            deterministic: See :meth:`build`.
            workers: See :meth:`build`.

        Raises:
            ValueError: Bad matrix, rows out of range, repeated or already indexed.
        """
        m = _check_matrix(matrix, self._dim)
        _check_workers(workers)
        ids = _check_rows(rows, m.shape[0])
        if np.unique(ids).size != ids.size:
            raise ValueError("rows to add must be unique")
        if ids.size and np.isin(ids, self._rows).any():
            raise ValueError("some rows to add are already indexed")
        self._grow(m, ids, deterministic, workers)

    def _grow(self, matrix: FloatMatrix, ids: IntArray, deterministic: bool, workers: int) -> None:
        if ids.size == 0:
            return
        if not self._engines:
            merged = np.sort(np.concatenate([self._rows, ids]))
            if merged.size < max(self._exact_below, 1):
                self._rows = merged
                self._refresh()
                return
            self._rows, ids = np.zeros(0, np.int64), merged
        self._append(matrix, ids, deterministic, workers)
        self._rows = np.concatenate([self._rows, ids])
        self._refresh()

    def _append(self, matrix: FloatMatrix, ids: IntArray, deterministic: bool, workers: int) -> None:
        """Inserts ``ids`` after the indexed rows: into the last graph until it is full, then new ones."""
        cap = self._settings.shard_rows
        engines, mapped = list(self._engines), list(self._mapped)
        jobs: list[tuple[Any, IntArray, int]] = []  # (graph, its new rows, the first one's position)
        done = 0
        if engines and engines[-1].ntotal < cap:
            if mapped[-1]:  # faiss cannot grow a mapped file: take an owned copy first
                engines[-1], mapped[-1] = _owned_copy(engines[-1]), False
            done = min(cap - int(engines[-1].ntotal), ids.size)
            jobs.append((engines[-1], ids[:done], self._rows.size))
        while done < ids.size:
            engines.append(self._new_engine())
            mapped.append(False)
            jobs.append((engines[-1], ids[done : done + cap], self._rows.size + done))
            done += cap

        def insert(job: tuple[Any, IntArray, int]) -> None:
            self._insert(job[0], matrix, job[1], deterministic, job[2])

        threads = min(workers, len(jobs)) if deterministic else 1
        if threads > 1:
            with ThreadPoolExecutor(threads, thread_name_prefix="bridge-hnsw") as pool:
                list(pool.map(insert, jobs))
        else:
            for job in jobs:
                insert(job)
        self._engines, self._mapped = engines, mapped

    def _new_engine(self) -> Any:
        s = self._settings
        engine = faiss.IndexHNSWFlat(self._dim, s.m, faiss.METRIC_INNER_PRODUCT)
        engine.hnsw.efConstruction = s.ef_construction
        engine.hnsw.efSearch = s.ef_search
        return engine

    def _insert(
        self, engine: Any, matrix: FloatMatrix, ids: IntArray, deterministic: bool, first: int
    ) -> None:
        """Adds ``matrix[ids]`` to one graph; ``first`` is the index position of ``ids[0]``."""
        step = _ADD_BATCH if deterministic else max(1, ids.size)
        for start in range(0, ids.size, step):
            block = np.ascontiguousarray(matrix[ids[start : start + step]], dtype=np.float32)
            engine.hnsw.rng = faiss.RandomGenerator(_level_seed(self._seed, first + start))
            engine.add(block)

    def copy(self) -> VectorIndex:
        """An independent copy: grow the copy while the original serves.

        The last graph, the only one an add can change, is cloned; full graphs are shared.
        """
        cap = self._settings.shard_rows
        engines, mapped = [], []
        for engine, is_mapped in zip(self._engines, self._mapped, strict=True):
            if engine.ntotal >= cap:  # full: never grown again, safe to share
                engines.append(engine)
                mapped.append(is_mapped)
            else:
                engines.append(_owned_copy(engine) if is_mapped else faiss.clone_index(engine))
                mapped.append(False)
        return VectorIndex(
            self._rows.copy(),
            self._dim,
            exact_below=self._exact_below,
            seed=self._seed,
            settings=self._settings,
            engines=engines,
            mapped=mapped,
        )

    def with_rows(self, matrix: FloatMatrix, rows: IntArray, *, workers: int = 1) -> VectorIndex:
        """This index with ``rows`` added, as a new index (itself when there are none).

        The copy-on-write form of :meth:`add` for an index that serves searches: the
        original is never changed, so a search in flight keeps the graphs it started on.

        Raises:
            ValueError: As :meth:`add`.
        """
        if len(rows) == 0:
            return self
        grown = self.copy()
        grown.add(matrix, rows, workers=workers)
        return grown

    # ---------------------------------------------------------------- search

    def search(
        self,
        queries: FloatMatrix,
        matrix: FloatMatrix,
        k: int,
        *,
        allowed: BoolArray | None = None,
        ef_search: int | None = None,
        filter_exact_below: int = DEFAULT_FILTER_EXACT_BELOW,
    ) -> tuple[IntArray, FloatMatrix]:
        """Top ``k`` indexed rows per query by cosine, best first; id -1 and score -inf pad.

        A ``k`` above the matrix's row count is clamped to it before anything is allocated
        (no query can have more results), so a huge ``k`` costs nothing.

        Args:
            queries: Query vectors ``(q, dim)`` (normalised here; a zero query scores 0).
            matrix: The matrix the rows index (at least every indexed row, same width).
            k: Results per query (>= 0).
            allowed: Boolean mask over the matrix rows: only allowed rows are returned.
            ef_search: Overrides the settings' candidate list size (HNSW mode).
            filter_exact_below: With fewer allowed indexed rows than this (or under 5 % of
                the indexed rows), the filtered search is an exact scan of those rows.

        Returns:
            ``(ids, scores)``: int64 and float32 arrays of shape ``(q, min(k, matrix rows))``.

        Raises:
            ValueError: Wrong shapes, dtypes or values of the arguments.
        """
        q = _check_queries(queries, self._dim)
        m = _check_matrix(matrix, self._dim, check_finite=False)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"k must be an int >= 0, got {k!r}")
        k = min(int(k), int(m.shape[0]))
        if m.shape[0] <= self._max_row:
            raise ValueError(
                f"the matrix has {m.shape[0]} rows but the index holds row {self._max_row}; "
                "pass the matrix the index was built on"
            )
        if ef_search is not None and (
            isinstance(ef_search, bool) or not isinstance(ef_search, int) or not 1 <= ef_search <= _MAX_EF
        ):
            raise ValueError(f"ef_search must be an int in 1..{_MAX_EF}, got {ef_search!r}")
        if isinstance(filter_exact_below, bool) or not isinstance(filter_exact_below, int):
            raise ValueError(f"filter_exact_below must be an int, got {filter_exact_below!r}")
        mask = None if allowed is None else _check_mask(allowed, m.shape[0])
        ids = np.full((q.shape[0], k), -1, dtype=np.int64)
        scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
        if k == 0 or q.shape[0] == 0 or self._rows.size == 0:
            return ids, scores
        pos_mask: BoolArray | None = None  # the allowed mask over the engine's positions
        if mask is None:
            n_allowed = self._rows.size
        else:
            pos_mask = mask[: self._rows.size] if self._prefix else mask[self._rows]
            n_allowed = int(np.count_nonzero(pos_mask))
            if n_allowed == 0:
                return ids, scores
            if n_allowed == self._rows.size:  # every indexed row passes: no filter to apply
                pos_mask = None
        use_exact = not self._engines or k * 4 >= n_allowed
        if pos_mask is not None and not use_exact:
            use_exact = n_allowed < max(filter_exact_below, FILTER_EXACT_FRACTION * self._rows.size)
        if use_exact:
            if pos_mask is None:
                cand, sub = self._rows, self._exact_rows(m)
            else:
                cand = self._rows[pos_mask]
                sub = np.ascontiguousarray(m[cand])
            _exact_into(q, sub, cand, k, ids, scores)
            return ids, scores
        self._engine_search(q, m, k, pos_mask, n_allowed, ef_search, ids, scores)
        return ids, scores

    def _engine_search(
        self,
        q: FloatMatrix,
        m: FloatMatrix,
        k: int,
        pos_mask: BoolArray | None,
        n_allowed: int,
        ef_search: int | None,
        ids: IntArray,
        scores: FloatMatrix,
    ) -> None:
        s = self._settings
        # a mask that drops few rows (deleted chunks, dead edges) needs no larger candidate list
        dense_mask = pos_mask is None or n_allowed >= DENSE_MASK_FRACTION * self._rows.size
        ef = max(ef_search or (s.ef_search if dense_mask else s.filtered_ef_search), k)
        found = self._graph_hits(q, k, ef, pos_mask)
        zero = ~np.any(q != 0, axis=1)
        want = min(k, n_allowed)
        short: list[int] = []
        for i in range(q.shape[0]):
            pos = found[i][found[i] >= 0]
            if pos_mask is not None:
                pos = pos[pos_mask[pos]]  # faiss honours the selector; this keeps it a guarantee
            if zero[i] or pos.size < want:
                short.append(i)
                continue
            rows = self._rows[pos]
            sims = m[rows] @ q[i]
            order = np.lexsort((rows, -sims))[:k]
            ids[i, : order.size] = rows[order]
            scores[i, : order.size] = sims[order]
        if short:
            cand = self._rows if pos_mask is None else self._rows[pos_mask]
            sub = self._exact_rows(m) if pos_mask is None else np.ascontiguousarray(m[cand])
            sel = np.asarray(short, dtype=np.int64)
            sub_ids = np.full((sel.size, k), -1, dtype=np.int64)
            sub_scores = np.full((sel.size, k), -np.inf, dtype=np.float32)
            _exact_into(q[sel], sub, cand, k, sub_ids, sub_scores)
            ids[sel], scores[sel] = sub_ids, sub_scores

    def _graph_hits(self, q: FloatMatrix, k: int, ef: int, pos_mask: BoolArray | None) -> IntArray:
        """Every graph's top ``k`` positions per query, side by side (-1 pads).

        A graph with no allowed row is not searched.
        """
        parts: list[IntArray] = []
        for engine, lo, hi in zip(self._engines, self._starts[:-1], self._starts[1:], strict=True):
            bits = sel = None  # both must outlive the search: faiss reads them through pointers
            if pos_mask is not None:
                part_mask = pos_mask[lo:hi]
                if not part_mask.any():
                    continue
                bits = np.packbits(part_mask, bitorder="little")
                sel = faiss.IDSelectorBitmap(part_mask.size, faiss.swig_ptr(bits))
                params = faiss.SearchParametersHNSW(efSearch=ef, sel=sel)
            else:
                params = self._params.get(ef)
                if params is None:
                    params = self._params[ef] = faiss.SearchParametersHNSW(efSearch=ef)
            _, found = engine.search(q, k, params=params)
            del bits, sel
            parts.append(np.where(found >= 0, found + lo, -1))
        if len(parts) == 1:
            return parts[0]
        return np.hstack(parts) if parts else np.full((q.shape[0], 0), -1, dtype=np.int64)

    def _exact_rows(self, matrix: FloatMatrix) -> FloatMatrix:
        """The indexed rows of ``matrix`` in ``self._rows`` order: a view or a cached copy."""
        if self._prefix:
            return matrix[: self._rows.size]
        cached = self._exact
        if cached is None or cached[0] is not matrix:
            cached = (matrix, np.ascontiguousarray(matrix[self._rows]))
            self._exact = cached
        return cached[1]

    # ---------------------------------------------------------------- persistence

    def to_files(self, prefix: str = "") -> dict[str, bytes]:
        """The index as named byte blobs: a JSON header, the row ids and each graph's faiss bytes.

        No pickle. The header lists the graphs (``shards``: rows, byte length and SHA-256 of
        each); graph 0 is ``{prefix}vector_index.faiss``, graph ``s`` ``{prefix}vector_index.{s}.faiss``.

        Args:
            prefix: Prepended to every file name (several indexes in one directory).
        """
        header: dict[str, Any] = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "engine": ENGINE if self._engines else "exact",
            "rows": int(self._rows.size),
            "dim": self._dim,
            "metric": "inner_product",
            "exact_below": self._exact_below,
            "seed": self._seed,
            "settings": asdict(self._settings),
            "faiss_version": str(faiss.__version__),
        }
        files = {f"{prefix}{ROWS_FILE}": array_to_bytes(self._rows)}
        shards = []
        for number, engine in enumerate(self._engines):
            blob = faiss.serialize_index(engine).tobytes()
            files[shard_file(number, prefix)] = blob
            shards.append(
                {"rows": int(engine.ntotal), "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
            )
        header["shards"] = shards
        files[f"{prefix}{HEADER_FILE}"] = json_to_bytes(header)
        return files

    @classmethod
    def from_files(cls, files: Mapping[str, FileData], matrix: FloatMatrix, prefix: str = "") -> VectorIndex:
        """Reads :meth:`to_files` output for ``matrix`` (the matrix it was built on).

        From a loaded generation (:class:`core.persist.IndexFiles`) whose engine file is
        memory-mapped, faiss maps the file too (``IO_FLAG_MMAP_IFC``: the stored vectors stay
        in the page cache, shared by every worker process that loads the same generation),
        after the bytes were walked and checked here; the manifest has already verified their
        SHA-256, over the very file faiss opens.

        Args:
            files: File name -> bytes (or an :class:`core.persist.IndexFiles`).
            matrix: The vectors; the engine's stored vectors must equal its rows.
            prefix: As given to :meth:`to_files`.

        Returns:
            The index.

        Raises:
            ValueError: Anything missing, malformed or not matching ``matrix`` (rebuild the index).
        """
        try:
            return cls._from_files(files, matrix, prefix)
        except ValueError as err:
            raise ValueError(f"the vector index files are unusable ({err}); rebuild the index") from err

    @classmethod
    def _from_files(cls, files: Mapping[str, FileData], matrix: FloatMatrix, prefix: str) -> VectorIndex:
        m = _check_matrix(matrix, check_finite=False)
        head_name = f"{prefix}{HEADER_FILE}"
        if head_name not in files or f"{prefix}{ROWS_FILE}" not in files:
            raise ValueError(f"missing {head_name} or {prefix}{ROWS_FILE}")
        header = json_from_bytes(files[head_name])
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        version = header.get("version")
        if header.get("format") != FORMAT or version not in (1, FORMAT_VERSION) or isinstance(version, bool):
            raise ValueError(f"unknown format {header.get('format')!r} version {version!r}")
        n = _int_field(header, "rows", 0, 2**40)
        dim = _int_field(header, "dim", 1, 2**20)
        exact_below = _int_field(header, "exact_below", 0, 2**62)
        seed = _int_field(header, "seed", -(2**62), 2**62)
        raw_settings = header.get("settings")
        names = set(asdict(HnswSettings())) - ({"shard_rows"} if version == 1 else set())
        if not isinstance(raw_settings, dict) or set(raw_settings) != names:
            raise ValueError("bad settings in the header")
        try:
            settings = HnswSettings(**raw_settings)
        except (TypeError, ValueError) as err:
            raise ValueError(f"bad settings in the header: {err}") from err
        if header.get("metric") != "inner_product":
            raise ValueError(f"unknown metric {header.get('metric')!r}")
        if dim != m.shape[1]:
            raise ValueError(f"the index has dimension {dim}, the matrix {m.shape[1]}")
        rows = array_from_bytes(files[f"{prefix}{ROWS_FILE}"], dtype=np.int64, ndim=1)
        if rows.size != n:
            raise ValueError(f"the header announces {n} rows, the rows file holds {rows.size}")
        if n and (int(rows.min()) < 0 or int(rows.max()) >= m.shape[0]):
            raise ValueError(f"the index holds rows outside the matrix's 0..{m.shape[0] - 1}")
        if np.unique(rows).size != n:
            raise ValueError("the index holds repeated rows")
        engine_name = header.get("engine")
        if engine_name == "exact":
            if shard_file(0, prefix) in files or header.get("shards", []) != [] or n >= max(exact_below, 1):
                raise ValueError("an exact index with engine bytes or too many rows")
            if not _sorted(rows):
                raise ValueError("the rows of an exact index must be ascending")
            return cls(rows, dim, exact_below=exact_below, seed=seed, settings=settings)
        if engine_name != ENGINE:
            raise ValueError(f"unknown engine {engine_name!r}")
        if version == 1:  # one graph, described by the header itself
            shards: Any = [
                {"rows": n, "bytes": header.get("engine_bytes"), "sha256": header.get("engine_sha256")}
            ]
        else:
            shards = header.get("shards")
        if not isinstance(shards, list) or not shards or not all(isinstance(d, dict) for d in shards):
            raise ValueError("bad shards in the header")
        sizes = [_int_field(d, "rows", 1, _MAX_SHARD_ROWS) for d in shards]
        if sum(sizes) != n:
            raise ValueError(f"the graphs hold {sum(sizes)} rows, the header announces {n}")
        in_order = bool(n == m.shape[0] and _sorted(rows))  # rows 0..n-1: no copy to compare
        engines, mapped, start = [], [], 0
        for number, (described, size) in enumerate(zip(shards, sizes, strict=True)):
            part = rows[start : start + size]
            vectors = m[start : start + size] if in_order else np.ascontiguousarray(m[part])
            engine, is_mapped = _read_graph(
                files, shard_file(number, prefix), described, size, settings, vectors
            )
            engines.append(engine)
            mapped.append(is_mapped)
            start += size
        return cls(
            rows, dim, exact_below=exact_below, seed=seed, settings=settings, engines=engines, mapped=mapped
        )


# ------------------------------------------------------------------------------ helpers


def shard_file(number: int, prefix: str = "") -> str:
    """The file name of graph ``number`` (graph 0 keeps the name a one-graph index had)."""
    return f"{prefix}{ENGINE_FILE}" if number == 0 else f"{prefix}vector_index.{number}.faiss"


def _read_graph(
    files: Mapping[str, FileData],
    name: str,
    described: Mapping[str, Any],
    n: int,
    settings: HnswSettings,
    vectors: FloatMatrix,
) -> tuple[Any, bool]:
    """One graph's file, checked against its header entry and walked, then read by faiss.

    Returns:
        ``(engine, mapped)``: mapped when faiss maps the verified file itself.
    """
    blob = files.get(name)
    if blob is None:
        raise ValueError(f"missing {name}")
    data = memoryview(blob)
    mapped = isinstance(files, IndexFiles) and files.is_mapped(name)
    if len(data) != described.get("bytes") or (
        not mapped  # a mapped file's SHA-256 was checked by the manifest, over the same bytes
        and hashlib.sha256(data).hexdigest() != described.get("sha256")
    ):
        raise ValueError(f"the engine bytes of {name} are truncated or damaged (length or SHA-256 differ)")
    _validate_hnsw_bytes(data, n, vectors.shape[1], settings, vectors)
    try:
        if mapped:
            assert isinstance(files, IndexFiles)
            engine = _read_mapped(files, name)
        else:
            engine = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    except RuntimeError as err:  # pragma: no cover - the walk above accepts only what faiss reads
        raise ValueError(f"faiss cannot read the engine bytes: {err}") from err
    if not isinstance(engine, faiss.IndexHNSWFlat) or engine.ntotal != n or engine.d != vectors.shape[1]:
        raise ValueError("the engine bytes hold a different index")  # pragma: no cover
    engine.hnsw.efSearch = settings.ef_search
    return engine, mapped


def _check_workers(workers: Any) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")


def _owned_copy(engine: Any) -> Any:
    """A copy of a faiss index in memory of its own (``clone_index`` would keep a mapped view)."""
    return faiss.deserialize_index(faiss.serialize_index(engine))


def _read_mapped(files: IndexFiles, name: str) -> Any:
    """The engine, read by faiss from the verified file itself, its stored vectors mapped read-only."""
    fd = files.open_verified(name)
    try:
        path = f"/proc/self/fd/{fd}"
        if not os.path.exists(path):  # pragma: no cover - systems without /proc
            path = str(files.directory / name)
        return faiss.read_index(path, faiss.IO_FLAG_MMAP_IFC)
    finally:
        os.close(fd)


def _sorted(a: IntArray) -> bool:
    return bool(a.size < 2 or np.all(a[1:] > a[:-1]))


def _level_seed(seed: int, ntotal: int) -> int:
    """The HNSW level generator's seed before inserting at ``ntotal`` (fits an int64)."""
    return int((seed * 1_000_003 + ntotal * 7_919 + 12_345) % (2**62))


def _check_matrix(matrix: Any, dim: int | None = None, *, check_finite: bool = True) -> FloatMatrix:
    if not isinstance(matrix, np.ndarray) or matrix.ndim != 2:
        raise ValueError(
            f"matrix must be a two-dimensional numpy array, got {getattr(matrix, 'shape', matrix)!r}"
        )
    if matrix.dtype != np.float32:
        raise ValueError(f"matrix must be float32, got {matrix.dtype}")
    if dim is not None and matrix.shape[1] != dim:
        raise ValueError(f"matrix must have {dim} columns (the index's dimension), got {matrix.shape[1]}")
    if matrix.shape[1] == 0:
        raise ValueError("matrix must have at least one column")
    if check_finite and not np.isfinite(matrix).all():
        raise ValueError("matrix holds NaN or infinite values")
    return matrix if matrix.flags.c_contiguous else np.ascontiguousarray(matrix)


def _check_rows(rows: Any, n: int) -> IntArray:
    if rows is None:
        return np.arange(n, dtype=np.int64)
    ids = np.asarray(rows)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(f"rows must be a one-dimensional integer array, got {ids.dtype} {ids.shape}")
    ids = ids.astype(np.int64)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        raise ValueError(f"rows must lie within 0..{n - 1}")
    return ids


def _check_queries(queries: Any, dim: int) -> FloatMatrix:
    """The queries as C-contiguous float32 unit rows (zero rows stay zero)."""
    q = np.asarray(queries)
    if q.ndim != 2 or q.shape[1] != dim:
        raise ValueError(f"queries must be a two-dimensional array with {dim} columns, got shape {q.shape}")
    if not np.issubdtype(q.dtype, np.floating):
        raise ValueError(f"queries must be floating point, got {q.dtype}")
    q = q.astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", q, q, dtype=np.float64))
    if not np.isfinite(norms).all():  # NaN or infinity anywhere in a row reaches its norm
        raise ValueError("queries hold NaN or infinite values")
    q /= np.where(norms > 0, norms, 1.0).astype(np.float32)[:, None]
    return q


def _check_mask(allowed: Any, n: int) -> BoolArray:
    mask = np.asarray(allowed)
    if mask.dtype != np.bool_ or mask.shape != (n,):
        raise ValueError(f"allowed must be a boolean array of shape ({n},), got {mask.dtype} {mask.shape}")
    return mask


def _exact_into(
    q: FloatMatrix, sub: FloatMatrix, cand: IntArray, k: int, ids: IntArray, scores: FloatMatrix
) -> None:
    """Exact top ``k`` of ``sub`` (rows ``cand``) per query into ``ids`` / ``scores``; ties by lower id."""
    found, sims = top_k_products(q, sub, cand, k)
    ids[:, :k], scores[:, :k] = found, sims


def _int_field(header: Mapping[str, Any], name: str, low: int, high: int) -> int:
    value = header.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"bad {name!r} in the header: {value!r}")
    return value


class _Reader:
    """Walks bytes, checking every read against what is left."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError(
                f"the engine bytes end early (need {size} bytes at {self.pos} of {len(self.data)})"
            )
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def scalar(self, fmt: str) -> Any:
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def vector(self, dtype: str, expected: int | None = None) -> npt.NDArray[Any]:
        size = int(self.scalar("Q"))
        item = np.dtype(dtype).itemsize
        if size > (len(self.data) - self.pos) // item:
            raise ValueError(f"the engine bytes announce a vector of {size} items past their end")
        if expected is not None and size != expected:
            raise ValueError(f"the engine bytes hold a vector of {size} items, expected {expected}")
        return np.frombuffer(self.take(size * item), dtype=dtype)


def _index_header(r: _Reader, fourcc: bytes, n: int, dim: int) -> None:
    if r.take(4) != fourcc:
        raise ValueError(f"the engine bytes are not a faiss {fourcc.decode()} index")
    d, ntotal = r.scalar("i"), r.scalar("q")
    r.take(16)  # two unused int64 fields
    trained, metric = r.scalar("B"), r.scalar("i")
    if d != dim or ntotal != n or trained != 1 or metric != faiss.METRIC_INNER_PRODUCT:
        raise ValueError(f"the engine holds {ntotal} x {d} vectors (metric {metric}), expected {n} x {dim}")


def _validate_hnsw_bytes(
    data: bytes | memoryview, n: int, dim: int, settings: HnswSettings, vectors: FloatMatrix
) -> None:
    """Checks faiss ``IndexHNSWFlat`` bytes completely before faiss reads them.

    The layout is faiss's ``write_index``: fourcc ``IHNf``, the index header, the HNSW graph
    (level probabilities, neighbours per level, levels, offsets, neighbour ids, entry point,
    maximum level, efConstruction, efSearch, a deprecated int) and the ``IxFI`` flat storage.
    Every neighbour id must name a node present on that level, so a search can never read
    outside the graph.
    """
    r = _Reader(data)
    _index_header(r, b"IHNf", n, dim)
    probas = r.vector("<f8")
    if not 1 <= probas.size <= 64 or not np.all((probas >= 0) & (probas <= 1)):
        raise ValueError("bad HNSW level probabilities")
    cum = r.vector("<i4", probas.size + 1).astype(np.int64)
    per_level = np.diff(cum)
    if cum[0] != 0 or per_level[0] != 2 * settings.m or np.any(per_level[1:] != settings.m):
        raise ValueError("the HNSW neighbour counts do not match the settings")
    levels = r.vector("<i4", n).astype(np.int64)
    if n and (levels.min() < 1 or levels.max() > probas.size):
        raise ValueError("bad HNSW node levels")
    offsets = r.vector("<u8", n + 1)
    if offsets[0] != 0 or not np.array_equal(np.diff(offsets.astype(np.int64)), cum[levels]):
        raise ValueError("bad HNSW offsets")
    neighbors = r.vector("<i4", int(offsets[-1])).astype(np.int64)
    if neighbors.size and (neighbors.min() < -1 or neighbors.max() >= n):
        raise ValueError("HNSW neighbour ids out of range")
    if neighbors.size:
        owner = np.repeat(np.arange(n), cum[levels])
        slot = np.arange(neighbors.size) - offsets[owner].astype(np.int64)
        slot_level = np.searchsorted(cum, slot, side="right") - 1
        linked = neighbors >= 0
        if np.any(levels[neighbors[linked]] <= slot_level[linked]):
            raise ValueError("an HNSW link names a node absent from that level")
    entry, max_level = r.scalar("i"), r.scalar("i")
    ef_construction, ef_search, _ = r.scalar("i"), r.scalar("i"), r.scalar("i")
    if n == 0:
        if entry != -1 or max_level != -1:
            raise ValueError("bad HNSW entry point")
    elif not 0 <= entry < n or max_level != levels.max() - 1 or levels[entry] - 1 != max_level:
        raise ValueError("bad HNSW entry point")
    if ef_construction != settings.ef_construction or not 1 <= ef_search <= _MAX_EF:
        raise ValueError("the HNSW search settings do not match the header")
    _index_header(r, b"IxFI", n, dim)
    codes = r.vector("<f4", n * dim)
    if not np.array_equal(codes.view(np.uint32), vectors.reshape(-1).view(np.uint32)):
        raise ValueError("the engine's vectors differ from the matrix's rows")
    if r.pos != len(data):
        raise ValueError(f"{len(data) - r.pos} trailing bytes after the engine")
