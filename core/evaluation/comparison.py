"""`bridge-rag bench DATASET_DIR`: every strategy and its peers in one run, one table, one plot.

One run loads the dataset, shuffles the corpus (fixed seed), embeds its chunks once into one
Chroma collection (:mod:`core.evaluation.corpus`) and then, for each strategy of
:mod:`core.evaluation.registry` in turn, builds it from that shared data, answers every question
(``k`` results each), and frees it. Measured per strategy:

- passage recall@k, answer recall@k and mean context words@k (:mod:`core.evaluation`);
- p50 / p95 query latency, query embedding included (one untimed warm-up query first);
- build time twice: ``build_s`` is this strategy's build in this run, reusing the shared
  collection and the embedding cache; ``build_alone_s`` adds what it reused (chunking,
  embedding and writing the collection, or the embedding time of its cache hits), i.e. the
  cost of building it on its own;
- peak memory: process RSS sampled every 10 ms (psutil) during the strategy's build and
  queries (strategies sharing one build, UMG and UMGP, share one figure), and how far it
  rose above the RSS at the phase's start;
- RAGAS metrics through ``ragas.evaluate`` (:mod:`core.evaluation.ragas_eval`): the non-LLM ones
  always, the LLM ones when an LLM is passed.
"""

from __future__ import annotations

import datetime as dt
import gc
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from core.evaluation.corpus import SHARED_COLLECTION, BenchContext, SharedCorpus, build_shared_corpus
from core.evaluation.registry import StrategySpec, resolve_strategies
from core.embed import as_embedder
from core.evaluation.embedding_cache import EmbeddingCache
from core.evaluation import (
    Dataset,
    Question,
    RunResult,
    answer_found,
    doc_ids_of,
    load_dataset,
    markdown_table,
    passage_recall,
    run_strategy,
    summarize_runs,
)
from core.evaluation.peak_memory import PeakMemory, measure_peak_rss
from core.store import ChunkStore
from core.types import Retrieved

__all__ = ["ComparisonResult", "run_comparison"]

Notice = Callable[[str], None]


def _stderr_notice(message: str) -> None:
    tqdm.write(message, file=sys.stderr)


