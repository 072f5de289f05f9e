"""Every strategy a benchmark run can measure, by name: ours, the baselines and the peers.

An entry (:class:`StrategySpec`) says how to build a strategy from the run's shared
:class:`~core.evaluation.corpus.BenchContext` (the same documents, the same embedder and the
same Chroma data for everyone) and how to query what was built: by default through the one
strategy signature, ``retrieve(query, k, **options)`` and, with the query's embedding
already computed, ``retrieve_by_vector(query, query_vector, k, **options)``
(:data:`STRATEGY_QUERY`). Adding a strategy is one entry in :data:`STRATEGIES`; a strategy
whose class has ``from_documents(documents, store=..., embedder=...)`` needs nothing more
than :func:`from_documents`::

    StrategySpec("bubble", "BubbleRAG ...", from_documents("core.strategies.bubble", "BubbleRAG"),
                 requires=("core.strategies.bubble",)),

The comparison (``bridge-rag bench DATASET``) and the per-strategy suites
(:mod:`core.evaluation.runner`) name entries from here; a suite's rows are entries queried
with other options (:class:`~core.evaluation.runner.Variant`). Entries whose ``requires``
modules do not import (a framework that is not installed, a strategy still being written)
are skipped with a notice instead of failing the run.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from core.evaluation.corpus import BenchContext
from core.types import Retrieved

__all__ = [
    "DEFAULT_STRATEGIES",
    "STRATEGIES",
    "STRATEGY_QUERY",
    "TEXT_QUERY",
    "Query",
    "StrategySpec",
    "from_documents",
    "register",
    "reject_repeated",
    "resolve_strategies",
    "unavailable_reason",
]

BuildFn = Callable[[BenchContext], Any]
Vector = npt.NDArray[np.float32]
#: What a build takes from the shared corpus, for the "built alone" time: nothing, the
#: chunks (texts only), or the whole collection (chunks, embeddings and the Chroma write).
Reuse = Literal["nothing", "chunks", "collection"]


class TextQuery(Protocol):
    """Queries a built index with the question alone: ``(index, question, k, **options)``."""

    def __call__(self, index: Any, question: str, k: int, /, **options: Any) -> list[Retrieved]: ...


class VectorQuery(Protocol):
    """Queries a built index with the question's embedding given: ``(index, question, vector, k)``."""

    def __call__(
        self, index: Any, question: str, vector: Vector, k: int, /, **options: Any
    ) -> list[Retrieved]: ...


@dataclass(frozen=True)
class Query:
    """How a benchmark queries a built index.

    Attributes:
        text: With the question alone (the index embeds it); timed as the latency with the
            query embedding. None: the run embeds the question and calls ``by_vector``.
        by_vector: With the question's embedding already computed; timed as the latency
            without the embedding where a suite asks for it. None: not timed.
    """

    text: TextQuery | None = None
    by_vector: VectorQuery | None = None

    def __post_init__(self) -> None:
        if self.text is None and self.by_vector is None:
            raise ValueError("a Query needs text or by_vector")


def _retrieve(index: Any, question: str, k: int, /, **options: Any) -> list[Retrieved]:
    results: list[Retrieved] = index.retrieve(question, k=k, **options)
    return results


def _retrieve_by_vector(
    index: Any, question: str, vector: Vector, k: int, /, **options: Any
) -> list[Retrieved]:
    results: list[Retrieved] = index.retrieve_by_vector(question, vector, k, **options)
    return results


#: The one strategy signature: ``retrieve(query, k, **options)`` and
#: ``retrieve_by_vector(query, query_vector, k, **options)``.
STRATEGY_QUERY = Query(_retrieve, _retrieve_by_vector)
#: Retrievers with ``retrieve(query, k)`` alone (BM25, hybrid RRF, the framework peers).
TEXT_QUERY = Query(_retrieve)


@dataclass(frozen=True)
class StrategySpec:
    """How to build and query one strategy in a benchmark run.

    Attributes:
        name: The name used on the command line and in the table.
        description: One line for the legend under the table.
        build: Builds the index from the run's context (``ctx.settings`` holds the suite's
            settings for this build, passed on by the builders that take any).
        query: How to query what ``build`` returned (default: the strategy signature).
        options: Retrieve options of this entry (``parent_promotion=True`` for UMGP).
        build_key: Strategies with the same key share one build (UMG and UMGP); default ``name``.
        reuses: What the build takes from the shared corpus (see :data:`Reuse`).
        requires: Modules that must import, else the strategy is skipped with a notice.
        family: ``"ours"``, ``"baseline"`` or ``"peer"`` (a framework's own retriever).
    """

    name: str
    description: str
    build: BuildFn
    query: Query = STRATEGY_QUERY
    options: Mapping[str, Any] = field(default_factory=dict)
    build_key: str = ""
    reuses: Reuse = "nothing"
    requires: tuple[str, ...] = ()
    family: Literal["ours", "baseline", "peer"] = "ours"

    @property
    def key(self) -> str:
        """The build this strategy uses."""
        return self.build_key or self.name


