"""What one benchmark run measured (:class:`ComparisonResult`), and how it is reported.

Every run of :func:`core.evaluation.runner.run_suite` returns one: the all-strategies
comparison prints :meth:`ComparisonResult.report` and draws :meth:`ComparisonResult.plot`;
the per-strategy suites print their own columns of the same rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from core.evaluation.metrics import markdown_table
from core.evaluation.shapes import CorpusShape
from core.types import Retrieved

__all__ = ["ComparisonResult"]


@dataclass
class ComparisonResult:
    """Everything one benchmark run measured (the comparison, or a per-strategy suite).

    Attributes:
        dataset: Dataset name.
        questions: Questions answered.
        passages: Passages indexed (each its own document).
        chunks: Chunks in the shared collection.
        seed: Corpus shuffle and question sample seed.
        k: The k of the answer recall, context words and RAGAS columns (the results kept).
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
        builds: Per build (registry build key): its seconds in this run and alone, its
            steps as if built alone, its counts, peak memory, and the figures the suite
            read off the built index.
        extras: What the suite's extension measured (e.g. BubbleRAG's localisation).
        ks: The k of each passage recall column (empty: just ``k``).
        versus: The columns comparing each row with a reference row (the suite's).
        results: Per strategy, each question's retrieved results (top k), for further
            evaluation (e.g. with ragas); not part of :meth:`to_json`.
        shape: How the passages were handed over as documents (titles, grouping).
        documents: Documents indexed (the passages, or the grouped documents).
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
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    ks: list[int] = field(default_factory=list)
    versus: list[str] = field(default_factory=list)
    results: dict[str, list[list[Retrieved]]] = field(default_factory=dict, repr=False)
    shape: CorpusShape = field(default_factory=CorpusShape)
    documents: int = 0

    # ------------------------------------------------------------------ reporting
    def columns(self) -> list[str]:
        """The main table's columns."""
        k = self.k
        return [
            "strategy",
            *(f"recall@{j}" for j in (self.ks or [k])),
            f"answer_recall@{k}",
            f"context_words@{k}",
            *self.versus,
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
            **{f"recall@{j}": f"R@{j}" for j in (*self.ks, k)},
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
        docs = f" ({self.documents:,} documents)" if self.shape.documents != "passages" else ""
        return (
            f"{self.dataset}: {self.questions} questions, {self.passages:,} passages as {self.chunks:,} "
            f"chunks, {self.shape.label()}{docs}, indexed in shuffled order (seed {self.seed}); "
            f"k = {self.k}; embedder {self.embedder}; shared corpus built once in {s['build_s']:.1f} s "
            f"(chunk {s['seconds']['chunk']:.1f} s, embed {s['seconds']['embed']:.1f} s, "
            f"Chroma write {s['seconds']['store']:.1f} s); {self.date}"
        )

    def type_table(self) -> str:
        """Passage recall@k of each question type (rows) for every strategy (columns); '' without types.

        Beside each type, its number of questions; the last row groups every question whose
        gold lies in two documents or more, when there are such questions.
        """
        key = f"recall@{self.k}_by_type"
        rows = [r for r in self.rows if key in r]
        if not rows:
            return ""
        groups = list(dict.fromkeys(g for r in rows for g in r[key]))
        lines = [
            f"| question type (R@{self.k}) | n | " + " | ".join(r["strategy"] for r in rows) + " |",
            "|---|---:|" + "---:|" * len(rows),
        ]
        for g in groups:
            n = next(int(r[key][g]["questions"]) for r in rows if g in r[key])
            cells = [f"{100 * r[key][g]['recall']:.1f}" if g in r[key] else "-" for r in rows]
            lines.append(f"| {g} | {n} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def report(self) -> str:
        """Summary, tables, legend and notices as markdown."""
        parts = [self.summary(), "", self.table()]
        if self.type_table():
            parts += ["", self.type_table()]
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
            "shape": {
                "titles": self.shape.titles,
                "documents": self.shape.documents,
                **({"sections": self.shape.sections} if self.shape.documents == "grouped" else {}),
            },
            "documents": self.documents,
            "seed": self.seed,
            "k": self.k,
            "ks": self.ks,
            "embedder": self.embedder,
            "date": self.date,
            "machine": self.machine,
            "shared_corpus": self.shared,
            "rows": self.rows,
            "descriptions": self.descriptions,
            "skipped": self.skipped,
            "failed": self.failed,
            "per_question": self.per_question,
            "builds": self.builds,
            **({"extras": self.extras} if self.extras else {}),
        }

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """Recall@k against p50 latency, one labelled point per strategy (see :mod:`core.evaluation.plot`)."""
        from core.evaluation.plot import plot_recall_latency

        title = (
            f"{self.dataset}: {self.questions} questions, {self.passages:,} passages, k={self.k} "
            f"({self.date[:10]})"
        )
        return plot_recall_latency(self.rows, path, k=self.k, title=title)
