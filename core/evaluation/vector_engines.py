"""Benchmark of vector search engines on real sentence vectors: exact scan, usearch, faiss, VectorIndex.

Run with ``python -m core.evaluation.vector_engines [--out PATH]``. The corpus is every
passage of the three datasets under ``shared/data`` (read by path), split into sentences with
:func:`core.text.split_sentences`, deduplicated, shuffled with a fixed seed and capped; the
queries are every question of the three datasets. Both are embedded with the default model
(all-MiniLM-L6-v2); the corpus matrix is cached in ``/tmp/vector_engines_cache.npy`` (with a
``.json`` sidecar naming the model and a digest of the texts), so reruns skip the embedding.

Every engine searches the same unit vectors (cosine = inner product) and is compared with the
exact scan (a numpy product, the ground truth): recall@10 against the exact top 10, p50 / p95
latency of one query per call (as a retriever calls it), with the default threads and with one
thread, build time, serialised size, and filtered search at 10 % and 1 % selectivity (a random
allowed subset of rows; the ground truth is an exact scan over the allowed rows only).

The home-made k-means inverted file this benchmark chose :class:`core.vector_index.VectorIndex`
over (``ClusterIndex``) was removed once the strategies moved to it; its row in the README was
measured by this module at commit bd21e03.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["EngineResult", "format_table", "load_corpus", "load_questions", "main", "run_benchmark"]

FloatMatrix = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
Searcher = Callable[[FloatMatrix], IntArray]
FilteredSearcher = Callable[[FloatMatrix, npt.NDArray[np.bool_]], IntArray]

DATASETS = ("2wiki", "hotpotqa", "musique")
K = 10
SEED = 0
SELECTIVITIES = (0.10, 0.01)
_DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@dataclass
class EngineResult:
    """Figures of one engine configuration (latencies in milliseconds, sizes in bytes)."""

    engine: str
    settings: str
    build_s: float
    index_bytes: int
    recall_at_10: float
    p50_ms: float
    p95_ms: float
    p50_ms_1thread: float
    p95_ms_1thread: float
    filtered: dict[str, dict[str, float]] = field(default_factory=dict)
    note: str = ""


# --------------------------------------------------------------------------------------- data


def load_corpus(data_dir: Path, cap: int, seed: int = SEED) -> list[str]:
    """The deduplicated sentences of every passage, shuffled with ``seed`` and capped at ``cap``."""
    from core.text import split_sentences

    seen: dict[str, None] = {}
    for name in DATASETS:
        with open(data_dir / name / "corpus.jsonl", encoding="utf-8") as fh:
            for line in fh:
                text = json.loads(line)["text"]
                for start, end in split_sentences(text):
                    seen.setdefault(text[start:end], None)
    sentences = list(seen)
    order = np.random.default_rng(seed).permutation(len(sentences))
    return [sentences[i] for i in order[:cap]]


def load_questions(data_dir: Path) -> list[str]:
    """Every question of the three datasets, in file order."""
    out: list[str] = []
    for name in DATASETS:
        with open(data_dir / name / "questions.jsonl", encoding="utf-8") as fh:
            out.extend(json.loads(line)["question"] for line in fh)
    return out


def _unit(matrix: npt.NDArray[Any]) -> FloatMatrix:
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.ascontiguousarray(m / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def embed_corpus(texts: Sequence[str], cache: Path, embedder: Any) -> FloatMatrix:
    """Embeds ``texts`` (with progress), or reads the cached matrix when it was made from them."""

    def embed() -> FloatMatrix:
        from tqdm import tqdm

        parts: list[FloatMatrix] = []
        step = 1024
        with tqdm(total=len(texts), desc="embedding sentences", unit="sent", file=sys.stdout) as bar:
            for start in range(0, len(texts), step):
                chunk = list(texts[start : start + step])
                parts.append(np.asarray(embedder.embed_documents(chunk), dtype=np.float32))
                bar.update(len(chunk))
        return np.vstack(parts)

    return _cached_vectors(texts, cache, embedder.name, "corpus", embed)


def embed_queries(questions: Sequence[str], cache: Path, embedder: Any) -> FloatMatrix:
    """Embeds the questions with ``embed_query``, or reads the cached matrix made from them."""

    def embed() -> FloatMatrix:
        t0 = time.perf_counter()
        queries = np.vstack([embedder.embed_query(q) for q in questions])
        print(f"queries: {queries.shape} embedded in {time.perf_counter() - t0:.1f} s", flush=True)
        return queries

    return _cached_vectors(questions, cache, embedder.name, "query", embed)


def _cached_vectors(
    texts: Sequence[str], cache: Path, model: str, what: str, embed: Callable[[], FloatMatrix]
) -> FloatMatrix:
    """Unit rows of ``embed()``, read from ``cache`` instead when its sidecar names these texts."""
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
    meta = {"model": model, "texts_sha256": digest, "count": len(texts)}
    sidecar = cache.with_suffix(".json")
    try:
        if json.loads(sidecar.read_text()) == meta:
            cached = np.load(cache, allow_pickle=False)
            if cached.shape[0] == len(texts):
                print(f"{what} vectors: cached {cache} {cached.shape}", flush=True)
                return _unit(cached)
    except (OSError, ValueError):
        pass
    matrix = _unit(embed())
    np.save(cache, matrix, allow_pickle=False)
    sidecar.write_text(json.dumps(meta))
    return matrix


# ------------------------------------------------------------------------------------ helpers


def _faiss() -> Any:
    """The faiss module, typed loosely (its bundled stubs lack the search parameter classes)."""
    return importlib.import_module("faiss")


@contextmanager
def _one_thread() -> Iterator[None]:
    """BLAS and OpenMP (faiss) limited to one thread inside the block (benchmark only)."""
    faiss = _faiss()
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        faiss.omp_set_num_threads(before)


def _exact_topk(queries: FloatMatrix, matrix: FloatMatrix, k: int) -> IntArray:
    """Exact top ``k`` row ids per query, best first (ties by lower id)."""
    sims = queries @ matrix.T
    kk = min(k, matrix.shape[0])
    part = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
    out = np.empty((queries.shape[0], kk), dtype=np.int64)
    for i in range(queries.shape[0]):
        cand = part[i]
        out[i] = cand[np.lexsort((cand, -sims[i, cand]))]
    return out


def _recall(found: IntArray, truth: IntArray) -> float:
    hits = [
        len(set(f[f >= 0].tolist()) & set(t[t >= 0].tolist())) / max(1, int((t >= 0).sum()))
        for f, t in zip(found, truth, strict=True)
    ]
    return float(np.mean(hits))


def _timed(search: Searcher, queries: FloatMatrix) -> tuple[IntArray, list[float]]:
    """Runs ``search`` on one query per call; the ids and each call's latency in ms."""
    ids: list[IntArray] = []
    times: list[float] = []
    for i in range(queries.shape[0]):
        q = queries[i : i + 1]
        t0 = time.perf_counter()
        out = search(q)
        times.append((time.perf_counter() - t0) * 1000.0)
        ids.append(np.asarray(out, dtype=np.int64).reshape(1, -1)[:, :K])
    return np.vstack(ids), times


