"""Filtered retrieval benchmark: latency and recall of tenant-filtered queries, in one run.

Run with ``bridge-rag bench-filtered DATASET_DIR...``. Every document gets two tenant fields
(``tenant10``: one of 10 tenants, ``tenant100``: one of 100), drawn from a hash of its id;
then the gold passages of question *i* move to tenant ``i mod 10`` and ``i mod 100``, so
each question is asked inside a tenant that holds its evidence (an app's user asks about
their own documents). A question runs three times per strategy: unfiltered, with
``{"tenant10": t}`` (about 10 % of the corpus) and with ``{"tenant100": t}`` (about 1 %).

Reported per strategy: p50 and p95 latency of ``retrieve_by_vector`` (the query embedding is
computed once, outside the timing, so the ratio shows the filter's own cost), the ratio of
each filtered p50 to the unfiltered p50, recall@k of the gold passages (all of them
unfiltered; within the filter, those the tenant holds), and the same figures for dense
retrieval through Chroma's own filtered search (``collection.query(where=...)``) beside them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from core.embed import as_embedder
from core.evaluation.corpus import BenchContext
from core.evaluation.embedding_cache import EmbeddingCache
from core.evaluation.metrics import Question, load_dataset
from core.evaluation.registry import resolve_strategies
from core.types import Document

__all__ = ["FilteredRow", "format_filtered", "run_filtered_benchmark", "tag_tenants"]

#: The strategies measured by default (dense is Chroma's own filtered search, the reference).
DEFAULT_FILTERED = ("dense", "bridge", "umgp", "bubble")
#: Tenant fields and their tenant counts: about 10 % and 1 % of the corpus each.
TENANT_FIELDS = {"tenant10": 10, "tenant100": 100}


@dataclass
class FilteredRow:
    """One strategy's figures on one dataset (latencies in milliseconds)."""

    dataset: str
    strategy: str
    k: int
    questions: int
    p50_ms: dict[str, float] = field(default_factory=dict)
    p95_ms: dict[str, float] = field(default_factory=dict)
    ratio: dict[str, float] = field(default_factory=dict)
    recall: dict[str, float] = field(default_factory=dict)
    selectivity: dict[str, float] = field(default_factory=dict)
    outside: int = 0


def _bucket(doc_id: str, n: int) -> int:
    return zlib.crc32(doc_id.encode("utf-8")) % n


def tag_tenants(docs: Sequence[Document], questions: Sequence[Question]) -> list[Document]:
    """Copies of ``docs`` with ``tenant10`` / ``tenant100`` metadata (see the module docstring)."""
    override: dict[str, dict[str, int]] = {}
    for i, q in enumerate(questions):
        for gold in q.supporting_ids:
            override[gold] = {name: i % n for name, n in TENANT_FIELDS.items()}
    out = []
    for d in docs:
        assert d.id is not None
        tenants = override.get(d.id) or {name: _bucket(d.id, n) for name, n in TENANT_FIELDS.items()}
        out.append(Document(text=d.text, id=d.id, metadata={**d.metadata, **tenants}))
    return out


