"""Tests for the pieces of the comparison run: registry, embedding cache, peak memory, RAGAS glue, plot."""

from __future__ import annotations

import math
import mmap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest

import core.evaluation.registry as bench_registry
from core.embed import embed_query_with
from core.evaluation import Dataset, Question, RunResult, demo_dataset, markdown_table, summarize_runs
from core.evaluation.corpus import BenchContext, SharedCorpus
from core.evaluation.embedding_cache import EmbeddingCache
from core.evaluation.peak_memory import measure_peak_rss
from core.evaluation.plot import plot_recall_latency
from core.evaluation.registry import (
    STRATEGIES,
    Query,
    StrategySpec,
    from_documents,
    register,
    resolve_strategies,
)
from core.evaluation.runner import Session, run_suite, suite_output
from core.evaluation.suite import Suite, Variant, Versus
from core.types import Document, Retrieved
from tests.core.conftest import CountingEmbedder, hash_embedder

# ---------------------------------------------------------------- registry


def test_registry_lists_ours_baselines_peers_and_bubble() -> None:
    assert list(STRATEGIES)[:7] == ["dense", "bm25", "hybrid", "two-hop", "bridge", "umg", "umgp"]
    assert STRATEGIES["bubble"].requires == ("core.strategies.bubble",)
    assert STRATEGIES["umg"].key == STRATEGIES["umgp"].key == "umg"
    assert {n for n, s in STRATEGIES.items() if s.family == "peer"} == {
        "langchain-ensemble",
        "llamaindex-fusion",
    }


def test_resolve_rejects_unknown_and_repeated_names() -> None:
    with pytest.raises(ValueError, match=r"unknown strategy 'nope'; choose from dense, bm25"):
        resolve_strategies(["dense", "nope"])
    with pytest.raises(ValueError, match="listed twice"):
        resolve_strategies(["dense", "dense"])
    with pytest.raises(ValueError, match="no strategies given"):
        resolve_strategies([])


def test_resolve_skips_a_strategy_whose_module_does_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = StrategySpec("ghost", "not written yet", lambda ctx: None, requires=("core.no_such_module_xyz",))
    monkeypatch.setitem(STRATEGIES, "ghost", spec)
    specs, skipped = resolve_strategies(["dense", "ghost"])
    assert [s.name for s in specs] == ["dense"]
    assert "core.no_such_module_xyz does not import (ModuleNotFoundError" in skipped["ghost"]


def test_register_rejects_taken_and_malformed_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_registry, "STRATEGIES", dict(STRATEGIES))
    with pytest.raises(ValueError, match="already registered"):
        register(StrategySpec("dense", "again", lambda ctx: None))
    with pytest.raises(ValueError, match="without commas or spaces"):
        register(StrategySpec("a,b", "bad", lambda ctx: None))
    register(StrategySpec("extra", "one more", lambda ctx: None))
    assert "extra" in bench_registry.STRATEGIES


class _FakeStrategy:
    """Records how ``from_documents`` was called (wiring only)."""

    calls: ClassVar[list[dict[str, Any]]] = []

    @classmethod
    def from_documents(
        cls, documents: Sequence[Document], *, store: Any, embedder: Any, show_progress: bool = True
    ) -> _FakeStrategy:
        cls.calls.append(
            {
                "documents": list(documents),
                "store": store,
                "embedder": embedder,
                "show_progress": show_progress,
            }
        )
        return cls()


def test_from_documents_builder_passes_shared_documents_embedder_and_a_new_store(tmp_path: Path) -> None:
    import sys
    import types

    module = types.ModuleType("fake_bench_strategy_module")
    module.FakeStrategy = _FakeStrategy  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        docs = [Document("Alpha beta.", id="a")]
        cache = EmbeddingCache(hash_embedder())
        ctx = BenchContext(
            documents=docs,
            embedder=cache,
            corpus=SharedCorpus(store=None),  # type: ignore[arg-type]
            chroma_path=tmp_path / "chroma",
            k=3,
            show_progress=False,
        )
        build = from_documents(module.__name__, "FakeStrategy")
        build(ctx)
        build(ctx)
    finally:
        del sys.modules[module.__name__]
    first, second = _FakeStrategy.calls[-2:]
    assert first["documents"] == docs
    assert first["embedder"] is cache
    assert first["show_progress"] is False
    assert first["store"].name == "fakestrategy"
    assert second["store"].name == "fakestrategy-2", "each build gets its own collection"


