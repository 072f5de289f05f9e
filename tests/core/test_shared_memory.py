"""One copy of an index in memory per machine: large arrays are memory-mapped read-only on load.

Real embedder and spaCy (the session fixtures); the subprocess test loads the index without a
model, as a query worker does.
"""

from __future__ import annotations

import functools
import json
import mmap
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from core.entities import EntityExtractor
from core.persist import CorruptIndexError
from core.strategies.bridge import BridgeConfig, BridgeRAG
from core.types import Document
from core.vector_index import HnswSettings, VectorIndex
from tests.core.conftest import CachingEmbedder

NEW = Document(
    "Beatrix Olunde founded the Harwick Glassworks in Pellmire in 1902. "
    "The Harwick Glassworks made lenses for lighthouses along the coast.",
    id="harwick-glassworks",
    metadata={"title": "Harwick Glassworks"},
)
QUERIES = [
    "Who founded the Marrowick Observatory?",
    "Who was mayor of Marrowick during the Great Flood?",
    "What did the institute study?",
]


def _mapped(array: npt.NDArray[Any]) -> bool:
    """True when the array's memory is a read-only map of a file (its base chain ends in an mmap)."""
    base: Any = array
    while base is not None:
        if isinstance(base, memoryview):
            return isinstance(base.obj, mmap.mmap)
        if isinstance(base, mmap.mmap):
            return True
        base = getattr(base, "base", None)
    return False


def _sig(rag: BridgeRAG, query: str) -> list[tuple[str, float, str]]:
    return [(r.id, round(r.score, 6), r.text) for r in rag.retrieve(query, k=5)]