def _pct(times: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(times), p)) if times else float("nan")


@dataclass(frozen=True)
class Workload:
    """What every engine is measured on: the corpus, the queries and the exact answers.

    Attributes:
        x: The corpus matrix (unit rows).
        queries: The query matrix.
        truth: Each query's exact top ``K`` rows.
        masks: Per selectivity, the allowed rows and the exact top ``K`` among them.
    """

    x: FloatMatrix
    queries: FloatMatrix
    truth: IntArray
    masks: dict[float, tuple[npt.NDArray[np.bool_], IntArray]]


def _measure(
    engine: str,
    settings: str,
    build_s: float,
    index_bytes: int,
    search: Searcher,
    filtered: FilteredSearcher | None,
    w: Workload,
    note: str = "",
) -> EngineResult:
    queries = w.queries
    search(queries[:1])  # warm-up
    ids, times = _timed(search, queries)
    with _one_thread():
        _, times1 = _timed(search, queries)
    result = EngineResult(
        engine=engine,
        settings=settings,
        build_s=build_s,
        index_bytes=index_bytes,
        recall_at_10=_recall(ids, w.truth),
        p50_ms=_pct(times, 50),
        p95_ms=_pct(times, 95),
        p50_ms_1thread=_pct(times1, 50),
        p95_ms_1thread=_pct(times1, 95),
        note=note,
    )
    if filtered is not None:
        for sel, (mask, ftruth) in w.masks.items():

            def one(
                q: FloatMatrix, mask: npt.NDArray[np.bool_] = mask, fsearch: FilteredSearcher = filtered
            ) -> IntArray:
                return fsearch(q, mask)

            with _one_thread():
                fids, ftimes = _timed(one, queries)
            bad = int(((fids >= 0) & ~mask[np.maximum(fids, 0)]).sum())
            result.filtered[f"{sel:g}"] = {
                "recall_at_10": _recall(fids, ftruth),
                "p50_ms": _pct(ftimes, 50),
                "p95_ms": _pct(ftimes, 95),
                "disallowed_returned": bad,
            }
    print(
        f"  {engine:<12} {settings:<34} recall@10 {result.recall_at_10:.4f}  p50 {result.p50_ms:.3f} ms"
        f"  p50/1t {result.p50_ms_1thread:.3f} ms  build {build_s:.1f} s",
        flush=True,
    )
    return result


