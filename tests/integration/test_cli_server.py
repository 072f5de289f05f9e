"""``bridge-rag index --chroma-host/--chroma-port`` against a real ``chroma run`` server.

The chunks go to the server's collection, the index directory holds only the derived
structures and the record of the files; ``bridge-rag query`` finds the server through the
index's manifest.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings

from core.app.sources import read_sources
from tests.core.test_cli_index import cli, query_json, summary_of, write_corpus
from tests.integration.conftest import ChromaServer

pytestmark = pytest.mark.integration


def test_index_into_a_chroma_server_and_query_it(tmp_path: Path, chroma_server: ChromaServer) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    collection = f"cli-{uuid.uuid4().hex[:10]}"
    result = cli(
        "index",
        str(corpus),
        "--strategy",
        "bridge",
        "--index",
        str(index),
        "--chroma-host",
        chroma_server.host,
        "--chroma-port",
        str(chroma_server.port),
        "--collection",
        collection,
    )
    assert result.returncode == 0, result.stderr
    assert summary_of(result)["added"] == 5
    assert not (index / "chroma").exists(), "the chunks belong on the server, not in an embedded Chroma"
    record = read_sources(index)
    assert record is not None
    assert record.store == {
        "kind": "http",
        "host": chroma_server.host,
        "port": chroma_server.port,
        "collection": collection,
    }
    client = chromadb.HttpClient(
        host=chroma_server.host, port=chroma_server.port, settings=Settings(anonymized_telemetry=False)
    )
    stored = client.get_collection(collection).get(include=["metadatas"])
    assert {m["source"] for m in stored["metadatas"]} == {
        "bakery.txt",
        "notes/halden.md",
        "notes/varga.md",
        "people.jsonl",
    }
    data = query_json(index, "Who restored the Aurelio violin in Cremona?", "-k", "1")
    assert data["results"][0]["metadata"]["doc_id"] == "p-ferro"


def test_a_failed_first_build_leaves_nothing_on_the_server(
    tmp_path: Path, chroma_server: ChromaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that fails after its chunks reached the server takes back those rows alone; then it works."""
    import io

    from core.app.indexing import IndexOptions, run_index
    from core.strategies.bridge import BridgeRAG

    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    collection = f"cli-{uuid.uuid4().hex[:10]}"
    options = IndexOptions(
        paths=[str(corpus)],
        index_dir=str(tmp_path / "index"),
        strategy="bridge",
        chroma_host=chroma_server.host,
        chroma_port=chroma_server.port,
        collection=collection,
        progress=False,
    )

    def fail(self: BridgeRAG, path: object) -> None:
        app = self.store.collection  # an app writing to the same collection meanwhile
        app.add(ids=["app-1"], documents=["the app's own row"], embeddings=[[0.0] * self.embedder.dimension])
        raise RuntimeError("simulated failure after the chunks reached the server")

    with monkeypatch.context() as patch:
        patch.setattr(BridgeRAG, "save", fail)
        with pytest.raises(RuntimeError, match="simulated failure"):
            run_index(options, out=io.StringIO(), err=io.StringIO())
    assert not (tmp_path / "index").exists()
    client = chromadb.HttpClient(
        host=chroma_server.host, port=chroma_server.port, settings=Settings(anonymized_telemetry=False)
    )
    assert client.get_collection(collection).get()["ids"] == ["app-1"]  # the build's rows alone went
    client.get_collection(collection).delete(ids=["app-1"])
    assert run_index(options, out=io.StringIO(), err=io.StringIO()).added == 5