@pytest.fixture
def large_index(
    make_rag: Callable[..., BridgeRAG],
    small_docs: list[Document],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """A persisted index whose dense pool goes through the HNSW vector index (as above 50k chunks).

    Every array file is mapped, however small (in a real index the small ones are read).
    """
    import core.persist
    import core.strategies.bridge.strategy as bridge_module

    monkeypatch.setattr(core.persist, "MAP_MIN_BYTES", 1)
    build = functools.partial(VectorIndex.build, exact_below=2, settings=HnswSettings(ef_search=2048))
    monkeypatch.setattr(bridge_module.VectorIndex, "build", build)
    rag = make_rag(
        small_docs, config=BridgeConfig(exact_search_max_rows=0), persist_directory=tmp_path / "idx"
    )
    assert rag._vectors is not None
    assert rag._vectors.uses_engine
    rag.close()
    return tmp_path / "idx"


def test_large_arrays_are_mapped_read_only_and_answer_as_the_copy(
    large_index: Path, embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    mapped = BridgeRAG.load(large_index, embedder=embedder, entity_extractor=extractor, refresh_interval=None)
    copied = BridgeRAG.load(
        large_index, embedder=embedder, entity_extractor=extractor, refresh_interval=None, memory_map=False
    )
    table = mapped._table
    assert _mapped(table.matrix)
    assert not table.matrix.flags.writeable
    assert _mapped(mapped._abs_matrix)
    assert not _mapped(copied._table.matrix)
    assert not _mapped(copied._abs_matrix)
    assert mapped._vectors is not None
    assert mapped._vectors.mapped
    assert copied._vectors is not None
    assert not copied._vectors.mapped
    with pytest.raises(ValueError, match="read-only"):
        table.matrix[0, 0] = 1.0
    # texts and metadata come from the index's own files, decoded per row
    assert [table.texts[i] for i in range(3)] == [copied._table.texts[i] for i in range(3)]
    assert table.metadatas[0] == copied._table.metadatas[0]
    assert table.metadatas[0]["doc_id"] == table.doc_ids[0]
    for q in QUERIES:
        assert _sig(mapped, q) == _sig(copied, q)
        assert _sig(mapped, q)


def test_a_writer_grows_a_mapped_index_and_saves_it(
    large_index: Path, embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    writer = BridgeRAG.load(large_index, embedder=embedder, entity_extractor=extractor, refresh_interval=None)
    before = writer._vectors
    assert before is not None
    assert before.mapped
    writer.add_documents([NEW])  # the mapped arrays are never written: growth makes new ones
    q = "Who founded the Harwick Glassworks?"
    assert writer.retrieve(q, k=3)[0].metadata["doc_id"] == "harwick-glassworks"
    assert writer._vectors is not before
    assert before.mapped
    assert not writer._vectors.mapped
    assert writer.delete_documents(["harwick-glassworks"]) > 0
    writer.add_documents([NEW])
    writer.close()
    again = BridgeRAG.load(large_index, embedder=embedder, entity_extractor=extractor, refresh_interval=None)
    top = again.retrieve(q, k=3)[0]
    assert top.metadata["doc_id"] == "harwick-glassworks"
    assert top.text.startswith("Beatrix Olunde founded")
    assert again._table.metadatas[again._table.id_to_row[top.id]]["title"] == "Harwick Glassworks"


def test_a_damaged_mapped_file_is_refused(
    large_index: Path, embedder: CachingEmbedder, extractor: EntityExtractor
) -> None:
    index_dir = large_index / "bridge"
    generation = index_dir / (index_dir / "CURRENT").read_text().strip()
    path = generation / "chunk_embeddings.npy"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError, match=r"chunk_embeddings\.npy"):
        BridgeRAG.load(large_index, embedder=embedder, entity_extractor=extractor, refresh_interval=None)


_WORKER = """
import json, sys
import numpy as np
from core.embed import CallableEmbedder
from core.strategies.bridge import BridgeRAG

def no_model(texts):
    raise RuntimeError("vectors only")

emb = CallableEmbedder(no_model, name=sys.argv[3], dimension=384)
rag = BridgeRAG.load(sys.argv[1], embedder=emb, refresh_interval=None)
results = rag.retrieve_by_vector(sys.argv[4], np.load(sys.argv[2], allow_pickle=False), 3)
heavy = sorted(m for m in ("chromadb", "spacy", "torch", "sentence_transformers") if m in sys.modules)
print(json.dumps({"heavy": heavy, "top": [r.metadata["doc_id"] for r in results]}))
"""


def test_a_query_worker_loads_without_chroma_spacy_or_torch(
    large_index: Path, embedder: CachingEmbedder, extractor: EntityExtractor, tmp_path: Path
) -> None:
    q = QUERIES[0]
    in_process = BridgeRAG.load(
        large_index, embedder=embedder, entity_extractor=extractor, refresh_interval=None
    ).retrieve(q, k=3)
    np.save(tmp_path / "q.npy", embedder.embed_query(q))
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, str(large_index), str(tmp_path / "q.npy"), embedder.name, q],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
    assert report["top"] == [r.metadata["doc_id"] for r in in_process]


def test_an_explicit_collection_without_the_chunks_is_still_refused(
    large_index: Path,
    embedder: CachingEmbedder,
    extractor: EntityExtractor,
    new_store: Callable[[], Any],
) -> None:
    with pytest.raises(ValueError, match="does not hold"):
        BridgeRAG.load(large_index, store=new_store(), embedder=embedder, entity_extractor=extractor)


def test_metadata_is_kept_as_chroma_keeps_it_before_and_after_a_load(
    make_rag: Callable[..., BridgeRAG], embedder: CachingEmbedder, extractor: EntityExtractor, tmp_path: Path
) -> None:
    from datetime import datetime

    doc = Document(
        NEW.text,
        id=NEW.id,
        metadata={"title": "Harwick Glassworks", "when": datetime(1902, 5, 1), "none": None},
    )
    rag = make_rag([doc], persist_directory=tmp_path / "meta")
    fresh = rag.retrieve("Who founded the Harwick Glassworks?", k=1)[0].metadata
    rag.close()
    loaded = BridgeRAG.load(tmp_path / "meta", embedder=embedder, entity_extractor=extractor)
    again = loaded.retrieve("Who founded the Harwick Glassworks?", k=1)[0].metadata
    assert fresh["when"] == again["when"] == "1902-05-01 00:00:00"
    assert "none" not in fresh
    assert "none" not in again
