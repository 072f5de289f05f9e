"""BubbleRAG: graph extraction, the query steps, LLM paths (scripted fakes), persistence, bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from core.llm import CallableLLM
from core.store import ChunkStore
from core.strategies.baselines import DenseRetriever
from core.strategies.bubble import BubbleConfig, BubbleRAG
from core.strategies.bubble.concepts import TermStatistics, llm_concepts, spacy_concepts
from core.strategies.bubble.kg import KnowledgeGraph
from core.strategies.bubble.triples import LLMTripleExtractor, SpacyTripleExtractor, Triple
from core.types import Document
from core.vector_index import VectorIndex
from tests.core.conftest import CachingEmbedder, hash_embedder, unique_name

NEW_DOCS = [
    Document(
        "Beatrix Olunde founded the Harwick Glassworks in Pellmire in 1902. "
        "The glassworks made lenses for lighthouses along the coast.",
        id="harwick-glassworks",
        metadata={"title": "Harwick Glassworks"},
    ),
    Document(
        "The Pellmire Choir was led by Rosalind Tarkey, who wrote the Pellmire Hymnal. "
        "The choir sang in Pellmire every winter.",
        id="pellmire-choir",
        metadata={"title": "Pellmire Choir"},
    ),
]


@pytest.fixture(scope="session")
def triples_extractor() -> SpacyTripleExtractor:
    return SpacyTripleExtractor()


@pytest.fixture(scope="session")
def bubble_small(
    small_docs: list[Document], embedder: CachingEmbedder, triples_extractor: SpacyTripleExtractor
) -> BubbleRAG:
    """Eight demo documents; shared, so tests must not modify it."""
    return BubbleRAG.from_documents(
        small_docs,
        embedder=embedder,
        triple_extractor=triples_extractor,
        store=ChunkStore.ephemeral(unique_name("bubble")),
        show_progress=False,
    )


@pytest.fixture
def make_bubble(
    embedder: CachingEmbedder, triples_extractor: SpacyTripleExtractor
) -> Callable[..., BubbleRAG]:
    def build(docs: list[Document], **kwargs: Any) -> BubbleRAG:
        kwargs.setdefault("embedder", embedder)
        kwargs.setdefault("triple_extractor", triples_extractor)
        kwargs.setdefault("show_progress", False)
        if "store" not in kwargs and "persist_directory" not in kwargs:
            kwargs["store"] = ChunkStore.ephemeral(unique_name())
        return BubbleRAG.from_documents(docs, **kwargs)

    return build


# ---------------------------------------------------------------------- triples and concepts
def test_spacy_triples_subject_verb_object_passive_conjunct_and_pronoun(
    triples_extractor: SpacyTripleExtractor,
) -> None:
    text = (
        "Marie Curie was born in Warsaw and studied physics in Paris. "
        "The Eiffel Tower was designed by Gustave Eiffel. She married Pierre Curie."
    )
    triples = triples_extractor.extract([text], titles=["Marie Curie"])[0]
    svo = {(t.head, t.relation, t.tail) for t in triples if t.kind == "svo"}
    assert ("Marie Curie", "born in", "Warsaw") in svo
    assert ("Marie Curie", "study", "physics") in svo, "the conjunct verb inherits the subject"
    assert ("The Eiffel Tower", "designed by", "Gustave Eiffel") in svo
    assert ("Marie Curie", "marry", "Pierre Curie") in svo, "a pronoun subject reads as the title"
    cooc = [t for t in triples if t.kind == "cooccurrence"]
    assert any({t.head, t.tail} == {"Marie Curie", "Warsaw"} for t in cooc)


def test_spacy_triples_reject_mismatched_titles(triples_extractor: SpacyTripleExtractor) -> None:
    with pytest.raises(ValueError, match="one per text"):
        triples_extractor.extract(["a", "b"], titles=["x"])


def test_llm_triples_parse_repair_and_fall_back(triples_extractor: SpacyTripleExtractor) -> None:
    answers = iter(
        [
            # realistic answer in a code fence, with a trailing comma and one bad item
            '```json\n[{"head": "Ilse Varga", "relation": "founded", "tail": "Marrowick Observatory"},'
            ' {"head": "", "relation": "x", "tail": "y"},]\n```',
            "I cannot help with that.",  # malformed, and the retry too:
            "still no JSON",
        ]
    )
    llm = CallableLLM(lambda prompt: next(answers))
    ex = LLMTripleExtractor(llm, fallback=triples_extractor)
    out = ex.extract(
        ["Ilse Varga founded the Marrowick Observatory.", "Tomas Brel was taught by Ilse Varga in Corvane."]
    )
    assert out[0] == [Triple("Ilse Varga", "founded", "Marrowick Observatory", "llm")]
    assert ex.failures == 1
    assert out[1], "spaCy took over"
    assert all(t.kind in ("svo", "cooccurrence") for t in out[1])


def test_spacy_concepts_weights_rare_words_higher(triples_extractor: SpacyTripleExtractor) -> None:
    stats = TermStatistics()
    stats.add(["the city has a river"] * 50 + ["Marrowick lies on the river"])
    concepts = spacy_concepts("Which city did Marrowick trade with?", triples_extractor.nlp, stats)
    assert concepts[0].kind == "query"
    by_text = {c.text: c for c in concepts[1:]}
    assert "Marrowick" in by_text
    assert all(0 < c.weight <= 1 for c in concepts)
    assert by_text["Marrowick"].weight > max(
        (c.weight for t, c in by_text.items() if t != "Marrowick"), default=0
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"concepts": [{"text": "Ilse Varga", "weight": 0.9}, {"text": "student", "weight": "high"}]}',
         [("student", 1.0), ("Ilse Varga", 0.9)]),  # heaviest first
        ('{"concepts": ["observatory founder", 42, {"text": ""}]}', [("observatory founder", 1.0)]),
        ('{"concepts": [{"text": "x", "weight": 7}]}', [("x", 1.0)]),
        ('{"concepts": []}', None),
        ("no json here", None),
        ('["a list, not an object"]', None),
    ],
)  # fmt: skip
def test_llm_concepts_parsing(answer: str, expected: list[tuple[str, float]] | None) -> None:
    got = llm_concepts("Who taught Tomas Brel?", CallableLLM(lambda p: answer))
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got[0].kind == "query"
        assert [(c.text, c.weight) for c in got[1:]] == expected


# ---------------------------------------------------------------------- building and querying
def test_build_report_and_graph_contents(bubble_small: BubbleRAG) -> None:
    counts = bubble_small.report.counts
    assert counts["documents"] == 8
    assert counts["chunks"] == bubble_small.num_chunks > 8
    assert counts["nodes"] > 50
    assert counts["edges"] > counts["nodes"] / 2
    kg = bubble_small.kg
    assert kg.node_id("Ilse Varga") is not None
    assert kg.node_id("ilse varga") == kg.node_id("Ilse Varga")
    assert kg.node_matrix.shape == (kg.num_nodes, 384)
    assert kg.edge_matrix.shape == (len(kg.edge_head), 384)
    assert np.allclose(np.linalg.norm(kg.edge_matrix, axis=1), 1.0, atol=1e-4)
    assert {"svo", "cooccurrence", "title"} <= set(kg.edge_kind)
    assert all(0 <= c < bubble_small.num_chunks for c in kg.edge_chunk)


def test_retrieve_returns_evidence_chunks_with_provenance(bubble_small: BubbleRAG) -> None:
    q = "Which institute did the student of the astronomer who founded Marrowick's observatory later direct?"
    res = bubble_small.retrieve(q, k=4)
    assert len(res) == 4
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    top = res[0].metadata
    assert top["strategy"] == "bubble"
    assert top["found_by"] == "evidence"
    assert top["ceg_rank"] >= 0
    assert top["evidence_triples"]
    assert top["covered_concepts"]
    assert top["concepts"][0]["kind"] == "query"
    # score = cosine + lexical_weight x lexical + evidence_weight x CEG evidence + the walk's bonus
    lexical = bubble_small.config.lexical_weight * top["lexical_score"]
    assert top["score"] == pytest.approx(top["cosine"] + lexical + 0.1 * top["evidence"] + top["hop_score"])
    assert (top["hop"] >= 1) == bool(top["hop_entities"]) == (top["hop_score"] > 0)
    assert {"marrowick-observatory", "ilse-varga"} & {r.metadata["doc_id"] for r in res}


def test_evidence_graphs_connect_concepts(bubble_small: BubbleRAG) -> None:
    cegs = bubble_small.evidence_graphs("Who founded the Marrowick Observatory on Kestrel Hill?")
    assert 1 <= len(cegs) <= bubble_small.config.top_cegs
    assert [c.score for c in cegs] == sorted(c.score for c in cegs)
    best = cegs[0]
    assert best.kind == "meeting"
    assert len(best.covered) >= 2
    kg = bubble_small.kg
    g = nx.MultiGraph()
    g.add_nodes_from(best.nodes)
    g.add_edges_from((kg.edge_head[e], kg.edge_tail[e]) for e in best.edges)
    assert nx.is_connected(g)


def test_include_triples_appends_the_evidence_graph(bubble_small: BubbleRAG) -> None:
    res = bubble_small.retrieve("Who founded the Marrowick Observatory?", k=2, include_triples=True)
    assert len(res) == 3
    extra = res[-1]
    assert extra.metadata["type"] == "evidence_graph"
    assert extra.id == "bubble::evidence"
    assert extra.text.count("\n") >= 1


def test_retrieval_is_deterministic(bubble_small: BubbleRAG) -> None:
    q = "who built the telescope at varga's observatory?"
    a = [(r.id, r.score) for r in bubble_small.retrieve(q, k=5)]
    assert a == [(r.id, r.score) for r in bubble_small.retrieve(q, k=5)]


def test_query_without_anchors_falls_back_to_dense(bubble_small: BubbleRAG) -> None:
    res = bubble_small.retrieve("zzzz qqqq", k=3)
    assert len(res) == 3
    assert all(r.metadata["found_by"] == "dense" for r in res)
    assert res[0].metadata["fallback"] is not None


def test_tiny_local_neighbourhood_still_answers(
    bubble_small: BubbleRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    monkeypatch.setattr(bubble_small, "config", replace(bubble_small.config, max_local_nodes=1, hops=0))
    res = bubble_small.retrieve("Who founded the Marrowick Observatory on Kestrel Hill?", k=2)
    assert len(res) == 2


def test_bubble_beats_or_matches_dense_on_demo_questions(
    demo_docs: list[Document],
    demo_questions: list[dict[str, Any]],
    make_bubble: Callable[..., BubbleRAG],
    embedder: CachingEmbedder,
) -> None:
    """Multi-hop demo questions: evidence graphs must find at least the gold documents dense finds.

    Measured as before the walk (evidence graphs plus a dense pool of 20): the demo corpus is
    one town's, every document names the same few people and places, and there the walk
    (tuned on real multi-hop corpora, where it adds 12-33 points of recall@5) costs about one
    of the 12 questions.
    """
    bubble = make_bubble(demo_docs, link_hops=0, dense_pool=20)
    assert bubble.store is not None
    dense = DenseRetriever(bubble.store, embedder)  # the same chunks, the same vectors

    def recall(fn: Callable[[str], list[Any]]) -> float:
        total = 0.0
        for q in demo_questions:
            got = {r.metadata["doc_id"] for r in fn(q["question"])}
            total += len(got & set(q["supporting_ids"])) / len(q["supporting_ids"])
        return total / len(demo_questions)

    b, d = recall(lambda q: bubble.retrieve(q, k=4)), recall(lambda q: dense.retrieve(q, k=4))
    assert b >= d, f"bubble recall@4 {b:.3f} < dense {d:.3f}"


# ---------------------------------------------------------------------- LLM at query time
def test_llm_concepts_and_expansion_are_used(
    small_docs: list[Document], make_bubble: Callable[..., BubbleRAG]
) -> None:
    prompts: list[str] = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        if "List the concepts" in prompt:
            return (
                '{"concepts": [{"text": "Ilse Varga", "weight": 1.0}, '
                '{"text": "observatory", "weight": 0.5}]}'
            )
        if "Candidate facts" in prompt:
            return '{"useful": [0, 1, 99, "x"]}'
        return "[]"

    rag = make_bubble(small_docs[:3], triple_extractor=SpacyTripleExtractor(), llm=llm)
    cegs = rag.evidence_graphs("Who founded the observatory?")
    assert any("List the concepts" in p for p in prompts)
    assert any("Candidate facts" in p for p in prompts)
    assert any(c.expanded_edges for c in cegs)
    assert all(e in range(len(rag.kg.edge_head)) for c in cegs for e in c.expanded_edges)
    res = rag.retrieve("Who founded the observatory?", k=2)
    assert res[0].metadata["concepts"][1]["text"] == "Ilse Varga"


def test_malformed_llm_answers_fall_back_to_the_offline_path(
    small_docs: list[Document], make_bubble: Callable[..., BubbleRAG]
) -> None:
    calls = {"n": 0}

    def llm(prompt: str) -> str:
        calls["n"] += 1
        return "Sure! Here are some thoughts, but no JSON."

    rag = make_bubble(small_docs[:3], llm=llm)
    res = rag.retrieve("Who founded the Marrowick Observatory?", k=2)
    assert len(res) == 2
    assert calls["n"] > 0
    assert res[0].metadata["concepts"][0]["kind"] == "query"
    assert any(c["kind"] in ("entity", "noun_chunk") for c in res[0].metadata["concepts"])


# ---------------------------------------------------------------------- updates and persistence
def test_add_and_delete_documents(make_bubble: Callable[..., BubbleRAG], small_docs: list[Document]) -> None:
    rag = make_bubble(small_docs[:3])
    edges_before = rag.kg.num_edges
    assert rag.add_documents(NEW_DOCS) == ["harwick-glassworks", "pellmire-choir"]
    assert rag.kg.node_id("Rosalind Tarkey") is not None
    assert rag.retrieve("Who led the Pellmire Choir?", k=1)[0].metadata["doc_id"] == "pellmire-choir"
    removed = rag.delete_documents(["pellmire-choir"])
    assert removed >= 1
    assert rag.kg.num_edges < edges_before + sum(1 for _ in rag.kg.edge_alive) - edges_before
    for r in rag.retrieve("Who led the Pellmire Choir?", k=10):
        assert r.metadata["doc_id"] != "pellmire-choir"
    assert rag.delete_documents(["no-such-doc"]) == 0
    with pytest.raises(TypeError, match="list"):
        rag.delete_documents("harwick-glassworks")  # type: ignore[arg-type]


def test_save_load_round_trip_and_corruption(
    make_bubble: Callable[..., BubbleRAG],
    small_docs: list[Document],
    embedder: CachingEmbedder,
    tmp_path: Path,
) -> None:
    rag = make_bubble(small_docs[:4], persist_directory=tmp_path / "idx")
    q = "Who founded the Marrowick Observatory?"
    before = [(r.id, round(r.score, 5)) for r in rag.retrieve(q, k=3)]
    rag.close()  # one writer per index directory: the builder hands over to the loaded copy
    loaded = BubbleRAG.load(tmp_path / "idx", embedder=embedder)
    assert [(r.id, round(r.score, 5)) for r in loaded.retrieve(q, k=3)] == before
    assert loaded.kg.num_edges == rag.kg.num_edges
    loaded.add_documents(NEW_DOCS[:1])  # autosaves
    again = BubbleRAG.load(tmp_path / "idx", embedder=embedder)
    assert again.kg.node_id("Beatrix Olunde") is not None
    # a damaged current generation is a clear error (never a silent fallback)
    root = tmp_path / "idx" / "bubble"
    current = (root / "CURRENT").read_text().strip()
    _flip_byte(root / current / "kg.graph.bin")
    with pytest.raises(ValueError, match=r"kg\.graph\.bin.*corrupted"):
        BubbleRAG.load(tmp_path / "idx", embedder=embedder)


def test_graph_anchor_search_agrees_with_exact_and_follows_updates(
    make_bubble: Callable[..., BubbleRAG],
    small_docs: list[Document],
    embedder: CachingEmbedder,
    tmp_path: Path,
) -> None:
    exact = make_bubble(small_docs)
    graphed = make_bubble(
        small_docs,
        config=BubbleConfig(anchor_exact_below=2, anchor_ef_search=2048),  # the list covers the graph
        persist_directory=tmp_path / "idx",
    )
    nodes, edges = graphed.kg.anchor_indexes(2)
    assert nodes.uses_engine
    assert edges.uses_engine
    assert not exact.kg.anchor_indexes()[0].uses_engine
    for q in ["Who founded the Marrowick Observatory?", "Which institute did Tomas Brel direct?"]:
        assert [r.id for r in graphed.retrieve(q, k=4)] == [r.id for r in exact.retrieve(q, k=4)]
    # the saved graphs are adopted on load, and new nodes become anchors after an update
    graphed.close()
    loaded = BubbleRAG.load(tmp_path / "idx", embedder=embedder)
    assert np.array_equal(loaded.kg.anchor_indexes(2)[0].rows, nodes.rows)
    assert loaded.kg.anchor_indexes(2)[0].uses_engine
    loaded.add_documents(NEW_DOCS[:1])
    grown, grown_edges = loaded.kg.anchor_indexes(2)
    assert len(grown) == loaded.kg.num_nodes > len(nodes)
    assert len(grown_edges) >= len(edges)
    beatrix = loaded.kg.node_id("Beatrix Olunde")
    ids, _ = grown.search(loaded.kg.node_matrix[[beatrix]], loaded.kg.node_matrix, 1)
    assert ids[0, 0] == beatrix
    # a deleted document's edges die, its own nodes lose their names and vectors, and the
    # anchor indexes are rebuilt without them (no deleted vector stays anywhere)
    dead_before = int((~loaded.kg.live_edges).sum())
    loaded.delete_documents([NEW_DOCS[0].id])
    assert int((~loaded.kg.live_edges).sum()) > dead_before
    assert loaded.kg.node_id("Beatrix Olunde") is None
    assert not loaded.kg.node_matrix[beatrix].any()
    assert loaded.kg.anchor_indexes(2)[1] is not grown_edges
    hits = loaded.retrieve("Who founded the Harwick Glassworks?", k=4)
    assert hits
    assert NEW_DOCS[0].id not in {r.metadata["doc_id"] for r in hits}
    # the rebuild covers the live rows only, so its cost follows the live graph
    nodes_after, edges_after = loaded.kg.anchor_indexes(2)
    assert beatrix not in set(nodes_after.rows.tolist())
    assert not np.isin(edges_after.rows, np.flatnonzero(~loaded.kg.live_edges)).any()
    # an index saved when the anchor indexes still held deleted (blanked) rows loads
    files = loaded.kg.to_files()
    files.update(VectorIndex.build(loaded.kg.node_matrix, exact_below=2).to_files("kg.anchor_nodes."))
    assert KnowledgeGraph.from_files(files, loaded.kg.dimension).num_nodes == loaded.kg.num_nodes
    loaded.close()
    # saved indexes that do not cover the graph's rows are refused
    files = graphed.kg.to_files()
    short = VectorIndex.build(graphed.kg.node_matrix, np.arange(len(nodes) - 1), exact_below=2)
    files.update(short.to_files("kg.anchor_nodes."))
    with pytest.raises(ValueError, match="anchor"):
        KnowledgeGraph.from_files(files, graphed.kg.dimension)


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_persist_directory_refuses_to_overwrite(
    make_bubble: Callable[..., BubbleRAG], small_docs: list[Document], tmp_path: Path
) -> None:
    make_bubble(small_docs[:2], persist_directory=tmp_path)
    with pytest.raises(FileExistsError, match="load"):
        make_bubble(small_docs[:2], persist_directory=tmp_path)


# ---------------------------------------------------------------------- networkx
def test_networkx_round_trip(bubble_small: BubbleRAG) -> None:
    g = bubble_small.kg.to_networkx()
    assert g.number_of_nodes() == bubble_small.kg.num_nodes
    assert g.number_of_edges() == bubble_small.kg.num_edges
    kg2 = KnowledgeGraph.from_networkx(g, 384, edge_text="relation", edge_chunk=lambda u, v, a: a["chunk"])
    assert kg2.num_nodes == bubble_small.kg.num_nodes
    assert kg2.num_edges == bubble_small.kg.num_edges


def test_black_box_networkx_graph_without_documents(embedder: CachingEmbedder) -> None:
    g = nx.DiGraph()
    g.add_node("Q1", label="Ilse Varga")
    g.add_node("Q2", label="Marrowick Observatory")
    g.add_node("Q3", label="Tomas Brel")
    g.add_node("Q4", label="Halden Institute")
    g.add_edge("Q1", "Q2", predicate="founded")
    g.add_edge("Q3", "Q1", predicate="student of")
    g.add_edge("Q3", "Q4", predicate="director of")
    rag = BubbleRAG.from_networkx(g, embedder=embedder, show_progress=False)
    res = rag.retrieve("Which institute did Ilse Varga's student direct?", k=2)
    assert res
    assert res[0].metadata["type"] == "evidence_graph"
    assert "Tomas Brel director of Halden Institute" in res[0].text or any(
        "director of" in r.text for r in res
    )
    with pytest.raises(ValueError, match="Chroma store"):
        rag.add_documents(NEW_DOCS)


def test_networkx_graph_mapped_to_documents(embedder: CachingEmbedder) -> None:
    docs = [
        Document("Ilse Varga founded the Marrowick Observatory in 1874.", id="d0"),
        Document("Tomas Brel studied under Ilse Varga and later directed the Halden Institute.", id="d1"),
    ]
    g = nx.Graph()
    g.add_node(1, name="Ilse Varga", chunk=[0, 1])
    g.add_node(2, name="Marrowick Observatory", chunk=0)
    g.add_node(3, name="Tomas Brel", chunk="d1")
    g.add_node(4, name="Halden Institute", chunk=1)
    g.add_edge(1, 2, relation="founded", chunk=0)
    g.add_edge(3, 1, relation="student of", chunk="d1")
    g.add_edge(3, 4, relation="directed", chunk=1)
    rag = BubbleRAG.from_networkx(g, embedder=embedder, documents=docs, show_progress=False)
    res = rag.retrieve("Which institute did the student of Ilse Varga direct?", k=2)
    assert {r.metadata["doc_id"] for r in res} == {"d0", "d1"}
    assert res[0].metadata["doc_id"] == "d1"
    g.add_edge(1, 4, relation="x", chunk=7)
    with pytest.raises(ValueError, match="not a position"):
        BubbleRAG.from_networkx(g, embedder=embedder, documents=docs, show_progress=False)


def test_networkx_input_errors(embedder: CachingEmbedder) -> None:
    with pytest.raises(TypeError, match="networkx"):
        BubbleRAG.from_networkx({"a": 1}, embedder=embedder, show_progress=False)
    g = nx.Graph()
    g.add_node("a", text="  ")
    with pytest.raises(ValueError, match="no text"):
        BubbleRAG.from_networkx(g, embedder=embedder, node_text="text", show_progress=False)


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("query", "k", "error", "match"),
    [
        ("", None, ValueError, "empty"),
        ("   ", None, ValueError, "empty"),
        (None, None, TypeError, "str"),
        ("x" * 20_000, None, ValueError, "limit"),
        ("ok", 0, ValueError, ">= 1"),
        ("ok", "3", TypeError, "int"),
        ("ok", True, TypeError, "int"),
    ],
)
def test_bad_queries(bubble_small: BubbleRAG, query: Any, k: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        bubble_small.retrieve(query, k=k)
    assert bubble_small.retrieve("Marrowick", k=1), "still usable"


def test_unknown_option_and_settings(bubble_small: BubbleRAG, fake_embedder: Any) -> None:
    with pytest.raises(TypeError, match="unknown retrieve option"):
        bubble_small.retrieve("Marrowick", depth=2)
    with pytest.raises(TypeError, match="unknown BubbleRAG setting"):
        BubbleRAG.from_documents(NEW_DOCS, embedder=fake_embedder, hopz=3)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("anchors", 0, ValueError),
        ("hops", -1, ValueError),
        ("alpha", float("nan"), TypeError),
        ("alpha", -1.0, ValueError),
        ("k", 2.5, TypeError),
        ("title_edges", 1, TypeError),
        ("chunk_overlap", -1, ValueError),
    ],
)
def test_config_validation(field: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=field if error is TypeError else "BubbleConfig"):
        BubbleConfig(**{field: value})


def test_empty_corpus_and_bad_documents(fake_embedder: Any) -> None:
    store = ChunkStore.ephemeral(unique_name())
    with pytest.raises(ValueError, match="empty corpus"):
        BubbleRAG.from_documents([], embedder=fake_embedder, store=store)
    with pytest.raises(TypeError, match="Document"):
        BubbleRAG.from_documents(["text"], embedder=fake_embedder, store=store)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no text"):
        BubbleRAG.from_documents([Document("  ")], embedder=fake_embedder, store=store)


def test_wiring_with_a_fake_embedder() -> None:
    """Wiring only (no quality claim): a hash embedder runs the whole pipeline end to end."""
    emb = hash_embedder()
    rag = BubbleRAG.from_documents(
        NEW_DOCS, embedder=emb, store=ChunkStore.ephemeral(unique_name()), show_progress=False
    )
    res = rag.retrieve("Rosalind Tarkey", k=2)
    assert len(res) == 2
    json.dumps([r.metadata for r in res])  # metadata is plain JSON data


def test_evidence_graphs_of_nodes_alone_add_no_empty_triples_document() -> None:
    """Evidence graphs with no edge have no triples to serialise: no empty document is appended."""
    from tests.reliability.cases import wiring_embedder

    graph = nx.MultiGraph()
    graph.add_node("Quillara Works", chunk="d1")
    graph.add_node("Vorneth engine", chunk="d2")
    docs = [
        Document("Quillara Works is a glass factory.", id="d1"),
        Document("The Vorneth engine is loud.", id="d2"),
    ]
    rag = BubbleRAG.from_networkx(graph, embedder=wiring_embedder(), documents=docs, show_progress=False)
    query = "What is the Quillara Works?"
    assert rag.evidence_graphs(query)  # evidence was found ...
    assert all(not g.edges for g in rag.evidence_graphs(query))  # ... of nodes alone
    results = rag.retrieve(query, k=2, include_triples=True)
    assert [r.metadata.get("type") for r in results] == [None, None]
    assert all(r.text for r in results)
