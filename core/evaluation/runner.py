"""The one benchmark runner: a suite of rows over one shared corpus, built from the registry.

A run (:func:`run_suite`) loads the dataset, shuffles the corpus (fixed seed), embeds its
chunks once into one Chroma collection (:mod:`core.evaluation.corpus`) and then, build by
build, builds each registry entry (:mod:`core.evaluation.registry`) its rows name from that
shared data, answers every question through each of those rows, and frees it. Measured per
row:

- passage recall@k, answer recall@k and mean context words@k (:mod:`core.evaluation.metrics`);
- p50 / p95 query latency, query embedding included (one untimed warm-up query first) and,
  where the suite asks for it, without the query embedding (``retrieve_by_vector``);
- build time twice: ``build_s`` is the build in this run, reusing the shared collection and
  the embedding cache; ``build_alone_s`` adds what it reused (chunking, embedding and writing
  the collection, or the embedding time of its cache hits), i.e. the cost of building it on
  its own (for a row that uses only some steps of a build, a UMG expert alone, those steps);
- peak memory: process RSS sampled every 10 ms (psutil) during the build and its rows'
  queries (rows sharing one build share one figure), and how far it rose above the RSS at
  the build's start;
- optionally RAGAS metrics (:mod:`core.evaluation.ragas_eval`).

What to measure is a :class:`~core.evaluation.suite.Suite` (configuration only); the
all-strategies comparison and the per-strategy suites are such configurations, and this
module is the one loop that runs them all.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from tqdm.auto import tqdm

from core.embed import as_embedder
from core.evaluation.corpus import (
    CHUNK_OVERLAP,
    BenchContext,
    SharedCorpus,
)
from core.evaluation.embedding_cache import EmbeddingAccount, EmbeddingCache
from core.evaluation.metrics import (
    Dataset,
    Question,
    RunResult,
    answer_found,
    load_dataset,
    passage_recall,
    run_strategy,
    summarize_runs,
)
from core.evaluation.peak_memory import PeakMemory, measure_peak_rss
from core.evaluation.registry import STRATEGIES, StrategySpec, resolve_strategies
from core.evaluation.result import ComparisonResult
from core.evaluation.shapes import CorpusShape, PassageAttribution, shaped_documents
from core.evaluation.suite import Inspect, Suite, Variant
from core.types import Retrieved

__all__ = ["Build", "Measured", "Session", "run_suite", "suite_output"]

Notice = Callable[[str], None]


def _stderr_notice(message: str) -> None:
    tqdm.write(message, file=sys.stderr)


# ---------------------------------------------------------------------- measurements


@dataclass
class Build:
    """One build of a run and what was measured on it.

    Attributes:
        spec: The registry entry that built it.
        seconds: The build in this run.
        alone_seconds: The build on its own: :attr:`seconds` plus the shared work it reused
            (the collection's steps, the chunking, or, building its own collection, the
            embedding time of its cache hits).
        steps_s: Seconds per step as if built alone (its own steps plus what it reused).
        counts: The index's counts (``index.report.counts``), if it reports any.
        account: The embedding cache's hits and misses during the build.
        inspected: What the suite's ``inspect`` read off the index.
        memory: Peak RSS over the build and its rows' queries (filled when they end).
    """

    spec: StrategySpec
    seconds: float
    alone_seconds: float
    steps_s: dict[str, float]
    counts: dict[str, int]
    account: EmbeddingAccount
    inspected: dict[str, Any]
    memory: PeakMemory

    @classmethod
    def of(
        cls,
        spec: StrategySpec,
        index: Any,
        seconds: float,
        account: EmbeddingAccount,
        corpus: SharedCorpus,
        memory: PeakMemory,
        inspect: Inspect | None,
    ) -> Build:
        """The figures of a build that has just finished."""
        if spec.reuses == "collection":
            reused = dict(corpus.seconds)
        elif spec.reuses == "chunks":
            reused = {"chunk": corpus.seconds["chunk"]}
        else:
            reused = {"embed": account.hit_seconds} if account.hit_seconds else {}
        report = getattr(index, "report", None)
        own: dict[str, float] = dict(getattr(report, "seconds", {}))
        # in the order the work happened: the shared steps first, cache hits inside its own
        first, then = (own, reused) if spec.reuses == "nothing" else (reused, own)
        steps = dict(first)
        for step, s in then.items():
            steps[step] = steps.get(step, 0.0) + s
        return cls(
            spec=spec,
            seconds=seconds,
            alone_seconds=seconds + sum(reused.values()),
            steps_s=steps,
            counts=dict(getattr(report, "counts", {})),
            account=dataclasses.replace(account),  # the build's share, not the queries'
            inspected=dict(inspect(index)) if inspect is not None else {},
            memory=memory,
        )

    def figures(self) -> dict[str, Any]:
        """Its seconds, embedding account and peak memory: the columns beside a row's metrics."""
        return {
            "build_s": self.seconds,
            "build_alone_s": self.alone_seconds,
            "embedded_texts": self.account.misses,
            "cached_texts": self.account.hits,
            "cached_embed_s": self.account.hit_seconds,
            "peak_rss_mib": self.memory.peak_mib,
            "rss_added_mib": self.memory.added_mib,
        }

    def to_json(self) -> dict[str, Any]:
        """The build's figures as JSON-ready data: :meth:`figures`, steps, counts, what was inspected."""
        extra = {"inspected": self.inspected} if self.inspected else {}
        return {**self.figures(), "steps_s": self.steps_s, "counts": self.counts, **extra}