def _post_filter(raw: Callable[[FloatMatrix, int], IntArray], n: int) -> FilteredSearcher:
    """Filtered search by over-fetching ``2 * k / selectivity`` candidates and dropping disallowed ones."""

    def search(q: FloatMatrix, mask: npt.NDArray[np.bool_]) -> IntArray:
        allowed = max(1, int(mask.sum()))
        fetch = min(n, math.ceil(2 * K * n / allowed))
        cand = raw(q, fetch).reshape(-1)
        keep = cand[(cand >= 0) & mask[np.maximum(cand, 0)]][:K]
        return np.pad(keep, (0, K - keep.size), constant_values=-1).reshape(1, K)

    return search


# ------------------------------------------------------------------------------------ engines


def _bench_exact(w: Workload) -> EngineResult:
    x = w.x

    def search(q: FloatMatrix) -> IntArray:
        return _exact_topk(q, x, K)

    def filtered(q: FloatMatrix, mask: npt.NDArray[np.bool_]) -> IntArray:
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return np.full((1, K), -1, dtype=np.int64)
        local = _exact_topk(q, np.ascontiguousarray(x[rows]), K)
        return np.pad(rows[local], ((0, 0), (0, K - local.shape[1])), constant_values=-1)

    return _measure("exact", "numpy q @ X.T", 0.0, x.nbytes, search, filtered, w)


def _bench_usearch(
    w: Workload,
    connectivity: int,
    expansion_add: int,
    expansion_searches: Sequence[int],
) -> list[EngineResult]:
    from usearch.index import Index

    x = w.x
    index: Any = Index(
        ndim=x.shape[1],
        metric="ip",
        dtype="f32",
        connectivity=connectivity,
        expansion_add=expansion_add,
        expansion_search=expansion_searches[0],
    )
    keys = np.arange(x.shape[0], dtype=np.uint64)
    t0 = time.perf_counter()
    index.add(keys, x, threads=1)  # one thread: a deterministic graph
    build_s = time.perf_counter() - t0
    saved = index.save()
    size = len(saved) if saved is not None else 0
    out = []
    for es in expansion_searches:
        index.expansion_search = es

        def search(q: FloatMatrix) -> IntArray:
            return np.asarray(index.search(q, K, threads=1).keys, dtype=np.int64).reshape(1, -1)

        def raw(q: FloatMatrix, count: int) -> IntArray:
            return np.asarray(index.search(q, count, threads=1).keys, dtype=np.int64).reshape(1, -1)

        out.append(
            _measure(
                "usearch",
                f"M={connectivity} ef_add={expansion_add} ef_search={es}",
                build_s,
                size,
                search,
                _post_filter(raw, w.x.shape[0]),
                w,
                note="filtered: post-filter of an over-fetch (2.26.6 Python API has no filter/predicate)",
            )
        )
    return out