def from_documents(module: str, class_name: str, **kwargs: Any) -> BuildFn:
    """A builder calling ``Class.from_documents(documents, store=..., embedder=...)``.

    The store is a new collection named after the class in the run's Chroma; the embedder
    is the run's embedding cache. ``show_progress`` is passed when the method accepts it,
    and the build's ``ctx.settings`` on top of ``kwargs``.

    Args:
        module: Module that defines the class (imported when the build runs).
        class_name: The strategy class.
        **kwargs: More keyword arguments for ``from_documents``.

    Returns:
        The builder.
    """

    def build(ctx: BenchContext) -> Any:
        cls = getattr(importlib.import_module(module), class_name)
        options = {**kwargs, **ctx.settings}
        if "show_progress" in inspect.signature(cls.from_documents).parameters:
            options.setdefault("show_progress", ctx.show_progress)
        store = ctx.new_store(class_name.lower())
        return cls.from_documents(ctx.documents, store=store, embedder=ctx.embedder, **options)

    return build


# ---------------------------------------------------------------------- builders


def _dense(ctx: BenchContext) -> Any:
    from core.strategies.baselines import DenseRetriever

    return DenseRetriever(ctx.corpus.store, ctx.embedder)


def _bm25(ctx: BenchContext) -> Any:
    from core.evaluation.baselines import BM25Baseline

    return BM25Baseline(ctx.corpus)


def _hybrid(ctx: BenchContext) -> Any:
    from core.evaluation.baselines import HybridRRFBaseline

    return HybridRRFBaseline(ctx.corpus, ctx.embedder)


def _two_hop(ctx: BenchContext) -> Any:
    from core.evaluation.baselines import TwoHopBaseline

    return TwoHopBaseline(ctx.corpus, ctx.embedder)


def _bridge(ctx: BenchContext) -> Any:
    from core.strategies.bridge import BridgeRAG

    return BridgeRAG.from_store(
        ctx.corpus.store, embedder=ctx.embedder, show_progress=ctx.show_progress, **ctx.settings
    )


def _umg(ctx: BenchContext) -> Any:
    from core.strategies.umg import UMGRAG

    return UMGRAG.from_documents(
        ctx.documents,
        embedder=ctx.embedder,
        store=ctx.new_store("umg"),
        show_progress=ctx.show_progress,
        **ctx.settings,
    )


def _peer(builder: str) -> BuildFn:
    """The builder ``core.evaluation.peers.<builder>``, imported (with its framework) when it runs."""

    def build(ctx: BenchContext) -> Any:
        return getattr(importlib.import_module("core.evaluation.peers"), builder)(ctx)

    build.__name__ = build.__qualname__ = builder
    return build


_LANGCHAIN = (
    "langchain_classic.retrievers",
    "langchain_community.retrievers",
    "rank_bm25",
    "langchain_chroma",
)
_LLAMA_INDEX = ("llama_index.core", "llama_index.retrievers.bm25", "llama_index.vector_stores.chroma")

STRATEGIES: dict[str, StrategySpec] = {}


def register(spec: StrategySpec) -> StrategySpec:
    """Adds an entry to :data:`STRATEGIES`.

    Raises:
        ValueError: The name is taken or contains a comma or spaces.
    """
    if not spec.name or any(c in spec.name for c in ", \t"):
        raise ValueError(f"strategy name {spec.name!r} must be non-empty, without commas or spaces")
    if spec.name in STRATEGIES:
        raise ValueError(f"a strategy named {spec.name!r} is already registered")
    STRATEGIES[spec.name] = spec
    return spec


