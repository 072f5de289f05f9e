"""Worker-memory benchmark: N query workers on one machine loading one Bridge-RAG index.

Run with ``bridge-rag bench-workers [--chunks N] [--workers W] [--index DIR]``. The index is
built over the scale benchmark's synthetic corpus (:mod:`core.evaluation.scale`, real
embedder and spaCy, embedded Chroma), or reused from ``--index DIR`` when it already holds
one of that size. Then, for each way of loading it (``copy``: every array read into the
worker's own memory, as before; ``mmap``: large arrays memory-mapped read-only, the default),
one worker is started alone, then ``W`` workers side by side. Each worker is a fresh
``python -m core.evaluation.workers --worker`` process that loads the index without a model
(it queries by vector, with the questions embedded once by this process), times its load,
answers every question, reports, and waits; while all of them are alive their unique (USS),
proportional (PSS) and resident (RSS) memory are read from ``/proc``. Workers start one
after another, so each load and each query runs alone on the machine; they wait side by
side only for the memory reading.

USS counts the pages only that process maps: a memory-mapped array mapped by one worker
alone is its unique memory, and becomes shared when a second worker maps it. So the
headline figure, the USS of W workers together against the USS of one worker, is below
``W`` exactly by what the workers share. The page cache is warmed (every index file read
once) before the first worker starts, for both ways of loading.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["WorkerRow", "format_workers", "run_workers_benchmark", "workers_json"]

_MODES = ("copy", "mmap")


@dataclass
class WorkerRow:
    """One measurement: ``workers`` processes that loaded the index one way.

    Attributes:
        mode: ``"copy"`` (arrays read into memory) or ``"mmap"`` (mapped read-only).
        workers: Worker processes alive together.
        uss_mib: Unique memory of each worker (MiB).
        pss_mib: Proportional memory of each worker (MiB).
        rss_mib: Resident memory of each worker (MiB).
        load_s: Each worker's load time (``BridgeRAG.load``, no model), seconds.
        import_s: Each worker's time to import bridge-rag before the load, seconds.
        p50_ms: Each worker's median query latency (by vector), ms.
        p95_ms: Each worker's 95th percentile query latency, ms.
        top_ids: The first worker's best result for every question.
    """

    mode: str
    workers: int
    uss_mib: list[float]
    pss_mib: list[float]
    rss_mib: list[float]
    load_s: list[float]
    import_s: list[float]
    p50_ms: list[float]
    p95_ms: list[float]
    top_ids: list[str]


# ---------------------------------------------------------------------------- the worker


def _worker(directory: str, vectors_path: str, mode: str) -> None:
    """One worker: load, answer every question, print the figures, wait for stdin to close."""
    t0 = time.perf_counter()
    from core.embed import CallableEmbedder
    from core.persist import json_from_bytes
    from core.strategies.bridge import BridgeRAG

    import_s = time.perf_counter() - t0
    vectors = np.load(vectors_path, allow_pickle=False)
    questions = Path(vectors_path + ".txt").read_text(encoding="utf-8").split("\n")
    current = (Path(directory) / "bridge" / "CURRENT").read_text().strip()
    manifest = json_from_bytes((Path(directory) / "bridge" / current / "manifest.json").read_bytes())

    def no_model(texts: Sequence[str]) -> Any:
        raise RuntimeError("this worker answers queries by vector only")

    embedder = CallableEmbedder(
        no_model, name=manifest["meta"]["embedder"]["name"], dimension=int(vectors.shape[1])
    )
    t0 = time.perf_counter()
    rag = BridgeRAG.load(directory, embedder=embedder, refresh_interval=None, memory_map=mode == "mmap")
    load_s = time.perf_counter() - t0
    for q, v in zip(questions[:10], vectors[:10], strict=True):  # warm-up
        rag.retrieve_by_vector(q, v, 5)
    times, top = [], []
    for q, v in zip(questions, vectors, strict=True):
        t = time.perf_counter()
        results = rag.retrieve_by_vector(q, v, 5)
        times.append(time.perf_counter() - t)
        top.append(results[0].id if results else "")
    report = {
        "load_s": load_s,
        "import_s": import_s,
        "p50_ms": float(np.percentile(times, 50) * 1e3),
        "p95_ms": float(np.percentile(times, 95) * 1e3),
        "top_ids": top,
    }
    print(json.dumps(report), flush=True)
    sys.stdin.read()  # stay alive (and mapped) until the parent has measured everyone


# ---------------------------------------------------------------------------- the parent


def _memory(pid: int) -> tuple[float, float, float]:
    import psutil  # type: ignore[import-untyped]

    info = psutil.Process(pid).memory_full_info()
    mib = float(2**20)
    return info.uss / mib, info.pss / mib, info.rss / mib


def _measure(directory: Path, vectors_path: Path, mode: str, workers: int) -> WorkerRow:
    procs: list[subprocess.Popen[str]] = []
    reports: list[dict[str, Any]] = []
    try:
        for _ in range(workers):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "core.evaluation.workers",
                    "--worker",
                    str(directory),
                    str(vectors_path),
                    mode,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"a {mode} worker exited before reporting (exit code {proc.wait()})")
            reports.append(json.loads(line))
        memory = [_memory(p.pid) for p in procs]
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
        for p in procs:
            p.wait(timeout=60)
    return WorkerRow(
        mode=mode,
        workers=workers,
        uss_mib=[m[0] for m in memory],
        pss_mib=[m[1] for m in memory],
        rss_mib=[m[2] for m in memory],
        load_s=[r["load_s"] for r in reports],
        import_s=[r["import_s"] for r in reports],
        p50_ms=[r["p50_ms"] for r in reports],
        p95_ms=[r["p95_ms"] for r in reports],
        top_ids=reports[0]["top_ids"],
    )


def _warm(directory: Path) -> int:
    """Reads every file of the index's current generation once; returns their total size."""
    index_dir = directory / "bridge"
    generation = index_dir / (index_dir / "CURRENT").read_text().strip()
    total = 0
    for f in generation.iterdir():
        total += len(f.read_bytes())
    return total


