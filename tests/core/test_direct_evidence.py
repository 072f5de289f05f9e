"""Lexical evidence beside the dense list (core.lexical, core.strategies.direct) in every strategy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.lexical import LexicalIndex, query_tokens, tokenize, top_scores
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.strategies.bubble import BubbleRAG
from core.strategies.umg import UMGRAG
from core.types import Document
from tests.core.conftest import hash_embedder, unique_name

TEXTS = [
    "The harbour office logged invoice KX-4471 for the crane repair in spring.",
    "Crane repairs at the harbour were paid by the port authority that year.",
    "The port authority also bought two tugboats and a dredger.",
    "Nothing in this row matters to any question asked here.",
]

#: Ten filler documents about the harbour, and the one that holds a rare identifier.
DOCS = [
    Document(
        text=f"Report {i}. The harbour office reviewed crane repairs and tugboat fees in quarter {i}. "
        "The port authority paid the dredging contractor on time.",
        id=f"filler-{i}",
    )
    for i in range(10)
] + [Document(text="The customs ledger lists consignment QX-88213 of copper wire from Ostrava.", id="ledger")]
QUERY = "Which cargo is consignment QX-88213?"


def test_lexical_index_maps_table_rows_and_scales_to_the_best_reachable() -> None:
    index = LexicalIndex.build(TEXTS, [0, 1, 3])  # row 2 is deleted
    rows, scores = index.search("crane repair invoice KX-4471", 5)
    assert rows.tolist()[0] == 0
    assert 2 not in rows.tolist()
    assert (np.diff(scores) <= 0).all()
    allowed = np.array([False, True, True, True])
    assert index.search("crane repair invoice KX-4471", 5, allowed)[0].tolist() == [1]
    evidence = index.evidence("crane repair invoice KX-4471", 4)
    assert evidence.shape == (4,)
    assert evidence[2] == evidence[3] == 0.0
    assert 0.0 < evidence[1] < evidence[0] <= 1.0
    assert index.evidence("tugboats dredger", 4).tolist() == [0.0, 0.0, 0.0, 0.0], "deleted words are gone"
    assert not index.evidence("zebra", 4).any()
    files, rows_back = index.to_files()
    back = LexicalIndex.from_files(files, rows_back)
    assert np.array_equal(back.evidence("crane KX-4471", 4), index.evidence("crane KX-4471", 4))
    with pytest.raises(ValueError, match="rebuild"):
        LexicalIndex.from_files(files, np.arange(9, dtype=np.int64))


@pytest.mark.parametrize(
    ("cls", "found_by"), [(BridgeRAG, "lexical"), (BubbleRAG, "lexical"), (UMGRAG, "bm25")]
)
def test_an_identifier_the_query_repeats_is_found_by_its_words(cls: type, found_by: str) -> None:
    # the 32-d hashing embedder blurs the identifier among the fillers; BM25 does not
    rag = cls.from_documents(
        DOCS, embedder=hash_embedder(), store=ChunkStore.ephemeral(unique_name("lex")), show_progress=False
    )
    got = {r.metadata["doc_id"]: r.metadata["found_by"] for r in rag.retrieve(QUERY, k=3)}
    assert got.get("ledger") == found_by
    rag.config = dataclasses.replace(rag.config, lexical_weight=0.0)
    dense_only = [r.metadata["doc_id"] for r in rag.retrieve(QUERY, k=3)]
    if cls is UMGRAG:  # its BM25 experts stay whatever the weight of the lexical prior
        assert "ledger" in dense_only
    else:
        assert "ledger" not in dense_only, "without lexical evidence the dense list misses it"


def test_a_deleted_document_leaves_the_lexical_index_and_its_files(tmp_path: Path) -> None:
    rag = BridgeRAG.from_documents(
        DOCS, embedder=hash_embedder(), store=ChunkStore.ephemeral(unique_name("lexdel")), show_progress=False
    )
    assert rag.retrieve(QUERY, k=1)[0].metadata["doc_id"] == "ledger"
    rag.delete_documents(["ledger"])
    assert all(r.metadata["doc_id"] != "ledger" for r in rag.retrieve(QUERY, k=5))
    rag.save(tmp_path / "index")
    for path in (tmp_path / "index").rglob("*"):
        if path.is_file() and "chroma" not in path.parts:
            assert b"qx" not in path.read_bytes().lower(), path
    back = BridgeRAG.load(tmp_path / "index", store=rag.store, embedder=hash_embedder())
    assert all(r.metadata["doc_id"] != "ledger" for r in back.retrieve(QUERY, k=5))
    assert back.retrieve("copper wire consignment", k=1)[0].metadata["doc_id"] != "ledger"


@given(
    scores=st.lists(st.sampled_from([0.0, -1.0, 0.5, 1.0, 1.5, 2.0, 3.25]), max_size=60),
    n=st.integers(-1, 70),
)
def test_top_scores_keeps_the_best_positive_scores_ties_by_index(scores: list[float], n: int) -> None:
    """Sorting only what reaches the n-th best score gives what a full sort gives, ties at the cut too."""
    arr = np.asarray(scores, dtype=np.float32)
    ids, values = top_scores(arr, n)
    pos = [i for i, s in enumerate(scores) if s > 0]
    want = sorted(pos, key=lambda i: (-scores[i], i))[: max(n, 0)]
    assert ids.tolist() == want
    assert values.tolist() == [scores[i] for i in want]


def test_query_tokens_are_the_tokenizer_s_and_remembered() -> None:
    query = "Who founded the Falcon rocket company in 2002?"
    assert list(query_tokens(query)) == tokenize([query])[0]
    assert query_tokens(query) is query_tokens(query)