def _bitmap_selector(mask: npt.NDArray[np.bool_]) -> tuple[Any, npt.NDArray[np.uint8]]:
    faiss = _faiss()

    bits = np.packbits(mask, bitorder="little")
    return faiss.IDSelectorBitmap(mask.size, faiss.swig_ptr(bits)), bits


def _bitmap_selectors(masks: dict[float, tuple[Any, IntArray]]) -> tuple[dict[int, Any], list[Any]]:
    """One ``IDSelectorBitmap`` per mask, by ``id(mask)``; keep the list: it holds their bitmaps."""
    made = [_bitmap_selector(mask) for mask, _ in masks.values()]
    return {id(mask): sel for (mask, _), (sel, _) in zip(masks.values(), made, strict=True)}, made


def _search_params(kind: Any, **settings: int) -> Callable[[Any], Any]:
    """``selector -> kind(**settings, sel=selector)`` (no ``sel`` for None): faiss search parameters."""

    def make(selector: Any) -> Any:
        return kind(**settings) if selector is None else kind(**settings, sel=selector)

    return make


def _measure_faiss(
    index: Any,
    params: Callable[[Any], Any],
    selectors: dict[int, Any],
    engine: str,
    settings: str,
    build_s: float,
    size: int,
    w: Workload,
    note: str,
) -> EngineResult:
    """:func:`_measure` of a faiss index; ``params(selector or None)`` gives its search parameters."""
    plain = params(None)

    def search(q: FloatMatrix) -> IntArray:
        return np.asarray(index.search(q, K, params=plain)[1], dtype=np.int64)

    def filtered(q: FloatMatrix, mask: npt.NDArray[np.bool_]) -> IntArray:
        return np.asarray(index.search(q, K, params=params(selectors[id(mask)]))[1], dtype=np.int64)

    return _measure(engine, settings, build_s, size, search, filtered, w, note=note)


