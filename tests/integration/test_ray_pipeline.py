"""The Ray Data pipeline on a local Ray (two CPUs) against a real ``chroma run`` server."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from core.data import load_demo_corpus
from core.entities import default_entity_extractor
from core.ingest.precomputed import ENTITIES_KEY
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.types import Document
from tests.core.conftest import unique_name
from tests.integration.conftest import ChromaServer

ray = pytest.importorskip("ray", reason="the Ray pipeline needs: pip install 'bridge-rag[distributed]'")

from core.ingest.ray_data import build_with_ray, chunk_dataset  # noqa: E402

CHUNK_SIZE = 300

# Ray Data warns about its own deprecated settings while it starts a job.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")


class _Counting:
    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.texts = inner, inner.name, 0

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        self.texts += len(texts)
        return list(self.inner.extract(texts))


@pytest.fixture(scope="module")
def demo_docs() -> list[Document]:
    return load_demo_corpus()


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_the_pipeline_builds_the_index_from_documents_builds(
    local_ray: None, chroma_server: ChromaServer, demo_docs: list[Document], st_embedder: Any
) -> None:
    collection = unique_name("ray")
    counted = _Counting(default_entity_extractor())
    rag = build_with_ray(
        demo_docs,
        chroma_host=chroma_server.host,
        chroma_port=chroma_server.port,
        collection=collection,
        strategy="bridge",
        entity_extractor=counted,
        chunk_size=CHUNK_SIZE,
    )
    assert counted.texts == 0  # every chunk came with its entities: no NER on the driver
    assert rag.report.counts["entities precomputed"] == rag.num_chunks
    stored = ChunkStore.http(chroma_server.host, chroma_server.port, collection, create=False)
    page = stored.get(stored.existing([rag.chunk_table.ids[0]]), include_embeddings=False)
    assert json.loads(page.metadatas[0][ENTITIES_KEY])["extractor"] == counted.name

    local = BridgeRAG.from_documents(
        demo_docs,
        embedder=st_embedder,
        store=ChunkStore.ephemeral(unique_name("local")),
        chunk_size=CHUNK_SIZE,
        show_progress=False,
    )
    assert sorted(rag.chunk_table.ids) == sorted(local.chunk_table.ids)
    assert (rag.num_entities, rag.num_abstracts) == (local.num_entities, local.num_abstracts)
    for doc in demo_docs[:6]:
        question = doc.text.split(".")[0]
        got = [(r.id, round(r.score, 5)) for r in rag.retrieve(question)]
        assert got == [(r.id, round(r.score, 5)) for r in local.retrieve(question)]


def test_the_pipeline_refuses_a_collection_that_holds_rows(
    local_ray: None, chroma_server: ChromaServer, demo_docs: list[Document]
) -> None:
    collection = unique_name("full")
    store = ChunkStore.http(chroma_server.host, chroma_server.port, collection)
    store.add(["x"], ["text"], __import__("numpy").ones((1, 384)), [{"doc_id": "x"}])
    with pytest.raises(ValueError, match="already holds 1 rows"):
        build_with_ray(
            demo_docs[:2],
            chroma_host=chroma_server.host,
            chroma_port=chroma_server.port,
            collection=collection,
        )


def test_bad_pipeline_settings_are_refused(local_ray: None) -> None:
    with pytest.raises(ValueError, match="concurrency must be a positive integer"):
        chunk_dataset([Document(text="text", id="a")], chunk_size=100, concurrency=0)
    with pytest.raises(ValueError, match="empty corpus"):
        chunk_dataset([], chunk_size=100)


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"bridge-rag\[distributed\]"):
        chunk_dataset([Document(text="text", id="a")], chunk_size=100)