def _ensure_index(directory: Path, chunks: int, seed: int, embedder: Any) -> dict[str, Any]:
    """Builds the synthetic index into ``directory`` unless it already holds one of ``chunks`` chunks."""
    from core.evaluation.scale import CHUNK_SIZE, synthetic_corpus
    from core.persist import json_from_bytes
    from core.strategies.bridge import BridgeRAG

    index_dir = directory / "bridge"
    if (index_dir / "CURRENT").is_file():
        generation = index_dir / (index_dir / "CURRENT").read_text().strip()
        counts = json_from_bytes((generation / "manifest.json").read_bytes())["meta"].get("counts", {})
        if counts.get("chunks") != chunks:
            raise ValueError(
                f"{str(directory)!r} holds an index of {counts.get('chunks')} chunks, not {chunks}; "
                "pass another --index or the matching --chunks"
            )
        return {"built": False, "build_s": None}
    docs = list(synthetic_corpus(chunks, seed=seed))
    t0 = time.perf_counter()
    rag = BridgeRAG.from_documents(
        docs, embedder=embedder, persist_directory=directory, chunk_size=CHUNK_SIZE, chunk_overlap=0
    )
    build_s = time.perf_counter() - t0
    rag.close()
    return {"built": True, "build_s": build_s}


def run_workers_benchmark(
    chunks: int = 100_000,
    *,
    workers: int = 4,
    queries: int = 200,
    index: str | os.PathLike[str] | None = None,
    seed: int = 0,
    embedder: Any = None,
) -> dict[str, Any]:
    """Measures the memory, load time and query latency of 1 and ``workers`` workers, both ways.

    Args:
        chunks: Size of the synthetic corpus.
        workers: Worker processes side by side (at least 2).
        queries: Questions each worker answers.
        index: Keep (or reuse) the index in this directory; default a temporary one.
        seed: Seed of the corpus and the questions.
        embedder: The embedder of the build and the questions; None = all-MiniLM-L6-v2.

    Returns:
        ``{"rows": [...], "summary": {...}, "report": markdown, ...}``.

    Raises:
        ValueError: ``workers`` below 2, ``queries`` below 1, or ``index`` holds another size.
    """
    from core.embed import as_embedder
    from core.evaluation.scale import CHUNKS_PER_DOCUMENT, synthetic_queries

    if workers < 2:
        raise ValueError(f"workers must be >= 2 (one worker is always measured too), got {workers}")
    if queries < 1:
        raise ValueError(f"queries must be >= 1, got {queries}")
    emb = as_embedder(embedder)
    with tempfile.TemporaryDirectory(prefix="bridge-workers-") as tmp:
        directory = Path(index) if index is not None else Path(tmp) / "index"
        built = _ensure_index(directory, chunks, seed, emb)
        questions = synthetic_queries(chunks // CHUNKS_PER_DOCUMENT, queries, seed=seed)
        vectors_path = Path(tmp) / "questions.npy"
        np.save(vectors_path, np.stack([emb.embed_query(q) for q in questions]).astype(np.float32))
        Path(str(vectors_path) + ".txt").write_text("\n".join(questions), encoding="utf-8")
        rows = []
        for mode in _MODES:
            for count in (1, workers):
                index_bytes = _warm(directory)
                rows.append(_measure(directory, vectors_path, mode, count))
    out: dict[str, Any] = {
        "chunks": chunks,
        "workers": workers,
        "queries": queries,
        "seed": seed,
        "embedder": emb.name,
        "index_mib": index_bytes / 2**20,
        **built,
        "rows": [asdict(r) for r in rows],
    }
    out["summary"] = _summary(rows, workers)
    out["report"] = format_workers(out)
    return out


def _summary(rows: Sequence[WorkerRow], workers: int) -> dict[str, Any]:
    by = {(r.mode, r.workers): r for r in rows}
    summary: dict[str, Any] = {}
    for mode in _MODES:
        one, many = by[(mode, 1)], by[(mode, workers)]
        summary[mode] = {
            "uss_one_mib": one.uss_mib[0],
            "uss_many_sum_mib": sum(many.uss_mib),
            "uss_ratio": sum(many.uss_mib) / one.uss_mib[0],
            "pss_many_sum_mib": sum(many.pss_mib),
            "pss_ratio": sum(many.pss_mib) / one.pss_mib[0],
            "load_s_one": one.load_s[0],
            "load_s_max": max(one.load_s + many.load_s),
            "p50_ms_one": one.p50_ms[0],
        }
    summary["p50_mmap_over_copy"] = summary["mmap"]["p50_ms_one"] / summary["copy"]["p50_ms_one"]
    summary["same_results"] = by[("mmap", 1)].top_ids == by[("copy", 1)].top_ids
    return summary


def format_workers(out: dict[str, Any]) -> str:
    """The figures as markdown."""
    lines = [
        "| load | workers | USS MiB each | USS MiB sum | PSS MiB sum | RSS MiB each | load s "
        "| p50 ms | p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in out["rows"]:
        lines.append(
            f"| {r['mode']} | {r['workers']} | {_span(r['uss_mib'], '.0f')} | {sum(r['uss_mib']):,.0f} | "
            f"{sum(r['pss_mib']):,.0f} | {_span(r['rss_mib'], '.0f')} | {_span(r['load_s'], '.2f')} | "
            f"{_span(r['p50_ms'], '.2f')} | {_span(r['p95_ms'], '.2f')} |"
        )
    s = out["summary"]
    w = out["workers"]
    lines += [
        "",
        f"{out['chunks']:,} chunks, index files {out['index_mib']:,.0f} MiB; "
        f"{out['queries']} questions per worker.",
        f"USS of {w} workers / 1 worker: mmap **{s['mmap']['uss_ratio']:.2f}x** "
        f"(copy {s['copy']['uss_ratio']:.2f}x); PSS: mmap {s['mmap']['pss_ratio']:.2f}x "
        f"(copy {s['copy']['pss_ratio']:.2f}x).",
        f"Load without the model: mmap {s['mmap']['load_s_one']:.2f} s (slowest of all mmap workers "
        f"{s['mmap']['load_s_max']:.2f} s); copy {s['copy']['load_s_one']:.2f} s.",
        f"Query p50, one worker: mmap {s['mmap']['p50_ms_one']:.2f} ms, "
        f"copy {s['copy']['p50_ms_one']:.2f} ms "
        f"({s['p50_mmap_over_copy']:.2f}x); same best result for every question: {s['same_results']}.",
    ]
    return "\n".join(lines)


def _span(values: Sequence[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{lo:{fmt}}-{hi:{fmt}}"


def workers_json(out: dict[str, Any]) -> str:
    """The figures as JSON (without the markdown)."""
    return json.dumps({k: v for k, v in out.items() if k != "report"}, indent=2)


if __name__ == "__main__":  # pragma: no cover - the worker entry point
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: python -m core.evaluation.workers --worker DIR QUESTIONS.npy copy|mmap")