def _bench_faiss_hnsw(
    w: Workload,
    m: int,
    ef_construction: int,
    ef_searches: Sequence[int],
) -> list[EngineResult]:
    faiss = _faiss()
    index = faiss.IndexHNSWFlat(w.x.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    settings = {f"M={m} efC={ef_construction} efSearch={ef}": {"efSearch": ef} for ef in ef_searches}
    kind = faiss.SearchParametersHNSW
    return _bench_faiss(index, w, "faiss-HNSW", kind, settings, train=False)


def _bench_faiss_ivf(
    w: Workload,
    nprobes: Sequence[int],
) -> list[EngineResult]:
    faiss = _faiss()
    nlist = max(2, math.ceil(4 * math.sqrt(w.x.shape[0])))
    quantizer = faiss.IndexFlatIP(w.x.shape[1])
    index = faiss.IndexIVFFlat(quantizer, w.x.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = SEED
    settings = {f"nlist={nlist} nprobe={nprobe}": {"nprobe": nprobe} for nprobe in nprobes}
    kind = faiss.SearchParametersIVF
    return _bench_faiss(index, w, "faiss-IVF", kind, settings, train=True)


def _bench_faiss(
    index: Any,
    w: Workload,
    engine: str,
    kind: Any,
    settings: Mapping[str, dict[str, int]],
    *,
    train: bool,
) -> list[EngineResult]:
    """Builds a faiss index on one thread (a deterministic graph), then measures each setting.

    ``kind`` is the faiss search-parameters class, ``settings`` maps a label to its fields.
    """
    t0 = time.perf_counter()
    with _one_thread():
        if train:
            index.train(w.x)
        index.add(w.x)
    build_s = time.perf_counter() - t0
    size = int(_faiss().serialize_index(index).nbytes)
    selectors, _keep = _bitmap_selectors(w.masks)
    note = f"filtered: {kind.__name__}(sel=IDSelectorBitmap)"
    return [
        _measure_faiss(
            index,
            _search_params(kind, **fields),
            selectors,
            engine,
            label,
            build_s,
            size,
            w,
            note,
        )
        for label, fields in settings.items()
    ]


def _bench_vector_index(
    w: Workload,
    filter_exact_below: int | None = None,
    graphs: int = 1,
) -> EngineResult:
    """The chosen engine through :class:`core.vector_index.VectorIndex`, with its defaults.

    With ``graphs`` > 1 the rows are split into that many graphs (``shard_rows``), built on
    two threads: what a corpus past ``DEFAULT_SHARD_ROWS`` pays at query time for a build that
    uses two cores.
    """
    from core.vector_index import DEFAULT_FILTER_EXACT_BELOW, HnswSettings, VectorIndex

    t0 = time.perf_counter()
    x = w.x
    settings = HnswSettings(shard_rows=-(-x.shape[0] // graphs)) if graphs > 1 else None
    index = VectorIndex.build(x, seed=SEED, settings=settings, workers=2 if graphs > 1 else 1)
    build_s = time.perf_counter() - t0
    size = sum(len(b) for b in index.to_files().values())
    feb = DEFAULT_FILTER_EXACT_BELOW if filter_exact_below is None else filter_exact_below

    def search(q: FloatMatrix) -> IntArray:
        return index.search(q, x, K)[0]

    def filtered(q: FloatMatrix, mask: npt.NDArray[np.bool_]) -> IntArray:
        return index.search(q, x, K, allowed=mask, filter_exact_below=feb)[0]

    s = index.settings
    split = f" {index.shards} graphs, 2 threads" if graphs > 1 else ""
    return _measure(
        "VectorIndex",
        f"M={s.m} efC={s.ef_construction} ef={s.ef_search}/{s.filtered_ef_search} feb={feb}{split}",
        build_s,
        size,
        search,
        filtered,
        w,
        note="core.vector_index (faiss HNSW; filtered: exact below feb allowed rows or 5 %, "
        "else IDSelectorBitmap with exact fallback)",
    )


# ------------------------------------------------------------------------------------- report


def format_table(results: Sequence[EngineResult]) -> str:
    """One table of every figure, with latency ratios beside the exact scan and the VectorIndex."""
    exact = next(r for r in results if r.engine == "exact")
    ours = next((r for r in results if r.engine == "VectorIndex"), exact)
    head = (
        f"{'engine':<12} {'settings':<34} {'build s':>8} {'MiB':>7} {'rec@10':>7} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'p50 1t':>7} {'p95 1t':>7} {'x exact':>8} {'x ours':>8} "
        f"{'f10 rec':>8} {'f10 p50':>8} {'f1 rec':>7} {'f1 p50':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        f10 = r.filtered.get("0.1", {})
        f1 = r.filtered.get("0.01", {})
        lines.append(
            f"{r.engine:<12} {r.settings:<34} {r.build_s:>8.1f} {r.index_bytes / 2**20:>7.1f} "
            f"{r.recall_at_10:>7.4f} {r.p50_ms:>7.3f} {r.p95_ms:>7.3f} {r.p50_ms_1thread:>7.3f} "
            f"{r.p95_ms_1thread:>7.3f} {r.p50_ms_1thread / exact.p50_ms_1thread:>8.3f} "
            f"{r.p50_ms_1thread / ours.p50_ms_1thread:>8.3f} "
            f"{f10.get('recall_at_10', float('nan')):>8.4f} {f10.get('p50_ms', float('nan')):>8.3f} "
            f"{f1.get('recall_at_10', float('nan')):>7.4f} {f1.get('p50_ms', float('nan')):>7.3f}"
        )
    lines.append("")
    lines.append(
        "x exact / x ours: one-thread p50 latency relative to the exact scan / the VectorIndex. "
        "f10, f1: filtered search with 10 % / 1 % of rows allowed (one thread), recall against an "
        "exact scan of the allowed rows. MiB: serialised index (exact: the matrix itself)."
    )
    notes = sorted({f"{r.engine}: {r.note}" for r in results if r.note})
    lines.extend(notes)
    bad = [r for r in results for f in r.filtered.values() if f.get("disallowed_returned", 0)]
    lines.append(f"configurations that returned a disallowed row: {len(bad)}")
    return "\n".join(lines)


def run_benchmark(
    data_dir: Path, cap: int, cache: Path, quick: bool = False
) -> tuple[list[EngineResult], dict[str, Any]]:
    """Embeds (or reads) the vectors and measures every engine; the results and run facts."""
    from core.embed import as_embedder

    t_start = time.perf_counter()
    texts = load_corpus(data_dir, cap)
    questions = load_questions(data_dir)
    embedder = as_embedder(None)
    x = embed_corpus(texts, cache, embedder)
    queries = embed_queries(questions, cache.with_name(cache.stem + "_queries.npy"), embedder)
    truth = _exact_topk(queries, x, K)
    rng = np.random.default_rng(SEED + 1)
    masks: dict[float, tuple[npt.NDArray[np.bool_], IntArray]] = {}
    for sel in SELECTIVITIES:
        mask = np.zeros(x.shape[0], dtype=bool)
        mask[rng.choice(x.shape[0], size=max(1, round(sel * x.shape[0])), replace=False)] = True
        rows = np.flatnonzero(mask)
        masks[sel] = (mask, rows[_exact_topk(queries, np.ascontiguousarray(x[rows]), K)])
    print(f"corpus: {x.shape[0]} sentences x {x.shape[1]} dims; {queries.shape[0]} queries", flush=True)
    w = Workload(x, queries, truth, masks)
    results = [_bench_exact(w)]
    searches = (64, 128) if quick else (64, 96, 128, 256)
    for conn, ea in ((16, 128),) if quick else ((16, 128), (32, 200)):
        results += _bench_usearch(w, conn, ea, searches)
    for m in (16,) if quick else (16, 32):
        results += _bench_faiss_hnsw(w, m, 200, searches)
    results += _bench_faiss_ivf(w, (16, 32) if quick else (16, 32, 64))
    results.append(_bench_vector_index(w))
    results.append(_bench_vector_index(w, filter_exact_below=0))
    results.append(_bench_vector_index(w, graphs=4))
    faiss = _faiss()
    import usearch

    facts = {
        "sentences": int(x.shape[0]),
        "dimension": int(x.shape[1]),
        "queries": int(queries.shape[0]),
        "k": K,
        "model": embedder.name,
        "shuffle_seed": SEED,
        "cap": cap,
        "cpu_count": os.cpu_count(),
        "faiss": faiss.__version__,
        "usearch": usearch.__version__,
        "numpy": np.__version__,
        "total_s": time.perf_counter() - t_start,
    }
    return results, facts


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: runs the benchmark, prints the table and writes the JSON."""
    parser = argparse.ArgumentParser(prog="python -m core.evaluation.vector_engines", description=__doc__)
    parser.add_argument("--data", type=Path, default=_DEFAULT_DATA, help="the shared/data folder")
    parser.add_argument("--cap", type=int, default=60_000, help="at most this many sentences")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/vector_engines_cache.npy"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/vector_engines.json"))
    parser.add_argument("--quick", action="store_true", help="fewer configurations")
    args = parser.parse_args(argv)
    results, facts = run_benchmark(args.data, args.cap, args.cache, quick=args.quick)
    print()
    print(
        f"{facts['sentences']} sentence vectors ({facts['model']}, {facts['dimension']} dims), "
        f"{facts['queries']} queries, k={K}, {facts['cpu_count']} CPUs; faiss {facts['faiss']}, "
        f"usearch {facts['usearch']}; run {facts['total_s']:.0f} s"
    )
    print(format_table(results))
    args.out.write_text(json.dumps({"facts": facts, "results": [asdict(r) for r in results]}, indent=2))
    print(f"figures written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