# ---------------------------------------------------------------- the runner and its suites


@dataclass(frozen=True)
class _ToyConfig:
    boost: float = 0.0


class _Toy:
    """A strategy double over the shared chunks: records every call (wiring only)."""

    built: ClassVar[list[_Toy]] = []

    def __init__(self, ctx: BenchContext) -> None:
        self.corpus = ctx.corpus
        self.settings = dict(ctx.settings)
        self.config = _ToyConfig()
        self.report = SimpleNamespace(seconds={"own step": 0.25}, counts={"things": 3})
        self.calls: list[tuple[str, dict[str, Any], float]] = []
        _Toy.built.append(self)

    def _results(self, k: int | None) -> list[Retrieved]:
        return [
            Retrieved(id=cid, text=text, score=1.0, metadata=meta)
            for cid, text, meta in list(self.corpus.rows())[: k or 4]
        ]

    def retrieve(self, query: str, k: int | None = None, **options: Any) -> list[Retrieved]:
        self.calls.append(("text", options, self.config.boost))
        return self._results(k)

    def retrieve_by_vector(
        self, query: str, query_vector: Any, k: int | None = None, **options: Any
    ) -> list[Retrieved]:
        assert len(query_vector) == 32
        self.calls.append(("vector", options, self.config.boost))
        return self._results(k)


def _toy_vector_only(index: Any, question: str, vector: Any, k: int, /, **options: Any) -> list[Retrieved]:
    index.calls.append(("custom", options, index.config.boost))
    return list(index._results(k))[::-1]


def _mini() -> Dataset:
    passages = [
        {"id": "a", "title": "Alpha", "text": "Alpha founded the beta guild."},
        {"id": "b", "title": "Beta", "text": "The beta guild trades salt."},
        {"id": "c", "title": "Gamma", "text": "Gamma is a river town."},
    ]
    questions = [
        Question(
            id="q1", question="Who founded the beta guild?", answer="Alpha", aliases=(), supporting_ids=("a",)
        ),
        Question(
            id="q2", question="What does the guild trade?", answer="salt", aliases=(), supporting_ids=("b",)
        ),
    ]
    return Dataset(name="mini", passages=passages, questions=questions)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    _Toy.built.clear()
    monkeypatch.setitem(
        STRATEGIES,
        "toy",
        StrategySpec("toy", "a toy", _Toy, options={"flavour": "plain"}, reuses="collection"),
    )


def _toy_suite(**kwargs: Any) -> Suite:
    variants = (
        Variant("toy"),
        Variant("toy", "toy deep", options={"depth": 2}),
        Variant("toy", "toy boosted", config={"boost": 1.0}),
        Variant("toy", "toy custom", query=Query(by_vector=_toy_vector_only), build_steps=("own step",)),
    )
    options: dict[str, Any] = {
        "versus": (Versus("R@5 - toy", "recall@5", "toy"), Versus("p50 / toy", "p50_ms", "toy", ratio=True)),
        "settings": {"toy": {"colour": "blue"}},
        "inspect": {"toy": lambda index: {"toy figures": {"calls so far": len(index.calls)}}},
        **kwargs,
    }
    return Suite("toy", variants, **options)