for _spec in (
    StrategySpec(
        "dense",
        "dense retrieval: the query's nearest chunks in the shared Chroma collection (HNSW, cosine)",
        _dense,
        reuses="collection",
        family="baseline",
    ),
    StrategySpec(
        "bm25",
        "BM25 (bm25s) over the shared chunks",
        _bm25,
        query=TEXT_QUERY,
        reuses="chunks",
        family="baseline",
    ),
    StrategySpec(
        "hybrid",
        "reciprocal-rank fusion (k=60) of the top-50 dense and BM25 lists over the shared chunks",
        _hybrid,
        query=TEXT_QUERY,
        reuses="collection",
        family="baseline",
    ),
    StrategySpec(
        "two-hop",
        "entity-linked two hops: the query's n-grams linked to document titles, plus the "
        "documents whose titles those name; cosine (exact) + 0.2 / 0.1 per hop",
        _two_hop,
        query=TEXT_QUERY,
        reuses="collection",
        family="baseline",
    ),
    StrategySpec(
        "bridge",
        "Bridge-RAG (default config) built from the shared collection (BridgeRAG.from_store)",
        _bridge,
        reuses="collection",
    ),
    StrategySpec(
        "umg",
        "UMG-RAG: entropy-weighted dense + BM25 over sentence windows (own collection)",
        _umg,
        options={"parent_promotion": False},
        build_key="umg",
    ),
    StrategySpec(
        "umgp",
        "UMGP-RAG: UMG with parent promotion (same index as umg)",
        _umg,
        options={"parent_promotion": True},
        build_key="umg",
    ),
    # BubbleRAG: one entry; skipped with a notice while core.strategies.bubble does not import.
    StrategySpec(
        "bubble",
        "BubbleRAG: evidence subgraphs (own collection)",
        from_documents("core.strategies.bubble", "BubbleRAG"),
        requires=("core.strategies.bubble",),
    ),
    StrategySpec(
        "langchain-ensemble",
        "LangChain EnsembleRetriever (RRF, equal weights): BM25Retriever + Chroma retriever "
        "on the shared collection",
        _peer("build_langchain_ensemble"),
        query=TEXT_QUERY,
        reuses="collection",
        requires=_LANGCHAIN,
        family="peer",
    ),
    StrategySpec(
        "uncertainty-fusion",
        "langchain_bridge.UncertaintyFusionRetriever (entropy-weighted, equal prior weights) over the "
        "langchain-ensemble peer's BM25Retriever + Chroma retriever",
        _peer("build_langchain_uncertainty_fusion"),
        query=TEXT_QUERY,
        reuses="collection",
        requires=_LANGCHAIN,
        family="ours",
    ),
    StrategySpec(
        "langchain-chroma",
        "a langchain_chroma retriever (2k results) on the shared collection: the entity-hop row's base alone",
        _peer("build_langchain_chroma"),
        query=TEXT_QUERY,
        reuses="collection",
        requires=_LANGCHAIN,
        family="baseline",
    ),
    StrategySpec(
        "entity-hop",
        "ContextualCompressionRetriever: a langchain_chroma retriever (2k) on the shared collection, then "
        "langchain_bridge.EntityHopCompressor (k) over Bridge-RAG built from that collection",
        _peer("build_langchain_entity_hop"),
        query=TEXT_QUERY,
        reuses="collection",
        requires=_LANGCHAIN,
    ),
    StrategySpec(
        "llamaindex-vector",
        "a LlamaIndex VectorStoreIndex retriever (2k results) on the shared collection: the "
        "llamaindex-entity-hop row's base alone",
        _peer("build_llamaindex_vector"),
        query=TEXT_QUERY,
        reuses="collection",
        requires=_LLAMA_INDEX,
        family="baseline",
    ),
    StrategySpec(
        "llamaindex-entity-hop",
        "a LlamaIndex VectorStoreIndex retriever (2k) on the shared collection, then "
        "llama_index_bridge.EntityHopPostprocessor (k) over Bridge-RAG built from that collection",
        _peer("build_llamaindex_entity_hop"),
        query=TEXT_QUERY,
        reuses="collection",
        requires=_LLAMA_INDEX,
    ),
    StrategySpec(
        "llamaindex-fusion",
        "LlamaIndex QueryFusionRetriever (reciprocal_rerank, num_queries=1, no LLM): BM25Retriever "
        "+ VectorStoreIndex on the shared collection",
        _peer("build_llamaindex_fusion"),
        query=TEXT_QUERY,
        reuses="collection",
        requires=_LLAMA_INDEX,
        family="peer",
    ),
):
    register(_spec)

#: Every registered strategy, in table order.
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(STRATEGIES)


def unavailable_reason(spec: StrategySpec) -> str | None:
    """Why ``spec`` cannot run here (a required module does not import), or None."""
    for module in spec.requires:
        try:
            importlib.import_module(module)
        except Exception as exc:  # a missing extra, or a module still being written
            return f"{module} does not import ({type(exc).__name__}: {exc})"
    return None


def reject_repeated(names: Sequence[str]) -> None:
    """Raises ValueError naming the first name listed twice (the rows of a table must differ)."""
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"strategy {repeated[0]!r} is listed twice; list each strategy once")


def resolve_strategies(names: Iterable[str] | None) -> tuple[list[StrategySpec], dict[str, str]]:
    """The entries to run, in the order given, and the ones skipped with their reasons.

    Args:
        names: Strategy names (None: every registered strategy).

    Returns:
        ``(specs, skipped)``.

    Raises:
        ValueError: An unknown or repeated name, or no name at all.
    """
    wanted: Sequence[str] = list(DEFAULT_STRATEGIES if names is None else names)
    if not wanted:
        raise ValueError(f"no strategies given; choose from {', '.join(STRATEGIES)}")
    unknown = [n for n in wanted if n not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)}")
    reject_repeated(wanted)
    specs: list[StrategySpec] = []
    skipped: dict[str, str] = {}
    for name in wanted:
        reason = unavailable_reason(STRATEGIES[name])
        if reason is None:
            specs.append(STRATEGIES[name])
        else:
            skipped[name] = reason
    return specs, skipped
