"""BubbleRAG merges a name's spellings into one node, but never shows a tenant another's spelling.

Nodes are merged by normalised name ("ZOË VÄNCE" and "Zoe Vance" are one node), so each edge
keeps how its own chunk spells its two ends: a filtered query's evidence triples are spelt by
the rows it allows. A node whose name a deleted chunk spelt is renamed from a live edge and
embedded again, so the deleted spelling leaves every file of the index.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.strategies.bubble import BubbleRAG
from core.types import Document
from tests.reliability.cases import spacy_triples, wiring_embedder
from tests.reliability.file_search import files_under

GLOBEX = Document(
    "ZOË VÄNCE leads the Vornix team. ZOË VÄNCE founded Vornix in 1990.",
    id="g1",
    metadata={"tenant": "globex", "source": "report.pdf"},
)
ACME = Document(
    "Zoe Vance leads the Quillara team. Zoe Vance founded Quillara in 1991.",
    id="a1",
    metadata={"tenant": "acme", "source": "report.pdf"},
)
QUERY = "Who leads the Quillara team?"


def _spelt(rag: BubbleRAG, **filters: str) -> str:
    where = dict(filters) or None
    results = rag.retrieve(QUERY, k=2, filter=where, include_triples=True)
    return " ".join([r.text for r in results] + [str(r.metadata) for r in results])


def test_a_filtered_query_spells_names_as_its_tenants_rows_do(tmp_path: Path) -> None:
    rag = BubbleRAG.from_documents(
        [GLOBEX, ACME],  # globex first: its spelling names the shared node
        embedder=wiring_embedder(),
        persist_directory=tmp_path,
        triple_extractor=spacy_triples(),
        show_progress=False,
    )
    node = rag.kg.node_id("Zoe Vance")
    assert node is not None
    assert rag.kg.node_names[node] == "ZOË VÄNCE"  # one node for both spellings
    acme = _spelt(rag, tenant="acme")
    assert "Zoe Vance" in acme
    assert "VÄNCE" not in acme
    assert rag.delete_documents(["g1"]) == 1
    assert rag.kg.node_names[node] == "Zoe Vance"  # renamed from acme's live edge
    expected = wiring_embedder().embed_query("Zoe Vance")
    assert np.allclose(rag.kg.node_matrix[node], np.asarray(expected) / np.linalg.norm(expected), atol=1e-5)
    kg = rag.kg
    composed = [
        e
        for e in range(len(kg.edge_head))
        if kg.edge_alive[e]
        and kg.edge_kind[e] in ("cooccurrence", "title")
        and node in (kg.edge_head[e], kg.edge_tail[e])
    ]
    assert composed
    for e in composed:  # summed anew from the new name's vector, not the deleted spelling's
        total = kg.node_matrix[kg.edge_head[e]] + kg.node_matrix[kg.edge_tail[e]]
        assert np.allclose(kg.edge_matrix[e], total / np.linalg.norm(total), atol=1e-5)
    rag.close()
    assert not [p for p in files_under(tmp_path / "bubble") if "VÄNCE".encode() in p.read_bytes()]
    reopened = BubbleRAG.load(tmp_path, embedder=wiring_embedder(), triple_extractor=spacy_triples())
    assert "VÄNCE" not in _spelt(reopened)
    assert "Zoe Vance" in _spelt(reopened, tenant="acme")


def test_a_renamed_node_keeps_its_key_through_a_save() -> None:
    """A node renamed to its normalised key ('a team', whose own key is 'team') stays under its key."""
    from core.strategies.bubble.kg import KnowledgeGraph
    from core.strategies.bubble.triples import Triple

    kg = KnowledgeGraph(wiring_embedder().dimension)
    node = kg.add_node("The A Team", chunk=0)  # chunk 0 spells its name
    assert node is not None
    kg.add_node("the a team", chunk=1)  # chunk 1 mentions it, with no edge to spell it by
    kg.add_triples([Triple("Hannibal Smith", "leads", "Team", "svo")], chunk=2)
    team = kg.node_id("Team")
    kg.embed_missing(wiring_embedder())
    kg.remove_chunks([0])
    assert kg.node_names[node] == "a team"
    loaded = KnowledgeGraph.from_files(kg.to_files(), kg.dimension)
    assert (loaded.node_id("The A Team"), loaded.node_id("Team")) == (node, team)
    assert loaded.add_node("The A Team", chunk=3) == node  # no second node for the name


def test_a_graph_saved_before_edges_kept_their_spellings_renames_to_a_neutral_name() -> None:
    """Without the saved spellings (an older index), a node a deleted chunk named takes its key."""
    from core.strategies.bubble.kg import KnowledgeGraph
    from core.strategies.bubble.triples import Triple

    kg = KnowledgeGraph(wiring_embedder().dimension)
    kg.add_triples([Triple("ZOË VÄNCE", "leads", "Vornix", "svo")], chunk=0)
    kg.add_triples([Triple("Zoe Vance", "leads", "Quillara", "svo")], chunk=1)
    kg.embed_missing(wiring_embedder())
    files = kg.to_files()
    for name in ("kg.name_chunk.npy", "kg.stale_names.npy"):
        del files[name]
    edges = json.loads(bytes(files["kg.edges.json"]))
    files["kg.edges.json"] = json.dumps({"relation": edges["relation"], "kind": edges["kind"]}).encode()
    nodes = json.loads(bytes(files["kg.nodes.json"]))
    files["kg.nodes.json"] = json.dumps({"names": nodes["names"]}).encode()
    old = KnowledgeGraph.from_files(files, kg.dimension)
    old.remove_chunks([0])
    assert [old.edge_text(e) for e in range(2) if old.edge_alive[e]] == ["zoe vance leads Quillara"]
    assert "VÄNCE" not in json.dumps(json.loads(bytes(old.to_files()["kg.nodes.json"])), ensure_ascii=False)
    assert "VÄNCE" not in json.dumps(json.loads(bytes(old.to_files()["kg.edges.json"])), ensure_ascii=False)


def test_a_renamed_node_whose_embedding_failed_is_embedded_after_a_load(tmp_path: Path) -> None:
    class Failing:
        def __init__(self) -> None:
            self.inner, self.fail = wiring_embedder(), False

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def embed_documents(self, texts: list[str]) -> object:
            if self.fail:
                raise RuntimeError("embedding service timed out")
            return self.inner.embed_documents(texts)

    embedder = Failing()
    rag = BubbleRAG.from_documents(
        [GLOBEX, ACME],
        embedder=embedder,
        persist_directory=tmp_path,
        triple_extractor=spacy_triples(),
        show_progress=False,
    )
    node = rag.kg.node_id("Zoe Vance")
    assert node is not None
    embedder.fail = True
    with pytest.raises(RuntimeError, match="timed out"):
        rag.delete_documents(["g1"])  # the delete is saved; the new name's vector is not
    rag.close()
    embedder.fail = False
    reopened = BubbleRAG.load(tmp_path, embedder=embedder, triple_extractor=spacy_triples())
    assert reopened.kg.has_stale_names
    assert np.linalg.norm(reopened.kg.node_matrix[node]) == 0.0
    reopened.add_documents(
        [Document("Arvel Dalmor sails to Marsh End.", id="x1", metadata={"tenant": "acme"})]
    )
    assert not reopened.kg.has_stale_names
    assert np.linalg.norm(reopened.kg.node_matrix[node]) == pytest.approx(1.0)


def test_a_renamed_node_left_without_mentions_frees_its_key() -> None:
    from core.strategies.bubble.kg import KnowledgeGraph
    from core.strategies.bubble.triples import Triple

    kg = KnowledgeGraph(wiring_embedder().dimension)
    node = kg.add_node("The A Team", chunk=0)
    kg.add_node("the a team", chunk=1)
    kg.add_triples([Triple("Hannibal Smith", "leads", "Team", "svo")], chunk=2)
    kg.embed_missing(wiring_embedder())
    kg.remove_chunks([0])  # renamed to its key, "a team"
    kg.remove_chunks([1])  # then orphaned
    assert kg.node_id("The A Team") is None
    again = kg.add_node("The A Team", chunk=3)
    assert again is not None
    assert again != node
    assert kg.node_names[again] == "The A Team"


def test_a_dead_edge_keeps_no_spelling_through_loads_between_deletes() -> None:
    """Three spellings of one node, deleted one at a time with a save and load between."""
    from core.strategies.bubble.kg import KnowledgeGraph
    from core.strategies.bubble.triples import Triple

    kg = KnowledgeGraph(wiring_embedder().dimension)
    for chunk, (name, org) in enumerate(
        [("ZOË VÄNCE", "Vornix"), ("ZOE VANCE", "Brellin"), ("Zoe Vance", "Quillara")]
    ):
        kg.add_triples([Triple(name, "leads", org, "svo")], chunk=chunk)
    kg.embed_missing(wiring_embedder())
    for chunk in (0, 1):
        kg.remove_chunks([chunk])
        kg.embed_missing(wiring_embedder())
        kg = KnowledgeGraph.from_files(kg.to_files(), kg.dimension)
    files = kg.to_files()
    assert kg.node_names[kg.node_id("Zoe Vance") or 0] == "Zoe Vance"
    for spelling in ("ZOË VÄNCE", "ZOE VANCE", "Vornix", "Brellin"):
        assert not [name for name, data in files.items() if spelling.encode() in bytes(data)], spelling