@pytest.mark.usefixtures("toy")
def test_a_suite_runs_its_variants_on_one_build_with_their_options_and_config(tmp_path: Path) -> None:
    seen: list[str] = []

    def extend(session: Session) -> dict[str, Any]:
        seen.append(session.row("toy deep").variant.name)
        return {"extension": {"questions": len(session.questions)}}

    suite = _toy_suite(extend=extend)
    result = run_suite(_mini(), suite, embedder=hash_embedder(), show_progress=False, notice=lambda m: None)
    assert len(_Toy.built) == 1, "one build serves every row"
    index = _Toy.built[0]
    assert index.settings == {"colour": "blue"}, "the suite's settings reach the builder"
    assert index.config == _ToyConfig(), "the config is restored after the variant"
    by_kind: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for kind, options, boost in index.calls:
        by_kind.setdefault(kind, []).append((options, boost))
    # 4 rows x (1 warm-up + 2 questions): text then vector per question, custom rows by vector only
    assert {"flavour": "plain", "depth": 2} in [o for o, _ in by_kind["text"]]
    assert all(o["flavour"] == "plain" for o, _ in by_kind["text"] + by_kind["vector"])
    assert sum(b == 1.0 for _, b in by_kind["text"]) == 3, "the boosted row (warm-up + 2) saw its config"
    assert len(by_kind["custom"]) == 3 + 2, "warm-up + 2 timed (embedding included) + 2 without"
    rows = {r["strategy"]: r for r in result.rows}
    assert list(rows) == ["toy", "toy deep", "toy boosted", "toy custom"]
    assert all(r["p50_no_embed_ms"] > 0 for r in rows.values())
    assert rows["toy deep"]["R@5 - toy"] == 0.0
    assert rows["toy"]["p50 / toy"] == 1.0
    assert rows["toy"]["build_alone_s"] == pytest.approx(rows["toy"]["build_s"] + result.shared["build_s"])
    assert rows["toy custom"]["build_alone_s"] == 0.25, "only the steps the row needs"
    build = result.builds["toy"]
    assert set(build["steps_s"]) == {"chunk", "embed", "store", "own step"}
    assert build["counts"] == {"things": 3}
    assert build["inspected"] == {"toy figures": {"calls so far": 0}}
    assert result.extras == {"extension": {"questions": 2}}
    assert seen == ["toy deep"]
    out = suite_output(result, suite)
    assert out["toy figures"] == {"calls so far": 0}
    assert out["extension"] == {"questions": 2}
    assert out["build"]["toy_build_s"] == rows["toy"]["build_alone_s"]
    assert out["table"].splitlines()[0].endswith("| build_s | R@5 - toy | p50 / toy |")


@pytest.mark.usefixtures("toy")
def test_a_suite_can_time_only_with_the_embedding() -> None:
    suite = _toy_suite(without_embedding=False)
    result = run_suite(_mini(), suite, embedder=hash_embedder(), show_progress=False, notice=lambda m: None)
    assert not any(kind == "vector" for kind, _, _ in _Toy.built[0].calls)
    assert all("p50_no_embed_ms" not in r for r in result.rows)


@pytest.mark.usefixtures("toy")
def test_a_strict_suite_raises_what_broke_and_a_lenient_one_reports_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(ctx: BenchContext) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setitem(STRATEGIES, "broken", StrategySpec("broken", "raises", broken))
    rows = (Variant("toy"), Variant("broken"))
    with pytest.raises(RuntimeError, match="boom"):
        run_suite(_mini(), Suite("toy", rows), embedder=hash_embedder(), show_progress=False, notice=print)
    lenient = run_suite(
        _mini(), Suite("toy", rows, strict=False), embedder=hash_embedder(), show_progress=False, notice=print
    )
    assert lenient.failed == {"broken": "build raised RuntimeError: boom"}
    assert [r["strategy"] for r in lenient.rows] == ["toy"]
    ghost = StrategySpec("ghost", "not written yet", lambda ctx: None, requires=("core.no_such_module_xyz",))
    monkeypatch.setitem(STRATEGIES, "ghost", ghost)
    with pytest.raises(ValueError, match="the toy suite needs ghost, which cannot run here"):
        run_suite(_mini(), Suite("toy", (Variant("ghost"),)), embedder=hash_embedder(), notice=print)