def _p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_filtered_benchmark(
    dataset_dirs: Sequence[str | os.PathLike[str]],
    *,
    strategies: Sequence[str] = DEFAULT_FILTERED,
    k: int = 5,
    seed: int = 0,
    show_progress: bool = True,
) -> list[FilteredRow]:
    """Measures filtered and unfiltered queries of each strategy on each dataset.

    Args:
        dataset_dirs: Dataset directories (``corpus.jsonl`` + ``questions.jsonl``).
        strategies: Registry names (``dense`` is Chroma's own filtered search).
        k: Results per query.
        seed: Corpus shuffle seed.
        show_progress: Show progress bars.

    Returns:
        One row per dataset and strategy.

    Raises:
        ValueError: An unknown strategy, or one that cannot run here.
    """
    specs, skipped = resolve_strategies(list(strategies))
    if skipped:
        name, reason = next(iter(skipped.items()))
        raise ValueError(f"{name} cannot run here: {reason}")
    emb = EmbeddingCache(as_embedder(None))
    emb.embed_query("warm-up")
    rows: list[FilteredRow] = []
    for directory in dataset_dirs:
        data = load_dataset(Path(directory))
        questions = data.sample_questions(None, seed)
        docs = tag_tenants(data.documents(seed), questions)
        tenant_of = {d.id: d.metadata for d in docs}
        selectivity = {
            name: statistics.fmean(sum(1 for m in tenant_of.values() if m[name] == t) for t in range(n))
            / len(tenant_of)
            for name, n in TENANT_FIELDS.items()
        }
        with tempfile.TemporaryDirectory(prefix="bridge-filtered-") as tmp:
            chroma = Path(tmp) / "chroma"
            ctx = BenchContext.create(docs, emb, chroma, k=k, show_progress=show_progress)
            vectors = {q.id: emb.embed_query(q.question) for q in questions}
            built: dict[str, Any] = {}
            for spec in specs:
                key = spec.build_key or spec.name
                if key not in built:
                    built[key] = spec.build(ctx)
                index = built[key]
                by_vector = spec.query.by_vector
                assert by_vector is not None
                row = FilteredRow(dataset=data.name, strategy=spec.name, k=k, questions=len(questions))
                times: dict[str, list[float]] = {"none": [], **{f: [] for f in TENANT_FIELDS}}
                recalls: dict[str, list[float]] = {key: [] for key in times}
                by_vector(
                    index, questions[0].question, vectors[questions[0].id], k, **spec.options
                )  # warm-up
                for i, q in enumerate(
                    tqdm(questions, desc=f"{data.name} {spec.name}", disable=not show_progress)
                ):
                    for name in times:
                        tenant = None if name == "none" else i % TENANT_FIELDS[name]
                        options = dict(spec.options)
                        if tenant is not None:
                            options["filter"] = {name: tenant}
                        t0 = time.perf_counter()
                        got = by_vector(index, q.question, vectors[q.id], k, **options)
                        times[name].append((time.perf_counter() - t0) * 1000.0)
                        got_docs = {str(r.metadata.get("doc_id")) for r in got}
                        if tenant is not None:
                            row.outside += sum(
                                1 for d in got_docs if tenant_of.get(d, {}).get(name) != tenant
                            )
                        gold = [
                            g for g in q.supporting_ids if tenant is None or tenant_of[g].get(name) == tenant
                        ]
                        if gold:
                            recalls[name].append(len(set(gold) & got_docs) / len(gold))
                row.selectivity = selectivity
                for name, ts in times.items():
                    row.p50_ms[name] = statistics.median(ts)
                    row.p95_ms[name] = _p(ts, 0.95)
                    row.ratio[name] = row.p50_ms[name] / row.p50_ms["none"]
                    row.recall[name] = statistics.fmean(recalls[name]) if recalls[name] else float("nan")
                rows.append(row)
            ctx.corpus.store.close()
    return rows


def format_filtered(rows: Sequence[FilteredRow]) -> str:
    """The rows as a plain-text table (with ratios to the unfiltered p50 and to dense)."""
    head = (
        f"{'dataset':<10} {'strategy':<8} {'p50 none':>9} {'p50 10%':>9} {'x':>5} {'p50 1%':>9} {'x':>5} "
        f"{'R@k none':>9} {'R@k 10%':>8} {'R@k 1%':>7} {'vs dense 10%':>12} {'vs dense 1%':>11} {'leaks':>5}"
    )
    lines = [head, "-" * len(head)]
    dense = {(r.dataset): r for r in rows if r.strategy == "dense"}
    for r in rows:
        d = dense.get(r.dataset)
        vs10 = r.recall["tenant10"] - d.recall["tenant10"] if d else float("nan")
        vs1 = r.recall["tenant100"] - d.recall["tenant100"] if d else float("nan")
        lines.append(
            f"{r.dataset:<10} {r.strategy:<8} {r.p50_ms['none']:>9.2f} {r.p50_ms['tenant10']:>9.2f} "
            f"{r.ratio['tenant10']:>5.2f} {r.p50_ms['tenant100']:>9.2f} {r.ratio['tenant100']:>5.2f} "
            f"{r.recall['none']:>9.3f} {r.recall['tenant10']:>8.3f} {r.recall['tenant100']:>7.3f} "
            f"{vs10:>+12.3f} {vs1:>+11.3f} {r.outside:>5}"
        )
    sel = rows[0].selectivity if rows else {}
    ten, hundred = 100 * sel.get("tenant10", 0.0), 100 * sel.get("tenant100", 0.0)
    lines.append(
        "latency: retrieve_by_vector, milliseconds, p50 over every question; x = filtered p50 / "
        f"unfiltered p50. Selectivity: tenant10 {ten:.1f} %, tenant100 {hundred:.2f} % of the documents. "
        "R@k within a filter counts the gold passages the tenant holds; leaks = results outside the "
        "filter (must be 0)."
    )
    return "\n".join(lines)


def filtered_json(rows: Sequence[FilteredRow]) -> str:
    """The rows as JSON, with the run's machine and date."""
    return json.dumps(
        {
            "date": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
            "rows": [asdict(r) for r in rows],
        },
        indent=2,
    )