@dataclass
class ComparisonResult:
    """Everything one comparison run measured.

    Attributes:
        dataset: Dataset name.
        questions: Questions answered.
        passages: Passages indexed (each its own document).
        chunks: Chunks in the shared collection.
        seed: Corpus shuffle and question sample seed.
        k: Results per question.
        embedder: The embedding model.
        date: When the run finished (UTC, ISO 8601).
        rows: One row of figures per strategy, in run order.
        shared: The shared corpus's build: seconds per step, peak memory.
        skipped: Strategies that could not run here, with the reason.
        failed: Strategies whose build or queries raised, with the error.
        descriptions: One line per strategy (the legend).
        per_question: Per strategy, per question: retrieved document ids, passage recall,
            whether the answer was found, and RAGAS scores.
        machine: CPU count, platform, Python version.
        results: Per strategy, each question's retrieved results (top k), for further
            evaluation (e.g. with ragas); not part of :meth:`to_json`.
    """

    dataset: str
    questions: int
    passages: int
    chunks: int
    seed: int
    k: int
    embedder: str
    date: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    per_question: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    results: dict[str, list[list[Retrieved]]] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ reporting
    def columns(self) -> list[str]:
        """The main table's columns."""
        k = self.k
        return [
            "strategy",
            f"recall@{k}",
            f"answer_recall@{k}",
            f"context_words@{k}",
            "p50_ms",
            "p95_ms",
            "build_s",
            "build_alone_s",
            "peak_rss_mib",
            "rss_added_mib",
        ]

    def headers(self) -> dict[str, str]:
        """Header text of each column of :meth:`table` and :meth:`ragas_table`."""
        from core.evaluation.ragas_eval import METRIC_LABELS

        k = self.k
        return {
            f"recall@{k}": f"R@{k}",
            f"answer_recall@{k}": f"AR@{k}",
            f"context_words@{k}": f"words@{k}",
            "p50_ms": "p50 ms",
            "p95_ms": "p95 ms",
            "build_s": "build s (shared corpus)",
            "build_alone_s": "build s (alone)",
            "peak_rss_mib": "peak RSS MiB",
            "rss_added_mib": "RSS added MiB",
            **METRIC_LABELS,
        }

    def ragas_columns(self) -> list[str]:
        """The RAGAS table's columns (the metrics that were computed)."""
        from core.evaluation.ragas_eval import LLM_METRICS, NON_LLM_METRICS

        present = {c for r in self.rows for c in r}
        return ["strategy", *[m for m in (*NON_LLM_METRICS, *LLM_METRICS) if m in present]]

    def table(self) -> str:
        """The main markdown table."""
        return markdown_table(self.rows, self.columns(), self.headers())

    def ragas_table(self) -> str:
        """The RAGAS markdown table ('' when RAGAS did not run)."""
        cols = self.ragas_columns()
        return markdown_table(self.rows, cols, self.headers()) if len(cols) > 1 else ""

    def legend(self) -> str:
        """One line per strategy: what it is."""
        return "\n".join(f"- {r['strategy']}: {self.descriptions[r['strategy']]}" for r in self.rows)

    def summary(self) -> str:
        """The header line: data, corpus, seed, embedder and the shared corpus's build."""
        s = self.shared
        return (
            f"{self.dataset}: {self.questions} questions, {self.passages:,} passages as {self.chunks:,} "
            f"chunks, each passage its own document, indexed in shuffled order (seed {self.seed}); "
            f"k = {self.k}; embedder {self.embedder}; shared corpus built once in {s['build_s']:.1f} s "
            f"(chunk {s['seconds']['chunk']:.1f} s, embed {s['seconds']['embed']:.1f} s, "
            f"Chroma write {s['seconds']['store']:.1f} s); {self.date}"
        )

    def report(self) -> str:
        """Summary, tables, legend and notices as markdown."""
        parts = [self.summary(), "", self.table()]
        if self.ragas_table():
            parts += ["", self.ragas_table()]
        parts += [
            "",
            self.legend(),
            "",
            "build s (shared corpus): the strategy's build in this run, reusing the shared Chroma collection "
            "and embedding cache; build s (alone): plus the shared work it reused (chunking, embedding, "
            "the Chroma write), i.e. built on its own. Peak RSS: process resident memory sampled every "
            "10 ms during the strategy's build and queries (psutil); RSS added: peak minus the RSS at the "
            "start of that phase. Latency includes embedding the query.",
        ]
        for name, reason in self.skipped.items():
            parts.append(f"\nskipped {name}: {reason}")
        for name, error in self.failed.items():
            parts.append(f"\nFAILED {name}: {error}")
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Every figure as JSON-ready data."""
        return {
            "dataset": self.dataset,
            "questions": self.questions,
            "passages": self.passages,
            "chunks": self.chunks,
            "seed": self.seed,
            "k": self.k,
            "embedder": self.embedder,
            "date": self.date,
            "machine": self.machine,
            "shared_corpus": self.shared,
            "rows": self.rows,
            "descriptions": self.descriptions,
            "skipped": self.skipped,
            "failed": self.failed,
            "per_question": self.per_question,
        }

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """Recall@k against p50 latency, one labelled point per strategy (see :mod:`core.evaluation.plot`)."""
        from core.evaluation.plot import plot_recall_latency

        title = (
            f"{self.dataset}: {self.questions} questions, {self.passages:,} passages, k={self.k} "
            f"({self.date[:10]})"
        )
        return plot_recall_latency(self.rows, path, k=self.k, title=title)


# ---------------------------------------------------------------------- the run


def _groups(specs: Sequence[StrategySpec]) -> list[list[StrategySpec]]:
    """Specs grouped by build, in order of first appearance."""
    groups: dict[str, list[StrategySpec]] = {}
    for spec in specs:
        groups.setdefault(spec.key, []).append(spec)
    return list(groups.values())


def _alone_seconds(spec: StrategySpec, build_s: float, hit_s: float, corpus: SharedCorpus) -> float:
    if spec.reuses == "collection":
        return build_s + corpus.build_seconds
    if spec.reuses == "chunks":
        return build_s + corpus.seconds["chunk"]
    return build_s + hit_s


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return k


def run_comparison(
    dataset: str | os.PathLike[str] | Dataset,
    *,
    strategies: Sequence[str] | None = None,
    k: int = 5,
    sample: int | None = None,
    seed: int = 0,
    embedder: Any = None,
    ragas: bool = True,
    llm: Any = None,
    show_progress: bool = True,
    notice: Notice | None = None,
) -> ComparisonResult:
    """Builds and measures every requested strategy over the same data in one run.

    Args:
        dataset: A dataset directory (``corpus.jsonl`` + ``questions.jsonl``) or a
            :class:`~core.evaluation.Dataset` (e.g. :func:`core.evaluation.demo_dataset`).
        strategies: Names from :data:`core.evaluation.registry.STRATEGIES` (None: all of them).
            Those that cannot run here (a missing framework, a module that does not import)
            are skipped with a notice.
        k: Results per question; the metrics are taken at k.
        sample: Answer a seeded sample of this many questions (None: all).
        seed: Corpus shuffle seed and question sample seed.
        embedder: Anything :func:`core.embed.as_embedder` accepts; None = all-MiniLM-L6-v2.
        ragas: Also compute the RAGAS metrics (skipped with a notice if ragas is missing).
        llm: Optional LLM (LangChain, LlamaIndex or ragas) for the RAGAS LLM metrics.
        show_progress: Show progress bars.
        notice: Where notices go (default: stderr).

    Returns:
        The figures.

    Raises:
        FileNotFoundError: The dataset directory or one of its files is missing.
        ValueError: A malformed dataset (file, line and field named), an unknown strategy
            name, no strategy able to run, or a bad ``k`` or ``sample``.
    """
    say = notice or _stderr_notice
    k = _check_k(k)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(Path(dataset))
    specs, skipped = resolve_strategies(strategies)
    for name, reason in skipped.items():
        say(f"skipping {name}: {reason}")
    if not specs:
        raise ValueError("none of the requested strategies can run here; see the notices above")
    questions = data.sample_questions(sample, seed)
    docs = data.documents(seed)
    emb = EmbeddingCache(as_embedder(embedder))
    emb.inner.embed_documents(["warm-up"])  # load lazily initialised kernels before timing anything
    emb.embed_query("warm-up")
    failed: dict[str, str] = {}
    runs: list[tuple[StrategySpec, RunResult, PeakMemory]] = []
    with tempfile.TemporaryDirectory(prefix="bridge-compare-") as tmp:
        chroma = Path(tmp) / "chroma"
        with measure_peak_rss() as shared_mem:
            corpus = build_shared_corpus(
                docs, emb, ChunkStore.persistent(chroma, SHARED_COLLECTION), show_progress=show_progress
            )
        ctx = BenchContext(
            documents=docs, embedder=emb, corpus=corpus, chroma_path=chroma, k=k, show_progress=show_progress
        )
        bar = tqdm(
            total=len(questions) * len(specs),
            desc="queries",
            unit="q",
            file=sys.stderr,
            disable=not show_progress,
        )
        try:
            for group in _groups(specs):
                runs += _run_group(group, ctx, questions, bar, failed, say)
        finally:
            bar.close()
            corpus.store.close()
    result = ComparisonResult(
        dataset=data.name,
        questions=len(questions),
        passages=len(data.passages),
        chunks=len(corpus.ids),
        seed=seed,
        k=k,
        embedder=emb.name,
        date=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        shared={
            "build_s": corpus.build_seconds,
            "seconds": dict(corpus.seconds),
            "peak_rss_mib": shared_mem.peak_mib,
            "rss_added_mib": shared_mem.added_mib,
            "chunk_size": 512,
            "chunk_overlap": 64,
        },
        skipped=skipped,
        failed=failed,
        machine={
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    )
    _fill_rows(result, questions, runs)
    if ragas:
        _add_ragas(result, data, questions, runs, llm=llm, embedder=emb, say=say, show_progress=show_progress)
    return result


def _run_group(
    group: list[StrategySpec],
    ctx: BenchContext,
    questions: Sequence[Question],
    bar: Any,
    failed: dict[str, str],
    say: Notice,
) -> list[tuple[StrategySpec, RunResult, PeakMemory]]:
    """Builds one index, runs every strategy of the group on it, then frees it."""
    names = ", ".join(s.name for s in group)
    say(f"building {names} ...")
    out: list[tuple[StrategySpec, RunResult, PeakMemory]] = []
    gc.collect()
    index: Any = None
    with measure_peak_rss() as mem, ctx.embedder.account() as acct:
        try:
            t0 = time.perf_counter()
            index = group[0].build(ctx)
            build_s = time.perf_counter() - t0
        except Exception as exc:  # one broken strategy must not void the others' figures
            for spec in group:
                failed[spec.name] = f"build raised {type(exc).__name__}: {exc}"
                bar.update(len(questions))
            say(f"FAILED to build {names}: {type(exc).__name__}: {exc}")
            return []
        for spec in group:
            query = spec.query

            def retrieve(q: str, _query: Any = query) -> Any:
                return _query(index, q, ctx.k)

            try:
                retrieve(questions[0].question)  # warm-up, untimed
                run = run_strategy(
                    spec.name, questions, retrieve, None, ctx.embedder.embed_query, progress=bar.update
                )
            except Exception as exc:
                failed[spec.name] = f"query raised {type(exc).__name__}: {exc}"
                say(f"FAILED {spec.name}: {type(exc).__name__}: {exc}")
                continue
            run.build_seconds = build_s
            run.extra = {
                "family": spec.family,
                "build_s": build_s,
                "build_alone_s": _alone_seconds(spec, build_s, acct.hit_seconds, ctx.corpus),
                "embedded_texts": acct.misses,
                "cached_texts": acct.hits,
                "cached_embed_s": acct.hit_seconds,
            }
            out.append((spec, run, mem))
    index = None  # free the strategy before the next one is built
    gc.collect()
    for _, run, _ in out:
        run.extra["peak_rss_mib"] = mem.peak_mib
        run.extra["rss_added_mib"] = mem.added_mib
    return out


def _fill_rows(
    result: ComparisonResult,
    questions: Sequence[Question],
    runs: list[tuple[StrategySpec, RunResult, PeakMemory]],
) -> None:
    k = result.k
    rows = summarize_runs(questions, [run for _, run, _ in runs], ks=(k,), answer_k=k)
    for (spec, run, _), row in zip(runs, rows, strict=True):
        row.pop("build_s", None)
        row.update(run.extra)
        result.rows.append(row)
        result.descriptions[spec.name] = spec.description
        result.results[spec.name] = [list(res[:k]) for res in run.results]
        result.per_question[spec.name] = [
            {
                "question_id": q.id,
                "doc_ids": doc_ids_of(res[:k]),
                "passage_recall": passage_recall(q, doc_ids_of(res[:k])),
                "answer_found": answer_found(q, [r.text for r in res[:k]]),
                "latency_ms": lat,
            }
            for q, res, lat in zip(questions, run.results, run.latency_ms, strict=True)
        ]


def _add_ragas(
    result: ComparisonResult,
    data: Dataset,
    questions: Sequence[Question],
    runs: list[tuple[StrategySpec, RunResult, PeakMemory]],
    *,
    llm: Any,
    embedder: EmbeddingCache,
    say: Notice,
    show_progress: bool,
) -> None:
    try:
        from core.evaluation.ragas_eval import evaluate_retrieval
    except ImportError as exc:  # pragma: no cover - ragas ships with the eval extra
        say(f"skipping the RAGAS metrics: {exc}")
        return
    passages = data.passage_texts()
    by_name = {r["strategy"]: r for r in result.rows}
    for spec, run, _ in tqdm(runs, desc="ragas", file=sys.stderr, disable=not show_progress):
        try:
            scores = evaluate_retrieval(
                questions, run.results, passages, k=result.k, llm=llm, embedder=embedder.inner
            )
        except ImportError as exc:
            say(f"skipping the RAGAS metrics: {exc}")
            return
        by_name[spec.name].update(scores.means)
        if any(scores.failed.values()):
            by_name[spec.name]["ragas_failed"] = {m: n for m, n in scores.failed.items() if n}
        for entry, per_q in zip(result.per_question[spec.name], scores.per_question, strict=True):
            entry["ragas"] = per_q
