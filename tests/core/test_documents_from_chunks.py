"""Rebuilding documents from a collection's chunks (UMG over an existing store), and its order."""

from __future__ import annotations

import itertools
import uuid

import chromadb
import numpy as np
import pytest

from core.adapters import check_option
from core.store import ChunkStore
from core.strategies.common import collection_order, documents_from_chunks
from core.text import chunk_document
from core.types import Document


def test_own_chunks_rebuild_the_exact_text() -> None:
    doc = Document("x" * 5 + " " + "supercalifragilistic" * 20 + ". And a last sentence here.", id="d")
    chunks = list(chunk_document(doc, doc_id="d", chunk_size=100, chunk_overlap=0))
    assert any(a.end == b.start for a, b in itertools.pairwise(chunks))  # abutting pieces
    metas = [{"doc_id": "d", "start_index": c.start, "chunk_order": c.order} for c in chunks]
    order = [*range(len(chunks))][::-1]  # stored in reverse: the metadata puts them back
    rebuilt = documents_from_chunks(
        [chunks[i].id for i in order], [chunks[i].text for i in order], [metas[i] for i in order]
    )
    assert [d.text for d in rebuilt] == [doc.text]


def test_overlaps_are_cut_only_where_the_text_repeats() -> None:
    text = "alpha beta gamma delta epsilon zeta"
    metas = [{"source": "s", "start_index": 0}, {"source": "s", "start_index": 11}]
    assert (
        documents_from_chunks(["a", "b"], ["alpha beta gamma", "gamma delta epsilon zeta"], metas)[0].text
        == text
    )
    # Offsets that do not describe the texts: the chunk is kept whole, nothing is cut away.
    wrong = documents_from_chunks(["a", "b"], ["alpha beta gamma", "other words here"], metas)[0].text
    assert wrong == "alpha beta gamma\n\nother words here"


def test_pieces_that_restart_their_offsets_keep_every_piece() -> None:
    # A CSV or PDF loader: one document per row or page, all under one source, offsets from 0.
    texts = ["Row one about apples.", "Row two is a longer sentence.", "Row three.", "Row four."]
    metas = [{"source": "f.csv", "start_index": 0, "row": i} for i in range(4)]
    (doc,) = documents_from_chunks([f"r{i}" for i in range(4)], texts, metas)
    assert doc.text == "\n\n".join(texts)
    assert doc.metadata == {"source": "f.csv"}  # "row" differs between the pieces, so it is dropped
    ids = ["p1c0", "p2c0", "p1c1", "p2c1"]
    pages = [{"source": "a.pdf", "start_index": s} for s in (0, 0, 50, 50)]
    assert [ids[i] for i in collection_order(ids, pages)] == ids  # no interleaving by offset


def test_order_prefers_chunk_order_then_distinct_offsets() -> None:
    ids = ["c", "a", "b", "z"]
    metas = [
        {"doc_id": "d", "chunk_order": 2, "start_index": 0},
        {"doc_id": "d", "chunk_order": 0, "start_index": 99},
        {"doc_id": "d", "chunk_order": 1, "start_index": 50},
        {"doc_id": "e", "start_index": 7},
    ]
    assert [ids[i] for i in collection_order(ids, metas)] == ["a", "b", "c", "z"]
    by_offset = [{"doc_id": "d", "start_index": s} for s in (30, 0, 10)]
    assert collection_order(["x", "y", "w"], by_offset) == [1, 2, 0]


def test_a_sibling_collection_is_replaced_only_when_bridge_rag_made_it() -> None:
    client = chromadb.EphemeralClient()
    name = f"app-{uuid.uuid4().hex[:8]}"
    app = ChunkStore(client.get_or_create_collection(name))
    first = app.sibling(f"{name}_umg")
    first.add(["u"], ["unit"], np.ones((1, 3), dtype=np.float32), [{}])
    assert app.sibling(f"{name}_umg").count() == 1  # reopened as it is
    assert app.sibling(f"{name}_umg", replace=True).count() == 0
    client.get_or_create_collection(f"{name}_mine")
    with pytest.raises(ValueError, match="was not made by bridge-rag"):
        app.sibling(f"{name}_mine", replace=True)
    assert f"{name}_mine" in {c.name for c in client.list_collections()}  # never deleted
    with pytest.raises(ValueError, match="needs another name"):
        app.sibling(name)


def test_llama_index_option_fields_are_checked() -> None:
    assert check_option("depth", 2, int) == 2
    assert check_option("depth", None, int) is None
    with pytest.raises(TypeError, match="depth must be a int"):
        check_option("depth", True, int)
    with pytest.raises(ValueError, match="depth must be >= 0"):
        check_option("depth", -1, int)
    with pytest.raises(TypeError, match="parent_promotion must be a bool"):
        check_option("parent_promotion", 1, bool)