def test_suites_reject_repeated_rows_and_bad_k() -> None:
    with pytest.raises(ValueError, match="'dense' is listed twice"):
        Suite("x", (Variant("dense"), Variant("dense")))
    Suite("x", (Variant("dense"), Variant("dense", "dense again")))
    with pytest.raises(ValueError, match="k must be >= 1"):
        Suite("x", (Variant("dense"),), k=0)
    with pytest.raises(TypeError, match="k must be an int"):
        Suite("x", (Variant("dense"),), ks=("5",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a Query needs text or by_vector"):
        Query()


def test_the_suites_are_registry_configurations() -> None:
    from core.evaluation.bridge_suite import PAPER_VARIANT, bridge_suite
    from core.evaluation.bubble_suite import bubble_suite
    from core.evaluation.comparison import comparison_suite
    from core.evaluation.umg_suite import umg_suite

    for suite in (bridge_suite(), umg_suite(splade=True), bubble_suite(), comparison_suite()):
        assert {v.strategy for v in suite.variants} <= set(STRATEGIES), suite.name
    bridge = bridge_suite((1, 3))
    names = [v.name for v in bridge.variants]
    assert names[:4] == ["dense", "paper: filter only (d=0)", "paper: + forest d=1", "paper: + forest d=3"]
    assert names[-3:] == ["default at d=0", "default at d=1", "default at d=3"]
    paper = bridge.variants[3]
    assert paper.options == {"depth": 3}
    assert paper.config == PAPER_VARIANT
    assert PAPER_VARIANT["link_hops"] == 0, "the paper's Algorithm 1 has no entity-hop walk"
    walks = [v for v in bridge.variants if v.name.startswith("+ entity-hop walk")]
    assert [v.config for v in walks] == [{"link_hops": h} for h in (1, 2, 3)]
    unpapered = [v.name for v in bridge_suite((2,), paper_variant=False).variants]
    assert not any(n.startswith("paper") for n in unpapered)
    umg = umg_suite(splade=True)
    assert "splade (g=8)" in [v.name for v in umg.variants]
    assert umg.settings == {"umg": {"splade": True}}
    assert umg_suite().settings == {}
    everything = comparison_suite(k=3)
    assert [v.name for v in everything.variants] == list(STRATEGIES)
    assert (everything.ks, everything.answer_k, everything.without_embedding, everything.strict) == (
        (1, 2, 3, 10),
        3,
        False,
        False,
    )
    assert everything.k == 10, "ten results per query, so recall@10 is measured"
    assert [v.column for v in everything.versus] == [
        "R@3 - dense",
        "R@3 - two-hop",
        "words@3 / dense",
        "p50 / dense",
    ]


def test_evaluation_imports_no_framework_eagerly() -> None:
    """LangChain, LlamaIndex and ragas are imported only inside the functions that use them."""
    import subprocess
    import sys

    modules = [
        f"core.evaluation.{m.stem}" for m in Path("core/evaluation").glob("*.py") if m.stem != "__init__"
    ]
    assert len(modules) >= 15
    code = (
        "import sys, core, core.app.cli, core.evaluation, " + ", ".join(modules) + "; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain', 'langchain_core', "
        "'langchain_community', 'langchain_classic', 'langchain_chroma', 'llama_index', 'ragas'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- embedding cache


def test_embedding_cache_embeds_each_text_once_and_accounts_for_hits() -> None:
    inner = CountingEmbedder(hash_embedder())
    cache = EmbeddingCache(inner)
    with cache.account() as first:
        a = cache.embed_documents(["one two", "three", "one two"])
    assert inner.documents_embedded == 2
    assert (first.misses, first.hits) == (2, 0)
    assert first.miss_seconds > 0
    with cache.account() as second:
        b = cache.embed_documents(["three", "four", "one two"])
    assert inner.documents_embedded == 3, "only 'four' is new"
    assert (second.misses, second.hits) == (1, 2)
    assert second.hit_seconds > 0
    np.testing.assert_array_equal(a[0], b[2])
    np.testing.assert_array_equal(a[1], b[0])
    cache.embed_query("one two")
    cache.embed_query("one two")
    assert inner.query_calls == 2, "queries are never cached"
    assert cache.embed_documents([]).shape == (0, cache.dimension)
    with pytest.raises(TypeError, match="single str"):
        cache.embed_documents("one two")


def test_embedding_cache_shares_one_model_call_between_a_query_and_new_texts() -> None:
    inner = CountingEmbedder(hash_embedder())
    inner.queries_as_documents = True  # type: ignore[attr-defined]
    cache = EmbeddingCache(inner)
    query, vectors = embed_query_with(cache, "who founded the guild", ["guild", "founder"])
    assert (inner.document_calls, inner.query_calls) == (1, 0), "one batch: the query and both texts"
    np.testing.assert_allclose(query, hash_embedder().embed_query("who founded the guild"), rtol=1e-6)
    np.testing.assert_allclose(vectors, hash_embedder().embed_documents(["guild", "founder"]), rtol=1e-6)
    cache.embed_documents(["guild"])
    assert inner.documents_embedded == 3, "the texts are cached"
    embed_query_with(cache, "who founded the guild", ["guild"])
    assert inner.query_calls == 1, "the query is never cached; the texts are"
    assert "who founded the guild" not in cache._vectors
    plain = CountingEmbedder(hash_embedder())  # no queries_as_documents: two calls
    embed_query_with(EmbeddingCache(plain), "q", ["t"])
    assert (plain.document_calls, plain.query_calls) == (1, 1)


# ---------------------------------------------------------------- peak memory


def test_peak_rss_sees_an_allocation_held_during_the_phase() -> None:
    # A fresh anonymous mapping, one byte written per page: the pages are new to the
    # process whatever the allocator kept from earlier tests (a NumPy array may reuse
    # pages that are already resident, and then RSS does not move).
    size = 64 * 1024 * 1024
    # The mapping outlives the measured block, so the end sample counts it even if
    # no timed sample ran while the pages were written.
    with mmap.mmap(-1, size) as block, measure_peak_rss() as mem:
        for offset in range(0, size, mmap.PAGESIZE):
            block[offset] = 1
    assert mem.added_mib >= 48
    assert mem.peak_mib >= mem.start_mib + 48
    assert mem.samples >= 2
    with pytest.raises(ValueError, match="interval_s must be positive"), measure_peak_rss(0):
        pass


# ---------------------------------------------------------------- evaluation helpers


def _q(qid: str, gold: Sequence[str], answer: str = "x") -> Question:
    return Question(
        id=qid, question=f"question {qid}?", answer=answer, aliases=(), supporting_ids=tuple(gold)
    )


def _r(doc_id: str, text: str = "") -> Retrieved:
    return Retrieved(
        id=f"{doc_id}::0", text=text or f"text of {doc_id}", score=1.0, metadata={"doc_id": doc_id}
    )


def test_summarize_runs_takes_answer_recall_and_words_at_answer_k() -> None:
    questions = [_q("q1", ["a"], answer="needle")]
    run = RunResult(name="s", results=[[_r("b", "one two"), _r("a", "the needle is here")]], latency_ms=[1.0])
    (at1,) = summarize_runs(questions, [run], ks=(1,), answer_k=1)
    (at2,) = summarize_runs(questions, [run], ks=(2,), answer_k=2)
    assert (at1["recall@1"], at1["answer_recall@1"], at1["context_words@1"]) == (0.0, 0.0, 2.0)
    assert (at2["recall@2"], at2["answer_recall@2"], at2["context_words@2"]) == (1.0, 1.0, 6.0)


def test_markdown_table_headers_and_nan() -> None:
    table = markdown_table([{"strategy": "s", "x": math.nan, "y": 0.5}], ["strategy", "x", "y"], {"y": "Y!"})
    assert table.splitlines()[0] == "| strategy | x | Y! |"
    assert table.splitlines()[2] == "| s | - | 0.500 |"


def test_demo_dataset_matches_the_demo_corpus(demo_docs: list[Document]) -> None:
    data = demo_dataset()
    assert data.name == "demo"
    assert len(data.questions) == 12
    texts = data.passage_texts()
    assert texts == {d.id: d.text for d in demo_docs}
    assert all(set(q.supporting_ids) <= set(texts) for q in data.questions)


# ---------------------------------------------------------------- RAGAS glue


def test_ragas_non_llm_metrics_score_ids_and_texts() -> None:
    from core.evaluation.ragas_eval import evaluate_retrieval

    passages = {
        "a": "Ilse Varga founded the Marrowick Observatory in 1874.",
        "b": "Tomas Brel directed the Halden Institute for thirty years.",
        "c": "Corvane is a city on the River Tessel.",
    }
    questions = [_q("q1", ["a", "b"]), _q("q2", ["c"])]
    results = [
        [_r("a", passages["a"]), _r("x", "Completely unrelated words about cooking pasta at home.")],
        [_r("y", "Nothing to see here, only a note about the weather today.")],
    ]
    scores = evaluate_retrieval(questions, results, passages, k=2)
    per = scores.per_question
    assert per[0]["id_based_context_recall"] == pytest.approx(0.5)
    assert per[0]["id_based_context_precision"] == pytest.approx(0.5)
    assert per[0]["non_llm_context_recall"] == pytest.approx(0.5), "passage a retrieved verbatim, b missing"
    assert per[1]["id_based_context_recall"] == 0.0
    assert per[1]["non_llm_context_recall"] == 0.0
    assert scores.means["id_based_context_recall"] == pytest.approx(0.25)
    assert scores.failed == dict.fromkeys(scores.means, 0)
    with pytest.raises(ValueError, match="gold passage 'c' is not in passages"):
        evaluate_retrieval(questions, results, {"a": "x", "b": "y"}, k=2)
    with pytest.raises(ValueError, match="pass embedder= with llm="):
        evaluate_retrieval(questions, results, passages, k=2, llm=lambda p: "x")


def test_ragas_llm_metrics_wiring(monkeypatch: pytest.MonkeyPatch) -> None:
    """With an LLM, answers are generated from the retrieved contexts and the LLM metrics are requested."""
    import ragas

    from core.evaluation import ragas_eval

    captured: dict[str, Any] = {}

    class _Result:
        def __init__(self, n: int, names: list[str]) -> None:
            self.scores = [dict.fromkeys(names, 0.5) for _ in range(n)]

    def fake_evaluate(dataset: Any, *, metrics: list[Any], **kwargs: Any) -> _Result:
        captured["samples"] = list(dataset)
        captured["metrics"] = [m.name for m in metrics]
        captured.update(kwargs)
        return _Result(len(captured["samples"]), captured["metrics"])

    monkeypatch.setattr(ragas, "evaluate", fake_evaluate)
    prompts: list[str] = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return " Marrowick "

    passages = {"a": "Ilse Varga founded the Marrowick Observatory."}
    scores = ragas_eval.evaluate_retrieval(
        [_q("q1", ["a"])], [[_r("a", passages["a"])]], passages, k=1, llm=llm, embedder=hash_embedder()
    )
    assert captured["metrics"] == [*ragas_eval.NON_LLM_METRICS, *ragas_eval.LLM_METRICS]
    assert captured["samples"][0].response == "Marrowick"
    assert "Ilse Varga founded the Marrowick Observatory." in prompts[0]
    assert "Question: question q1?" in prompts[0]
    assert captured["llm"] is llm
    assert captured["raise_exceptions"] is False
    vector = captured["embeddings"].embed_query("Marrowick")
    assert len(vector) == hash_embedder().dimension
    assert scores.means["faithfulness"] == 0.5


# ---------------------------------------------------------------- plot


def test_plot_writes_a_png_with_one_point_per_strategy(tmp_path: Path) -> None:
    rows = [
        {"strategy": "dense", "recall@5": 0.6, "p50_ms": 15.0, "family": "baseline"},
        {"strategy": "bridge", "recall@5": 0.7, "p50_ms": 18.0, "family": "ours"},
        {"strategy": "langchain-ensemble", "recall@5": 0.62, "p50_ms": 16.0, "family": "peer"},
    ]
    out = tmp_path / "plot.png"
    fig = plot_recall_latency(rows, out, k=5, title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["bridge", "dense", "langchain-ensemble"]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 3
    assert ax.get_ylabel() == "passage recall@5"
    with pytest.raises(ValueError, match="lacks 'recall@5'"):
        plot_recall_latency([{"strategy": "s", "p50_ms": 1.0}])
    with pytest.raises(ValueError, match="no rows"):
        plot_recall_latency([])


# ---------------------------------------------------------------- the shared corpus


def test_bridge_from_the_shared_collection_equals_bridge_from_documents(
    demo_docs: list[Document], embedder: Any, extractor: Any, tmp_path: Path
) -> None:
    """The comparison builds Bridge-RAG with ``from_store`` over the shared chunks; it must rank as
    ``from_documents`` does (same chunks, metadata, abstracts and entities)."""
    from core.evaluation.corpus import build_shared_corpus
    from core.store import ChunkStore
    from core.strategies.bridge import BridgeRAG

    docs = demo_docs[:16]
    cache = EmbeddingCache(embedder)
    corpus = build_shared_corpus(
        docs, cache, ChunkStore.persistent(tmp_path / "chroma", "shared_chunks"), show_progress=False
    )
    assert corpus.build_seconds > 0
    shared = BridgeRAG.from_store(
        corpus.store, embedder=cache, entity_extractor=extractor, show_progress=False
    )
    own = BridgeRAG.from_documents(
        docs,
        embedder=cache,
        entity_extractor=extractor,
        store=ChunkStore.persistent(tmp_path / "chroma", "own_chunks"),
        show_progress=False,
    )
    assert shared.report.counts == own.report.counts
    for question in ("Who founded the Marrowick Observatory?", "Which institute did Tomas Brel direct?"):
        a = [(r.id, round(r.score, 5)) for r in shared.retrieve(question, k=5)]
        b = [(r.id, round(r.score, 5)) for r in own.retrieve(question, k=5)]
        assert a == b