@dataclass
class Measured:
    """One row's run: its variant, its registry entry, the answers and timings, and its build."""

    variant: Variant
    spec: StrategySpec
    run: RunResult
    build: Build

    @property
    def alone_seconds(self) -> float:
        """The row's build on its own (only its steps, for a row with ``build_steps``)."""
        steps = self.variant.build_steps
        if steps is None:
            return self.build.alone_seconds
        return sum(self.build.steps_s.get(s, 0.0) for s in steps)

    def figures(self) -> dict[str, Any]:
        """The row's build and memory figures (the table's columns beside the metrics)."""
        return {"family": self.spec.family, **self.build.figures(), "build_alone_s": self.alone_seconds}


@contextmanager
def _configured(index: Any, overrides: Mapping[str, Any]) -> Iterator[None]:
    """``index.config`` with some fields replaced, restored afterwards."""
    if not overrides:
        yield
        return
    saved = index.config
    index.config = dataclasses.replace(saved, **overrides)
    try:
        yield
    finally:
        index.config = saved


@dataclass
class Session:
    """A run in progress: the shared context and questions, and the rows measured so far.

    A suite's :attr:`Suite.extend` receives it to measure more with the same data, embedder
    and Chroma (:meth:`measure`, with another context if it likes).
    """

    suite: Suite
    ctx: BenchContext
    questions: list[Question]
    seed: int
    say: Notice
    failed: dict[str, str] = field(default_factory=dict)
    measured: list[Measured] = field(default_factory=list)

    def row(self, name: str) -> Measured:
        """The measured row called ``name``.

        Raises:
            KeyError: No such row was measured.
        """
        for m in self.measured:
            if m.variant.name == name:
                return m
        raise KeyError(name)

    def measure(
        self, variants: Sequence[Variant], ctx: BenchContext | None = None, *, desc: str = "queries"
    ) -> list[Measured]:
        """Builds what ``variants`` need (one build per build key) and runs every question on each.

        Args:
            variants: The rows.
            ctx: The context to build from (default: the session's).
            desc: The progress bar's label.

        Returns:
            The rows measured, in the order given (failures are left out and recorded in
            :attr:`failed`, unless the suite is strict).
        """
        ctx = ctx or self.ctx
        groups: dict[str, list[Variant]] = {}
        for v in variants:
            groups.setdefault(STRATEGIES[v.strategy].key, []).append(v)
        bar = tqdm(
            total=len(self.questions) * len(variants),
            desc=desc,
            unit="q",
            file=sys.stderr,
            disable=not ctx.show_progress,
        )
        out: list[Measured] = []
        try:
            for group in groups.values():
                out += self._measure_build(group, ctx, bar)
        finally:
            bar.close()
        order = {v.name: i for i, v in enumerate(variants)}
        return sorted(out, key=lambda m: order[m.variant.name])

    def _fail(self, names: Sequence[str], what: str, exc: Exception) -> None:
        if self.suite.strict:
            raise exc
        for name in names:
            self.failed[name] = f"{what} raised {type(exc).__name__}: {exc}"

    def _measure_build(self, group: list[Variant], ctx: BenchContext, bar: Any) -> list[Measured]:
        """Builds one index, runs every row of the group on it, then frees it."""
        spec = STRATEGIES[group[0].strategy]
        names = ", ".join(v.name for v in group)
        self.say(f"building {names} ...")
        out: list[Measured] = []
        gc.collect()
        index: Any = None
        with measure_peak_rss() as mem, ctx.embedder.account() as acct:
            try:
                t0 = time.perf_counter()
                settings = self.suite.settings.get(spec.key, {})
                index = spec.build(dataclasses.replace(ctx, settings=settings))
                seconds = time.perf_counter() - t0
                inspect = self.suite.inspect.get(spec.key)
                build = Build.of(spec, index, seconds, acct, ctx.corpus, mem, inspect)
            except Exception as exc:  # one broken strategy must not void the others' figures
                self._fail([v.name for v in group], "build", exc)
                bar.update(len(self.questions) * len(group))
                self.say(f"FAILED to build {names}: {type(exc).__name__}: {exc}")
                return []
            for variant in group:
                try:
                    run = self._run(variant, index, ctx, bar)
                except Exception as exc:
                    self._fail([variant.name], "query", exc)
                    self.say(f"FAILED {variant.name}: {type(exc).__name__}: {exc}")
                    continue
                run.build_seconds = seconds
                out.append(Measured(variant, STRATEGIES[variant.strategy], run, build))
        index = None  # free the strategy before the next one is built
        gc.collect()
        return out

    def _run(self, variant: Variant, index: Any, ctx: BenchContext, bar: Any) -> RunResult:
        spec = STRATEGIES[variant.strategy]
        query = variant.query or spec.query
        options = {**spec.options, **variant.options}
        k, embed = ctx.k, ctx.embedder.embed_query
        text, by_vector = query.text, query.by_vector

        def retrieve(q: str) -> list[Retrieved]:
            if text is not None:
                return text(index, q, k, **options)
            assert by_vector is not None  # a Query has one of the two
            return by_vector(index, q, embed(q), k, **options)

        def retrieve_by_vector(q: str, v: Any) -> list[Retrieved]:
            assert by_vector is not None
            return by_vector(index, q, v, k, **options)

        timed = retrieve_by_vector if by_vector is not None and self.suite.without_embedding else None
        with _configured(index, variant.config):
            retrieve(self.questions[0].question)  # warm-up, untimed
            return run_strategy(variant.name, self.questions, retrieve, timed, embed, progress=bar.update)


