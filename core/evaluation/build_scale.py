"""Build benchmarks at scale: one worker against several, and builds from precomputed rows.

``bridge-rag bench-scale --chunks N --compare-workers 1,2`` builds Bridge-RAG over the synthetic
corpus of :mod:`core.evaluation.scale` (real embedder, real spaCy, embedded Chroma) once per
worker count, and reports each build's seconds per stage, the speed-up of every stage against
the first count, and whether the saved indexes are the same files (their manifests compared
without the build time and the Chroma path).

``bridge-rag bench-scale --chunks N --precomputed`` builds Bridge-RAG with no model in the
loop from synthetic rows that already carry their vectors (seeded stand-ins with topical
structure: a vector per named entity plus noise) and their
entities (:mod:`core.ingest.precomputed`, found by the rule-based extractor when the rows are
made). The rows are written to an embedded Chroma first (timed apart: that is the ingestion a
pipeline does), then ``BridgeRAG.from_store`` builds over N/10 and N of them. It reports the
build seconds per stage, the extractor calls (0 when every row carries its entities), the
peak resident memory, the bytes per row in memory and on disk, and the query p50 at both
sizes (``retrieve_by_vector`` with stored rows' vectors: no embedding).
"""

from __future__ import annotations

import gc
import hashlib
import json
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.evaluation.peak_memory import measure_peak_rss
from core.evaluation.scale import CHUNK_SIZE, synthetic_corpus, synthetic_queries

__all__ = [
    "index_digest",
    "index_file_digests",
    "precomputed_rows",
    "run_precomputed_benchmark",
    "run_workers_comparison",
]

_DIM = 384
#: Chroma's defaults, for the store the precomputed rows are written to.
_INGEST_HNSW = {"ef_construction": 100, "ef_search": 100, "max_neighbors": 16}


def index_file_digests(path: Path) -> dict[str, str]:
    """The SHA-256 of every file of a saved index directory (generations included) but its writer lock.

    Manifests count without what names the build rather than the index: the time written and
    the Chroma directory.
    """
    out = {}
    for f in sorted(path.rglob("*")):
        if not f.is_file() or f.name == "WRITER.lock":
            continue
        data = f.read_bytes()
        if f.name == "manifest.json":
            manifest = json.loads(data)
            manifest.pop("created", None)
            manifest.get("meta", {}).get("store", {}).pop("location", None)
            data = json.dumps(manifest, sort_keys=True).encode()
        out[str(f.relative_to(path))] = hashlib.sha256(data).hexdigest()
    return out


def index_digest(path: Path) -> str:
    """One SHA-256 over :func:`index_file_digests`: equal for two builds of the same index."""
    return hashlib.sha256(json.dumps(index_file_digests(path), sort_keys=True).encode()).hexdigest()


def run_workers_comparison(
    chunks: int, workers: Sequence[int] = (1, 2), *, seed: int = 0, embedder: Any = None
) -> dict[str, Any]:
    """Builds the synthetic corpus once per worker count and compares the builds.

    Args:
        chunks: Corpus size in chunks.
        workers: The worker counts; the first is the baseline.
        seed: Seed of the corpus.
        embedder: Anything :func:`core.embed.as_embedder` accepts; None = all-MiniLM-L6-v2.

    Returns:
        ``{"runs": [{"workers", "build_s", "steps_s", "peak_rss_mib", "digest"}, ...],
        "speedups": {...}, "identical": bool, "report": markdown}``.
    """
    from core.embed import as_embedder
    from core.strategies.bridge import BridgeRAG

    emb = as_embedder(embedder)
    docs = list(synthetic_corpus(chunks, seed=seed))
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bridge-workers-") as tmp:
        for w in workers:
            gc.collect()
            target = Path(tmp) / f"w{w}"
            with measure_peak_rss() as mem:
                t0 = time.perf_counter()
                rag = BridgeRAG.from_documents(
                    docs,
                    embedder=emb,
                    persist_directory=target,
                    chunk_size=CHUNK_SIZE,
                    chunk_overlap=0,
                    workers=w,
                    show_progress=True,
                )
                build_s = time.perf_counter() - t0
            runs.append(
                {
                    "workers": w,
                    "chunks": rag.num_chunks,
                    "build_s": build_s,
                    "steps_s": dict(rag.report.seconds),
                    "peak_rss_mib": mem.peak_mib,
                    "digest": index_digest(target / rag.name),
                }
            )
            rag.close()
            del rag
    base = runs[0]
    speedups = {
        str(r["workers"]): {
            "build": base["build_s"] / r["build_s"],
            **{
                step: base["steps_s"][step] / s
                for step, s in r["steps_s"].items()
                if s > 0 and step in base["steps_s"]
            },
        }
        for r in runs[1:]
    }
    out: dict[str, Any] = {
        "seed": seed,
        "embedder": emb.name,
        "runs": runs,
        "speedups": speedups,
        "identical": len({r["digest"] for r in runs}) == 1,
    }
    out["report"] = _workers_report(out)
    return out


