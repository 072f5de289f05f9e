"""The strategies every reliability and integration test runs over: one table, one entry each.

Each :class:`StrategyCase` knows how to build its strategy, reopen a saved index and wrap the
strategy in the LangChain and LlamaIndex retrievers, so the concurrency, crash-safety,
bad-input, security and Chroma-server tests are written once against the table. Adding a
strategy (BubbleRAG next) is one more entry in :data:`STRATEGIES`.

Builds for quality-neutral wiring checks (crash safety, corruption, bad input) use
:func:`wiring_embedder` (a deterministic bag-of-words fake) and :meth:`StrategyCase.wiring_kwargs`
(the rule-based entity extractor for Bridge), so they cost milliseconds; the concurrency and
server tests use the real all-MiniLM-L6-v2 model.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.entities import EntityExtractor, RuleBasedEntityExtractor, default_entity_extractor
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.strategies.bubble.triples import SpacyTripleExtractor
from core.strategies.umg import UMGRAG
from core.types import Document, Retrieved
from tests.core.conftest import CachingEmbedder, hash_embedder

__all__ = [
    "QUERIES",
    "STRATEGIES",
    "StrategyCase",
    "case_named",
    "result_signature",
    "shared_real_embedder",
    "spacy_extractor",
    "synthetic_documents",
    "wiring_embedder",
]

#: Queries every strategy answers in the concurrency and server tests: entity questions,
#: lowercase and partial mentions, and queries no entity matches (dense fallbacks).
QUERIES: tuple[str, ...] = (
    "Who founded the Marrowick Observatory?",
    "Who built the telescope at Ilse Varga's observatory in Marrowick?",
    "What did the Halden Institute study?",
    "Who directed the institute founded by Oskar Halden?",
    "comet varga discovery",
    "Tell me about Ilse Varga.",
    "halden institute herbarium",
    "What did Agnes Moor build after the flood?",
    "greywater bridge engineer",
    "Who was Pieter Ashby?",
    "the lantern festival in october",
    "Corvane Conservatory teachers",
    "Marrowick Courier newspaper",
    "river tessel floods",
    "quantum chromodynamics on a lattice",
    "photosynthesis in deep sea algae",
)


@functools.lru_cache(maxsize=1)
def spacy_extractor() -> EntityExtractor:
    """The default spaCy extractor, loaded once per process."""
    return default_entity_extractor()


@functools.lru_cache(maxsize=1)
def spacy_triples() -> SpacyTripleExtractor:
    """The spaCy triple extractor, loaded once per process."""
    return SpacyTripleExtractor()


def wiring_embedder() -> Any:
    """The deterministic 32-d bag-of-words fake embedder (wiring checks only)."""
    return hash_embedder()


_shared: dict[int, CachingEmbedder] = {}


def shared_real_embedder(model: Any) -> CachingEmbedder:
    """One caching wrapper of the session's real model, shared by every test directory.

    Indexes over the same texts (the concurrency fixtures and the Chroma-server tests) then
    embed each chunk once per session.
    """
    key = id(model)
    if key not in _shared:
        _shared[key] = CachingEmbedder(model)
    return _shared[key]


def synthetic_documents(n: int, *, prefix: str = "syn", seed: int = 0) -> list[Document]:
    """``n`` small deterministic documents with invented names (for cheap wiring builds).

    Every document has three sentences and mentions two capitalised names, so entity
    extraction, sentence windows and abstracts all have something to work on.
    """
    names = ["Arvel", "Brisca", "Corwen", "Dalmor", "Evanth", "Fennick", "Galder", "Hestry"]
    places = ["Quellmoor", "Rastwick", "Solbury", "Tarnholt", "Umberlee", "Vantry"]
    out = []
    for i in range(n):
        a = names[(i + seed) % len(names)]
        b = places[(3 * i + seed) % len(places)]
        text = (
            f"{a} {names[(i + 3) % len(names)]}son founded the {b} Guild in {1800 + i}. "
            f"The guild of {b} traded salt and copper for {i % 17 + 2} years. "
            f"Later {a} wrote a chronicle of {b} that is kept in the archive."
        )
        out.append(Document(text, id=f"{prefix}-{i:04d}", metadata={"title": f"{a} of {b}", "n": i}))
    return out


def result_signature(results: Sequence[Retrieved]) -> list[tuple[str, float, str, dict[str, Any]]]:
    """Everything a result carries (id, exact score, text, full metadata), for equality checks."""
    return [(r.id, r.score, r.text, dict(r.metadata)) for r in results]


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class StrategyCase:
    """How the reliability tests drive one strategy.

    Attributes:
        name: Strategy name; also the index sub-directory under a ``persist_directory``.
        build: ``(documents, *, embedder, store=None, persist_directory=None, **settings)`` ->
            the built core strategy.
        load: ``(path, *, embedder, store=None, **settings)`` -> the strategy saved at ``path``.
        langchain: ``(strategy, k)`` -> a LangChain retriever over it.
        llama_index: ``(strategy, k, search_kwargs)`` -> a LlamaIndex retriever over it (LlamaIndex
            takes options at construction, not per call).
        langchain_build: ``(documents, embedding, **settings)`` -> the LangChain retriever's own
            ``from_documents``.
        llama_index_build: ``(documents, embed_model, **settings)`` -> the LlamaIndex retriever's
            own ``from_defaults``.
        langchain_load: ``(path, embeddings, k)`` -> a LangChain retriever reopening ``path``.
        llama_index_load: ``(path, embed_model, k)`` -> a LlamaIndex retriever reopening ``path``.
        live_documents: ``strategy`` -> the ids of the documents it holds (the crash tests
            compare a loaded index with what the writer saved).
        options: Per-call ``retrieve`` options the tests mix in (besides none at all).
        corpus_size: Demo documents indexed for the real-model tests (keeps runtime modest).
        wiring_kwargs: Extra settings for cheap wiring builds and loads (fake embedder).
        bad_options: ``(options, exception, message)`` rows only this strategy rejects.
    """

    name: str
    build: Callable[..., Any]
    load: Callable[..., Any]
    langchain: Callable[[Any, int], Any]
    llama_index: Callable[[Any, int, Mapping[str, Any]], Any]
    langchain_build: Callable[..., Any]
    llama_index_build: Callable[..., Any]
    langchain_load: Callable[[Any, Any, int], Any]
    llama_index_load: Callable[[Any, Any, int], Any]
    live_documents: Callable[[Any], set[str]]
    options: tuple[Mapping[str, Any], ...] = ()
    corpus_size: int = 46
    wiring_kwargs: Callable[[], dict[str, Any]] = dict
    bad_options: tuple[tuple[Mapping[str, Any], type[Exception], str], ...] = field(default=())

    def __str__(self) -> str:
        return self.name


def _bridge_build(
    documents: Sequence[Document],
    *,
    embedder: Any,
    store: ChunkStore | None = None,
    persist_directory: str | os.PathLike[str] | None = None,
    **settings: Any,
) -> BridgeRAG:
    if "entity_extractor" not in settings:  # not setdefault: that would load spaCy regardless
        settings["entity_extractor"] = spacy_extractor()
    return BridgeRAG.from_documents(
        documents,
        embedder=embedder,
        store=store,
        persist_directory=persist_directory,
        show_progress=False,
        **settings,
    )


def _bridge_load(path: Any, *, embedder: Any, store: ChunkStore | None = None, **settings: Any) -> BridgeRAG:
    if "entity_extractor" not in settings:  # not setdefault: that would load spaCy regardless
        settings["entity_extractor"] = spacy_extractor()
    return BridgeRAG.load(path, embedder=embedder, store=store, **settings)


def _umg_build(
    documents: Sequence[Document],
    *,
    embedder: Any,
    store: ChunkStore | None = None,
    persist_directory: str | os.PathLike[str] | None = None,
    **settings: Any,
) -> UMGRAG:
    return UMGRAG.from_documents(
        documents,
        embedder=embedder,
        store=store,
        persist_directory=persist_directory,
        show_progress=False,
        **settings,
    )


def _umg_load(path: Any, *, embedder: Any, store: ChunkStore | None = None, **settings: Any) -> UMGRAG:
    return UMGRAG.load(path, embedder=embedder, store=store, **settings)


def _bubble_build(
    documents: Sequence[Document],
    *,
    embedder: Any,
    store: ChunkStore | None = None,
    persist_directory: str | os.PathLike[str] | None = None,
    **settings: Any,
) -> BubbleRAG:
    if "triple_extractor" not in settings:
        settings["triple_extractor"] = spacy_triples()
    return BubbleRAG.from_documents(
        documents,
        embedder=embedder,
        store=store,
        persist_directory=persist_directory,
        show_progress=False,
        **settings,
    )


def _bubble_load(path: Any, *, embedder: Any, store: ChunkStore | None = None, **settings: Any) -> BubbleRAG:
    settings.setdefault("triple_extractor", None)
    if settings["triple_extractor"] is None:
        settings["triple_extractor"] = spacy_triples()
    return BubbleRAG.load(path, embedder=embedder, store=store, **settings)


def _lc_bubble(strategy: Any, k: int) -> Any:
    from langchain_bridge import BubbleRetriever

    return BubbleRetriever(strategy=strategy, k=k)


def _li_bubble(strategy: Any, k: int, search_kwargs: Mapping[str, Any]) -> Any:
    from llama_index_bridge import BubbleRetriever

    return BubbleRetriever(strategy, k=k, search_kwargs=search_kwargs)


def _lc_bubble_build(documents: Any, embedding: Any, **settings: Any) -> Any:
    from langchain_bridge import BubbleRetriever

    return BubbleRetriever.from_documents(documents, embedding=embedding, show_progress=False, **settings)


def _li_bubble_build(documents: Any, embed_model: Any, **settings: Any) -> Any:
    from llama_index_bridge import BubbleRetriever

    return BubbleRetriever.from_defaults(documents, embed_model=embed_model, show_progress=False, **settings)


def _lc_bubble_load(path: Any, embeddings: Any, k: int) -> Any:
    from langchain_bridge import BubbleRetriever

    return BubbleRetriever.load(path, embedding=embeddings, k=k)


def _li_bubble_load(path: Any, embed_model: Any, k: int) -> Any:
    from llama_index_bridge import BubbleRetriever

    return BubbleRetriever.from_persist_dir(path, embed_model=embed_model, similarity_top_k=k)


def _lc_bridge(strategy: Any, k: int) -> Any:
    from langchain_bridge import BridgeRetriever

    return BridgeRetriever(strategy=strategy, k=k)


def _li_bridge(strategy: Any, k: int, search_kwargs: Mapping[str, Any]) -> Any:
    from llama_index_bridge import BridgeRetriever

    return BridgeRetriever(strategy, k=k, search_kwargs=search_kwargs)


def _lc_umg(strategy: Any, k: int) -> Any:
    from langchain_bridge import UMGRetriever

    return UMGRetriever(strategy=strategy, k=k)


def _li_umg(strategy: Any, k: int, search_kwargs: Mapping[str, Any]) -> Any:
    from llama_index_bridge import UMGRetriever

    return UMGRetriever(strategy, k=k, search_kwargs=search_kwargs)


def _lc_bridge_build(documents: Any, embedding: Any, **settings: Any) -> Any:
    from langchain_bridge import BridgeRetriever

    return BridgeRetriever.from_documents(documents, embedding=embedding, show_progress=False, **settings)


def _li_bridge_build(documents: Any, embed_model: Any, **settings: Any) -> Any:
    from llama_index_bridge import BridgeRetriever

    return BridgeRetriever.from_defaults(documents, embed_model=embed_model, show_progress=False, **settings)


def _lc_umg_build(documents: Any, embedding: Any, **settings: Any) -> Any:
    from langchain_bridge import UMGRetriever

    return UMGRetriever.from_documents(documents, embedding=embedding, show_progress=False, **settings)


def _li_umg_build(documents: Any, embed_model: Any, **settings: Any) -> Any:
    from llama_index_bridge import UMGRetriever

    return UMGRetriever.from_defaults(documents, embed_model=embed_model, show_progress=False, **settings)


def _lc_bridge_load(path: Any, embeddings: Any, k: int) -> Any:
    from langchain_bridge import BridgeRetriever

    return BridgeRetriever.load(path, embedding=embeddings, k=k)


def _li_bridge_load(path: Any, embed_model: Any, k: int) -> Any:
    from llama_index_bridge import BridgeRetriever

    return BridgeRetriever.from_persist_dir(path, embed_model=embed_model, similarity_top_k=k)


def _lc_umg_load(path: Any, embeddings: Any, k: int) -> Any:
    from langchain_bridge import UMGRetriever

    return UMGRetriever.load(path, embedding=embeddings, k=k)


def _li_umg_load(path: Any, embed_model: Any, k: int) -> Any:
    from llama_index_bridge import UMGRetriever

    return UMGRetriever.from_persist_dir(path, embed_model=embed_model, similarity_top_k=k)


STRATEGIES: tuple[StrategyCase, ...] = (
    StrategyCase(
        name="bridge",
        build=_bridge_build,
        load=_bridge_load,
        langchain=_lc_bridge,
        llama_index=_li_bridge,
        langchain_build=_lc_bridge_build,
        llama_index_build=_li_bridge_build,
        langchain_load=_lc_bridge_load,
        llama_index_load=_li_bridge_load,
        live_documents=lambda rag: set(rag._table.doc_rows),
        options=({"depth": 0}, {"depth": 3}, {"include_abstracts": True}),
        corpus_size=46,
        wiring_kwargs=lambda: {"entity_extractor": RuleBasedEntityExtractor()},
        bad_options=(
            ({"depth": -1}, ValueError, "depth must be >= 0, got -1"),
            ({"depth": "2"}, TypeError, "depth must be an int, got str"),
            ({"parent_promotion": True}, TypeError, "unknown retrieve option(s): parent_promotion"),
        ),
    ),
    StrategyCase(
        name="umg",
        build=_umg_build,
        load=_umg_load,
        langchain=_lc_umg,
        llama_index=_li_umg,
        langchain_build=_lc_umg_build,
        llama_index_build=_li_umg_build,
        langchain_load=_lc_umg_load,
        llama_index_load=_li_umg_load,
        live_documents=lambda rag: {
            d for d, alive in zip(rag._units.doc_ids, rag._table.alive, strict=True) if alive
        },
        options=({"parent_promotion": True}, {"parent_promotion": False}),
        corpus_size=8,
        bad_options=(({"depth": 2}, TypeError, "unknown retrieve option(s): depth"),),
    ),
    StrategyCase(
        name="bubble",
        build=_bubble_build,
        load=_bubble_load,
        langchain=_lc_bubble,
        llama_index=_li_bubble,
        langchain_build=_lc_bubble_build,
        llama_index_build=_li_bubble_build,
        langchain_load=_lc_bubble_load,
        llama_index_load=_li_bubble_load,
        live_documents=lambda rag: set(rag._table.doc_rows),
        options=({"include_triples": True}, {"include_triples": False}),
        corpus_size=8,
        bad_options=(({"depth": 2}, TypeError, "unknown retrieve option(s): depth"),),
    ),
)


def case_named(name: str) -> StrategyCase:
    """The table entry called ``name``.

    Raises:
        KeyError: No strategy of that name is in the table.
    """
    for case in STRATEGIES:
        if case.name == name:
            return case
    raise KeyError(f"no strategy {name!r} in the reliability table; known: {[c.name for c in STRATEGIES]}")