# ---------------------------------------------------------------------- the run


class RunOptions(TypedDict, total=False):
    """How :func:`run_suite` runs, beside what it measures (every key optional).

    Attributes:
        sample: Answer a seeded sample of this many questions (None: all).
        seed: Corpus shuffle seed and question sample seed (default 0).
        embedder: Anything :func:`core.embed.as_embedder` accepts; None = all-MiniLM-L6-v2.
        llm: Optional LLM (LangChain, LlamaIndex or ragas) for the RAGAS LLM metrics.
        show_progress: Show progress bars (default True).
        notice: Where notices go (default: stderr).
        shape: How the passages become documents (:class:`~core.evaluation.shapes.CorpusShape`:
            where the titles go, one document per passage or grouped); default the dev
            corpora's own shape.
    """

    sample: int | None
    seed: int
    embedder: Any
    llm: Any
    show_progress: bool
    notice: Notice | None
    shape: CorpusShape | None


def run_suite(
    dataset: str | os.PathLike[str] | Dataset,
    suite: Suite,
    *,
    sample: int | None = None,
    seed: int = 0,
    embedder: Any = None,
    llm: Any = None,
    show_progress: bool = True,
    notice: Notice | None = None,
    shape: CorpusShape | None = None,
) -> ComparisonResult:
    """Builds and measures every row of ``suite`` over the same data in one run.

    Args:
        dataset: A dataset directory (``corpus.jsonl`` + ``questions.jsonl``) or a
            :class:`~core.evaluation.metrics.Dataset`.
        suite: What to measure.
        sample: See :class:`RunOptions` (as are the other keyword arguments).
        seed: Corpus shuffle seed and question sample seed.
        embedder: The model (default all-MiniLM-L6-v2).
        llm: Optional LLM for the RAGAS LLM metrics.
        show_progress: Show progress bars.
        notice: Where notices go (default: stderr).
        shape: How the passages become documents (default the dev corpora's own shape; a
            corpus of long documents is read as its documents).

    Returns:
        The figures.

    Raises:
        FileNotFoundError: The dataset directory or one of its files is missing.
        ValueError: A malformed dataset (file, line and field named), an unknown strategy
            name, no row able to run (or, in a strict suite, any row unable to run), or a
            bad ``sample``.
    """
    say = notice or _stderr_notice
    data = dataset if isinstance(dataset, Dataset) else load_dataset(Path(dataset))
    _, skipped = resolve_strategies(list(dict.fromkeys(v.strategy for v in suite.variants)))
    for name, reason in skipped.items():
        say(f"skipping {name}: {reason}")
    if skipped and suite.strict:
        name, reason = next(iter(skipped.items()))
        raise ValueError(f"the {suite.name} suite needs {name}, which cannot run here: {reason}")
    variants = [v for v in suite.variants if v.strategy not in skipped]
    if not variants:
        raise ValueError("none of the requested strategies can run here; see the notices above")
    questions = data.sample_questions(sample, seed)
    if shape is None or (data.has_documents and shape.is_default):
        shape = CorpusShape.of_documents() if data.has_documents else CorpusShape()
    docs, attribution = shaped_documents(data.passages, shape, seed)
    emb = EmbeddingCache(as_embedder(embedder))
    emb.inner.embed_documents(["warm-up"])  # load lazily initialised kernels before timing anything
    emb.embed_query("warm-up")
    with tempfile.TemporaryDirectory(prefix=f"bridge-{suite.name}-") as tmp:
        chroma = Path(tmp) / "chroma"
        with measure_peak_rss() as shared_mem:
            ctx = BenchContext.create(docs, emb, chroma, k=suite.k, show_progress=show_progress)
        corpus = ctx.corpus
        session = Session(suite, ctx, questions, seed, say)
        try:
            session.measured = session.measure(variants)
            extras = suite.extend(session) if suite.extend is not None else {}
        finally:
            corpus.store.close()
    result = ComparisonResult(
        dataset=data.name,
        questions=len(questions),
        passages=len(data.passages),
        chunks=len(corpus.ids),
        seed=seed,
        k=suite.answer_k,
        ks=list(suite.ks),
        versus=[v.column for v in suite.versus],
        embedder=emb.name,
        date=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        shared={
            "build_s": corpus.build_seconds,
            "seconds": dict(corpus.seconds),
            "peak_rss_mib": shared_mem.peak_mib,
            "rss_added_mib": shared_mem.added_mib,
            "chunk_size": corpus.chunk_size,
            "chunk_overlap": CHUNK_OVERLAP,
        },
        skipped=skipped,
        failed=session.failed,
        machine={
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        extras=extras,
        shape=shape,
        documents=len(docs),
    )
    _fill_rows(result, suite, questions, session.measured, attribution)
    if suite.ragas:
        _add_ragas(result, data, session, llm=llm, ids_of=attribution, shape=shape)
    return result


def _fill_rows(
    result: ComparisonResult,
    suite: Suite,
    questions: Sequence[Question],
    measured: Sequence[Measured],
    ids_of: PassageAttribution,
) -> None:
    k = result.k
    rows = summarize_runs(
        questions, [m.run for m in measured], ks=suite.ks, answer_k=suite.answer_k, ids_of=ids_of
    )
    for m, row in zip(measured, rows, strict=True):
        row.update(m.figures())
        name = m.variant.name
        result.rows.append(row)
        result.descriptions[name] = m.spec.description
        result.builds.setdefault(m.spec.key, m.build.to_json())
        result.results[name] = [list(res[:k]) for res in m.run.results]
        result.per_question[name] = [
            {
                "question_id": q.id,
                **({"type": q.type} if q.type is not None else {}),
                "doc_ids": ids_of(res[:k]),
                "passage_recall": passage_recall(q, ids_of(res[:k])),
                "answer_found": answer_found(q, [r.text for r in res[:k]]),
                "latency_ms": lat,
            }
            for q, res, lat in zip(questions, m.run.results, m.run.latency_ms, strict=True)
        ]
    for versus in suite.versus:
        versus.apply(result.rows)


def _add_ragas(
    result: ComparisonResult,
    data: Dataset,
    session: Session,
    *,
    llm: Any,
    ids_of: PassageAttribution,
    shape: CorpusShape,
) -> None:
    """The RAGAS metrics of every row the session measured, added to ``result``."""
    say, ctx = session.say, session.ctx
    try:
        from core.evaluation.ragas_eval import evaluate_retrieval
    except ImportError as exc:  # pragma: no cover - ragas ships with the eval extra
        say(f"skipping the RAGAS metrics: {exc}")
        return
    passages = {p["id"]: shape.passage_text(p) for p in data.passages}
    by_name = {r["strategy"]: r for r in result.rows}
    for m in tqdm(session.measured, desc="ragas", file=sys.stderr, disable=not ctx.show_progress):
        name = m.variant.name
        try:
            scores = evaluate_retrieval(
                session.questions,
                m.run.results,
                passages,
                k=result.k,
                llm=llm,
                embedder=ctx.embedder.inner,
                ids_of=ids_of,
            )
        except ImportError as exc:
            say(f"skipping the RAGAS metrics: {exc}")
            return
        by_name[name].update(scores.means)
        if any(scores.failed.values()):
            by_name[name]["ragas_failed"] = {metric: n for metric, n in scores.failed.items() if n}
        for entry, per_q in zip(result.per_question[name], scores.per_question, strict=True):
            entry["ragas"] = per_q


def suite_output(result: ComparisonResult, suite: Suite) -> dict[str, Any]:
    """A per-strategy suite's figures as one JSON-ready dict, with its table as markdown.

    Returns:
        :meth:`ComparisonResult.to_json <core.evaluation.result.ComparisonResult.to_json>`,
        plus ``table``, the figures the suite read off its builds (e.g. ``graph``), what its
        extension measured (e.g. ``localisation``) and ``build``: ``{name}_build_s`` (the
        suite's own strategy built alone), ``embed_corpus_once_s`` (embedding the shared
        chunks once), their ratio ``build_over_embed``, its ``steps_s`` and ``counts``.
    """
    built = result.builds[STRATEGIES[suite.name].key]
    embed_s = float(result.shared["seconds"]["embed"])
    out = {k: v for k, v in result.to_json().items() if k != "extras"}
    for b in result.builds.values():
        out.update(b.get("inspected", {}))
    out.update(result.extras)
    out["build"] = {
        f"{suite.name}_build_s": built["build_alone_s"],
        "embed_corpus_once_s": embed_s,
        "build_over_embed": built["build_alone_s"] / embed_s if embed_s else math.nan,
        "steps_s": built["steps_s"],
        "counts": built["counts"],
    }
    out["table"] = suite.table(result.rows)
    return out