def _workers_report(out: dict[str, Any]) -> str:
    runs = out["runs"]
    steps = [s for s in runs[0]["steps_s"] if runs[0]["steps_s"][s] >= 0.05]
    lines = [
        f"Bridge-RAG build of {runs[0]['chunks']:,} synthetic chunks, by workers "
        f"(embedder {out['embedder']}); the same saved index every time: "
        f"{'yes' if out['identical'] else 'NO'}",
        "",
        "| workers | build s | " + " | ".join(f"{s} s" for s in steps) + " | peak RSS MiB |",
        "|---:|---:|" + "---:|" * len(steps) + "---:|",
    ]
    for r in runs:
        cells = " | ".join(f"{r['steps_s'].get(s, 0.0):.1f}" for s in steps)
        lines.append(f"| {r['workers']} | {r['build_s']:.1f} | {cells} | {r['peak_rss_mib']:.0f} |")
    for w, ratio in out["speedups"].items():
        cells = " | ".join(f"{ratio.get(s, float('nan')):.2f}x" for s in steps)
        lines.append(f"| speed-up {w} vs {runs[0]['workers']} | {ratio['build']:.2f}x | {cells} | |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- precomputed rows


def _unit_vectors(first: int, n: int, seed: int) -> np.ndarray:
    """Rows ``first .. first+n`` of a seeded stream of unit vectors (the same rows at every size)."""
    out = np.empty((n, _DIM), dtype=np.float32)
    block = 4096
    for start in range(first - first % block, first + n, block):
        rows = np.random.default_rng((seed, start // block)).standard_normal((block, _DIM), dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        lo, hi = max(start, first), min(start + block, first + n)
        if lo < hi:
            out[lo - first : hi - first] = rows[lo - start : hi - start]
    return out


def _name_vector(name: str, seed: int) -> np.ndarray:
    digest = hashlib.blake2b(name.encode(), digest_size=8, key=str(seed).encode()).digest()
    vector = np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(_DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _topical_vectors(names: Sequence[Sequence[str]], first: int, seed: int) -> np.ndarray:
    """Stand-ins for embeddings with topical structure: chunks that name the same entities are close.

    Each row is the sum of a seeded unit vector per entity the chunk names, plus as much
    seeded noise, made unit length. Pure noise (:func:`_unit_vectors`) is the worst case for
    HNSW and unlike any text embedding; this keeps the neighbourhoods a corpus has.
    """
    cache: dict[str, np.ndarray] = {}
    noise = _unit_vectors(first, len(names), seed)
    out = noise.copy()
    for i, chunk_names in enumerate(names):
        for name in chunk_names:
            vector = cache.get(name)
            if vector is None:
                vector = cache[name] = _name_vector(name, seed)
            out[i] += vector
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


#: A batch of stored rows: ids, texts, vectors and metadata.
Rows = tuple[list[str], list[str], np.ndarray, list[dict[str, Any]]]


def precomputed_rows(chunks: int, *, seed: int = 0, batch: int = 5_000) -> Iterator[Rows]:
    """The synthetic corpus as stored chunk rows with vectors and entities, in batches.

    Yields:
        ``(ids, texts, vectors, metadatas)`` per batch of about ``batch`` chunks.
    """
    from core.entities import RuleBasedEntityExtractor
    from core.ingest.precomputed import ENTITIES_KEY, entity_metadata
    from core.strategies.table import chunk_new_documents

    extractor = RuleBasedEntityExtractor()
    docs: list[Any] = []
    made = 0

    def flush() -> Rows:
        nonlocal made
        _, rows = chunk_new_documents(docs, set(), chunk_size=CHUNK_SIZE, chunk_overlap=0)
        metas = [dict(m) for m in rows.metadatas]
        values = entity_metadata(extractor, rows.texts)
        for meta, value in zip(metas, values, strict=True):
            meta[ENTITIES_KEY] = value
        vectors = _topical_vectors([json.loads(v)["names"] for v in values], made, seed)
        made += len(rows.ids)
        docs.clear()
        return list(rows.ids), list(rows.texts), vectors, metas

    for doc in synthetic_corpus(chunks, seed=seed):
        docs.append(doc)
        if len(docs) * 5 >= batch:
            yield flush()
    if docs:
        yield flush()


class _NoEmbedding:
    """The embedder of a build that must embed nothing: any call is a failure of the benchmark."""

    name = "none (precomputed vectors)"
    dimension = _DIM

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise AssertionError(f"the precomputed build embedded {len(texts)} texts")

    def embed_query(self, text: str) -> np.ndarray:
        raise AssertionError("the precomputed benchmark queries by vector")


class _CountingExtractor:
    """The rule-based extractor, counting the texts it is asked about."""

    def __init__(self) -> None:
        from core.entities import RuleBasedEntityExtractor

        self.inner = RuleBasedEntityExtractor()
        self.name = self.inner.name
        self.texts = 0

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        if len(texts) > 1:  # a query's NER (one text) is not the build's
            self.texts += len(texts)
        return self.inner.extract(texts)


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _precomputed_build(label: str, n: int, tmp: Path, questions: Sequence[str], seed: int) -> dict[str, Any]:
    """Writes ``n`` precomputed rows to a new embedded Chroma, builds over them, saves and queries."""
    from core.evaluation.metrics import latency_summary, run_strategy
    from core.store import ChunkStore
    from core.strategies.bridge import BridgeRAG

    # Chroma's own HNSW settings: its ANN index is not what the build reads (it reads rows)
    store = ChunkStore.persistent(tmp / f"{label}-chroma", f"pre-{label}", hnsw=_INGEST_HNSW)
    t0 = time.perf_counter()
    with tqdm(total=n, desc=f"{label}: writing rows to Chroma", unit="row") as bar:
        for ids, texts, vectors, metas in precomputed_rows(n, seed=seed):
            store.add(ids, texts, vectors, metas)
            bar.update(len(ids))
    ingest_s = time.perf_counter() - t0
    gc.collect()
    extractor = _CountingExtractor()
    with measure_peak_rss() as mem:
        t0 = time.perf_counter()
        rag = BridgeRAG.from_store(
            store, embedder=_NoEmbedding(), entity_extractor=extractor, show_progress=True
        )
        build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rag.save(tmp / f"{label}-index")
    save_s = time.perf_counter() - t0
    # the questions' vectors are made as the rows' are, from the names they mention
    vectors = _topical_vectors(extractor.inner.extract(list(questions)), 0, seed + 1)
    by_question = {q: vectors[i] for i, q in enumerate(questions)}
    for q in questions[:10]:
        rag.retrieve_by_vector(q, by_question[q], 5)
    run = run_strategy(
        label,
        questions,
        lambda q: rag.retrieve_by_vector(q, by_question[q], 5),
        lambda q, v: rag.retrieve_by_vector(q, v, 5),
        lambda q: by_question[q],
    )
    latency = latency_summary(run)
    chunks = max(1, rag.num_chunks)
    row = {
        "label": label,
        "chunks": rag.num_chunks,
        "entities": rag.num_entities,
        "ingest_s": ingest_s,
        "build_s": build_s,
        "steps_s": dict(rag.report.seconds),
        "save_s": save_s,
        "extractor_texts": extractor.texts,
        "precomputed": int(rag.report.counts.get("entities precomputed", 0)),
        "peak_rss_mib": mem.peak_mib,
        "bytes_per_row_memory": (mem.peak_mib - mem.start_mib) * 2**20 / chunks,
        "bytes_per_row_disk": _dir_bytes(tmp / f"{label}-index") / chunks,
        "p50_ms": latency["p50_no_embed_ms"],
        "p95_ms": latency["p95_no_embed_ms"],
    }
    rag.close()
    store.close()
    return row


def run_precomputed_benchmark(chunks: int, *, queries: int = 200, seed: int = 0) -> dict[str, Any]:
    """Bridge-RAG built from precomputed rows at ``chunks // 10`` and ``chunks``.

    Returns:
        ``{"rows": [small, large], "p50_ratio": ..., "report": markdown}``.

    Raises:
        ValueError: ``chunks`` below 100.
    """
    if chunks < 100:
        raise ValueError(f"chunks must be >= 100 (the small index holds a tenth), got {chunks}")
    questions = synthetic_queries(chunks // 10 // 5, queries, seed=seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bridge-precomputed-") as tmp:
        for label, n in (("small", chunks // 10), ("large", chunks)):
            rows.append(_precomputed_build(label, n, Path(tmp), questions, seed))
            gc.collect()
    out: dict[str, Any] = {"seed": seed, "rows": rows, "p50_ratio": rows[1]["p50_ms"] / rows[0]["p50_ms"]}
    out["report"] = _precomputed_report(out)
    return out


def _precomputed_report(out: dict[str, Any]) -> str:
    rows = out["rows"]
    steps = [s for s in rows[-1]["steps_s"] if rows[-1]["steps_s"][s] >= 0.05]
    lines = [
        "Bridge-RAG from precomputed rows (vectors and entities in Chroma; no model in the build)",
        "",
        "| chunks | ingest s | build s | "
        + " | ".join(f"{s} s" for s in steps)
        + " | save s | NER texts | peak RSS MiB | B/row mem | B/row disk | p50 ms | p95 ms |",
        "|---:|---:|---:|" + "---:|" * len(steps) + "---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r['steps_s'].get(s, 0.0):.1f}" for s in steps)
        lines.append(
            f"| {r['chunks']:,} | {r['ingest_s']:.1f} | {r['build_s']:.1f} | {cells} | {r['save_s']:.1f} | "
            f"{r['extractor_texts']} | {r['peak_rss_mib']:.0f} | {r['bytes_per_row_memory']:.0f} | "
            f"{r['bytes_per_row_disk']:.0f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} |"
        )
    lines.append("")
    lines.append(f"p50 at {rows[1]['chunks']:,} / at {rows[0]['chunks']:,}: {out['p50_ratio']:.2f}x")
    return "\n".join(lines)
