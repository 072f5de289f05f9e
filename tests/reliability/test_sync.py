"""``sync``: what the app writes to its Chroma store itself reaches the index, deletes included.

After the one-line swap an app may keep its ingestion workers writing through its own store.
``sync()`` takes those writes in: a chunk deleted from the collection leaves every structure
and, after the save, every file of the index; a chunk added to it is indexed as stored, in a
document of its own tenant. UMG-RAG built from documents has nothing to follow and says so
(UMG-RAG built over a store follows it: ``test_umg_sync.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.entities import RuleBasedEntityExtractor
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.types import Document
from tests.core.conftest import unique_name
from tests.reliability.cases import StrategyCase, wiring_embedder
from tests.reliability.file_search import text_windows
from tests.reliability.test_deleted_data import NAMES, SECRET_TEXT, _leftovers

QUESTION = "Who signed the Hollowfen accord with the Ystrelle syndicate?"


def _app_adds(store: ChunkStore, ids: list[str], texts: list[str], metadatas: list[dict[str, Any]]) -> None:
    """What an app's own ``vectorstore.add_texts`` does: embed and write, the index not told."""
    store.add(ids, texts, wiring_embedder().embed_documents(texts), metadatas)


def test_sync_takes_in_what_the_app_added_and_deleted_in_chroma(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path
) -> None:
    rag = wiring_build(12, persist_directory=tmp_path)
    if case.name == "umg":
        with pytest.raises(NotImplementedError, match="built from documents"):
            rag.sync()
        return
    assert tuple(rag.sync()) == (0, 0, 0)  # nothing changed behind its back
    _app_adds(rag.store, ["app-secret"], [SECRET_TEXT], [{"source": "vault.txt", "tenant": "acme"}])
    assert all(r.id != "app-secret" for r in rag.retrieve(QUESTION, k=50))  # not seen before a sync
    assert tuple(rag.sync()) == (1, 0, 0)
    found = [r for r in rag.retrieve(QUESTION, k=5) if r.id == "app-secret"]
    assert found
    assert found[0].metadata["tenant"] == "acme"
    index_dir = tmp_path / case.name
    needles = {"text": text_windows(SECRET_TEXT), "names": set(NAMES)}
    assert _leftovers(index_dir, needles)  # saved with the index
    rag.store.delete(["app-secret"])  # the app deletes through its own store
    assert any(r.id == "app-secret" for r in rag.retrieve(QUESTION, k=50))  # still served until a sync
    assert tuple(rag.sync()) == (0, 1, 0)
    assert all(r.id != "app-secret" for r in rag.retrieve(QUESTION, k=50))
    assert _leftovers(index_dir, needles) == {}  # and nothing of it in any file of the index
    reopened = case.load(tmp_path, embedder=rag.embedder, **case.wiring_kwargs())
    assert all("Hollowfen" not in r.text for r in reopened.retrieve(QUESTION, k=50))


def test_a_tenants_chunk_added_behind_the_index_never_joins_another_tenants_document() -> None:
    store = ChunkStore.ephemeral(unique_name("sync-tenants"))
    _app_adds(
        store,
        ["a1", "a2"],
        ["Falcon launches in May. Acme builds Falcon in Ohio.", "Acme's Falcon team is led by Dana Reyes."],
        [{"source": "report.pdf", "tenant": "acme"}] * 2,
    )
    rag = BridgeRAG.from_store(
        store, embedder=wiring_embedder(), entity_extractor=RuleBasedEntityExtractor(), show_progress=False
    )
    _app_adds(
        store,
        ["g1", "g2", "a3"],
        [
            "Globex: Project Zeta price is $41M.",
            "Globex builds Zeta in Texas with Dana Reyes.",
            "Falcon's second stage is tested in Ohio.",
        ],
        [{"source": "report.pdf", "tenant": "globex"}] * 2 + [{"source": "report.pdf", "tenant": "acme"}],
    )
    assert tuple(rag.sync()) == (3, 0, 0)
    doc_of = dict(zip(rag.chunk_table.ids, rag.chunk_table.doc_ids, strict=True))
    assert doc_of["a3"] == doc_of["a1"]  # acme's new chunk joins acme's document
    assert doc_of["g1"] == doc_of["g2"] != doc_of["a1"]  # globex's is a document of its own
    for query in ("When does Falcon launch?", "What is the Zeta price?", "Who leads the team?"):
        for r in rag.retrieve(query, k=10, include_abstracts=True, filter={"tenant": "acme"}):
            assert "Globex" not in r.text
            assert "Zeta" not in str(r.metadata)
    assert rag.delete_documents(["report.pdf"], filter={"tenant": "globex"}) == 2
    assert sorted(
        rag.chunk_table.ids[r] for r in range(len(rag.chunk_table)) if rag.chunk_table.alive[r]
    ) == [
        "a1",
        "a2",
        "a3",
    ]


@pytest.mark.parametrize("strategy", ["bridge", "bubble"])
def test_a_tenants_delete_leaves_a_chunk_the_app_rewrote_for_another_tenant(strategy: str) -> None:
    """The app reuses a chunk's id for another tenant, unsynced: a filtered delete leaves it in Chroma."""
    from core.strategies.bubble import BubbleRAG
    from tests.reliability.cases import spacy_triples

    store = ChunkStore.ephemeral(unique_name("sync-reused"))
    acme = {"source": "report.pdf", "tenant": "acme"}
    _app_adds(store, ["r1", "r2"], ["Falcon launches in May.", "Acme builds Falcon in Ohio."], [acme] * 2)
    if strategy == "bridge":
        rag: Any = _from_store(store)
    else:
        rag = BubbleRAG.from_store(
            store, embedder=wiring_embedder(), triple_extractor=spacy_triples(), show_progress=False
        )
    globex = "Globex: Project Zeta price is $41M."
    store.collection.upsert(  # the app's own write over r2, not yet synced
        ids=["r2"],
        documents=[globex],
        embeddings=wiring_embedder().embed_documents([globex]),
        metadatas=[{"source": "report.pdf", "tenant": "globex"}],
    )
    assert rag.delete_documents(["report.pdf"], filter={"tenant": "acme"}) == 2
    assert store.get(include_embeddings=False).ids == ["r2"]  # globex's chunk stays
    assert tuple(rag.sync()) == (1, 0, 0)
    found = rag.retrieve("What is the Zeta price?", k=5, filter={"tenant": "globex"})
    assert [r.text for r in found] == [globex]


def test_a_delete_leaves_a_chunk_the_app_gave_to_another_document_since() -> None:
    store = ChunkStore.ephemeral(unique_name("sync-other-doc"))
    falcon = ["Falcon launches in May.", "Acme builds Falcon in Ohio."]
    _app_adds(store, ["r1", "r2"], falcon, [{"source": "a.md"}] * 2)
    rag = _from_store(store)
    _app_adds(store, ["n1"], ["Notes on the Zeta launch."], [{"source": "notes.md"}])
    store.collection.upsert(  # the app reuses r2 for notes.md, not yet synced
        ids=["r2"],
        documents=["Zeta ships in June."],
        metadatas=[{"source": "notes.md"}],
        embeddings=wiring_embedder().embed_documents(["Zeta ships in June."]),
    )
    assert rag.delete_documents(["a.md"]) == 2
    assert sorted(store.get(include_embeddings=False).ids) == ["n1", "r2"]
    assert tuple(rag.sync()) == (2, 0, 0)


def test_a_filtered_delete_always_deletes_a_chunk_chroma_holds_as_indexed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a rewritten chunk may stay: a recheck that disagrees with the index never keeps one."""
    import core.strategies.lifecycle as lifecycle

    store = ChunkStore.ephemeral(unique_name("sync-as-indexed"))
    _app_adds(store, ["r1"], ["Falcon launches in May."], [{"source": "report.pdf", "tenant": "acme"}])
    rag = _from_store(store)
    monkeypatch.setattr(lifecycle, "still_belongs", lambda *a, **k: False)  # a recheck that says no
    assert rag.delete_documents(["report.pdf"], filter={"tenant": "acme"}) == 1
    assert store.get(include_embeddings=False).ids == []


def test_the_adapters_sync_through_the_strategy(lc_sync_store: Any) -> None:
    """``retriever.sync()`` in both frameworks, over the app's own LangChain Chroma store."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_bridge import BridgeRetriever
    from llama_index_bridge import StrategyRetriever

    vs = lc_sync_store
    retriever = BridgeRetriever.from_vectorstore(
        vs, entity_extractor=RuleBasedEntityExtractor(), show_progress=False
    )
    vs.add_texts([SECRET_TEXT], metadatas=[{"source": "vault.txt"}], ids=["vault"])
    assert retriever.sync() == (1, 0, 0)
    assert "vault" in [d.id for d in retriever.invoke(QUESTION, k=10)]
    vs.delete(["vault"])
    li = StrategyRetriever(retriever.strategy, k=10)
    assert li.sync() == (0, 1, 0)
    assert "vault" not in [n.node.node_id for n in li.retrieve(QUESTION)]
    assert isinstance(vs.embeddings, DeterministicFakeEmbedding)


@pytest.fixture
def lc_sync_store() -> Any:
    from langchain_chroma import Chroma
    from langchain_core.embeddings import DeterministicFakeEmbedding

    vs = Chroma(
        collection_name=unique_name("sync-lc"), embedding_function=DeterministicFakeEmbedding(size=32)
    )
    vs.add_texts(
        [
            "Arvel Dalmor founded the Quellmoor Guild in 1801.",
            "The Quellmoor Guild trades salt in Marsh End.",
        ],
        metadatas=[{"source": "guild.md"}] * 2,
        ids=["g-1", "g-2"],
    )
    return vs


def test_an_adapter_over_a_strategy_without_sync_says_so() -> None:
    from core.strategies.baselines import DenseRetriever
    from langchain_bridge import StrategyRetriever

    store = ChunkStore.ephemeral(unique_name("sync-dense"))
    _app_adds(store, ["a"], ["Arvel founded the Quellmoor Guild."], [{"source": "x"}])
    retriever = StrategyRetriever(strategy=DenseRetriever(store, wiring_embedder()))
    with pytest.raises(NotImplementedError, match="DenseRetriever has no sync"):
        retriever.sync()


def _from_store(store: ChunkStore) -> BridgeRAG:
    return BridgeRAG.from_store(
        store, embedder=wiring_embedder(), entity_extractor=RuleBasedEntityExtractor(), show_progress=False
    )


def test_a_chunk_changed_in_place_is_taken_in_and_its_old_text_leaves() -> None:
    """LangChain's ``add_texts`` over an existing id overwrites it: the old text must not stay served."""
    store = ChunkStore.ephemeral(unique_name("sync-upsert"))
    _app_adds(
        store, ["x", "y"], ["Arvel founded the Quellmoor Guild.", "Brisca trades salt."], [{"t": "a"}] * 2
    )
    rag = _from_store(store)
    store.delete(["x"])
    _app_adds(store, ["x"], ["Corwen sails to Solbury for globex."], [{"t": "g"}])
    assert tuple(rag.sync()) == (0, 0, 1)
    texts = {r.id: r.text for r in rag.retrieve("Who founded the Quellmoor Guild?", k=10)}
    assert texts["x"] == "Corwen sails to Solbury for globex."
    assert rag.retrieve("Solbury", k=1, filter={"t": "g"})[0].id == "x"
    assert tuple(rag.sync()) == (0, 0, 0)


def test_a_delete_during_the_listing_never_drops_a_live_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages read with limit/offset skip an id when the app deletes meanwhile: skipped is not gone."""
    store = ChunkStore.ephemeral(unique_name("sync-pages"))
    _app_adds(
        store,
        [f"c{i}" for i in range(6)],
        [f"Chunk {i} about salt." for i in range(6)],
        [{"n": i} for i in range(6)],
    )
    rag = _from_store(store)
    pages = store.pages

    def skipping(batch_size: int = 1000) -> Any:
        store.delete(["c5"])  # the app deletes c5 while the listing runs, which then skips c0
        for page in pages(batch_size):
            yield type(page)(page.ids[1:], page.texts[1:], page.metadatas[1:], None)

    monkeypatch.setattr(store, "pages", skipping)
    assert tuple(rag.sync()) == (0, 1, 0)  # c5 only: c0 is still in the collection
    live = {rag.chunk_table.ids[r] for r in range(len(rag.chunk_table)) if rag.chunk_table.alive[r]}
    assert live == {"c0", "c1", "c2", "c3", "c4"}


def _two_workers(directory: Path) -> tuple[ChunkStore, BridgeRAG, BridgeRAG]:
    """An index built into ``directory`` (its builder closed), its collection, and two workers loading it."""
    from tests.reliability.cases import synthetic_documents

    built = BridgeRAG.from_documents(
        synthetic_documents(4),
        embedder=wiring_embedder(),
        entity_extractor=RuleBasedEntityExtractor(),
        persist_directory=directory,
        show_progress=False,
    )
    store = built.store
    built.close()
    first, second = (
        BridgeRAG.load(
            directory / "bridge", embedder=wiring_embedder(), entity_extractor=RuleBasedEntityExtractor()
        )
        for _ in range(2)
    )
    return store, first, second


def test_a_sync_with_nothing_to_do_takes_no_writer_lock(tmp_path: Path) -> None:
    """Several workers may sync after their writes: one that finds nothing stays a reader."""
    store, first, second = _two_workers(tmp_path)
    assert tuple(first.sync()) == (0, 0, 0)
    _app_adds(store, ["w2"], ["Galder sold salt in Vantry."], [{"source": "w2.txt"}])
    assert tuple(second.sync()) == (1, 0, 0)  # the first did not keep the lock
    assert first.refresh()  # the first follows the second's save (as its queries do every second)
    assert "w2" in first.chunk_table.id_to_row
    store.delete(["w2"])
    assert tuple(second.sync()) == (0, 1, 0)
    # the first catches up with what the second saved: nothing left to do, no lock needed
    assert tuple(first.sync()) == (0, 0, 0)
    assert "w2" not in first.chunk_table.id_to_row


def test_every_worker_may_sync_its_own_writes_in_turn(tmp_path: Path) -> None:
    """A sync lets go of the writer lock it took: the next worker's sync takes in its own writes.

    A worker that adds through the index keeps the lock (it is the directory's writer): another
    worker's sync then waits, and says who holds it.
    """
    from core.writer_lock import IndexLockedError

    store, a, b = _two_workers(tmp_path)
    for round_ in range(2):
        _app_adds(store, [f"a{round_}"], [f"Orvin sold tin in Quell, year {round_}."], [{"source": "a.txt"}])
        assert tuple(a.sync()) == (1, 0, 0)
        _app_adds(store, [f"b{round_}"], [f"Pelda sold wool in Brisk, year {round_}."], [{"source": "b.txt"}])
        assert tuple(b.sync()) == (1, 0, 0)  # before, a kept the lock and b's sync raised
        assert {f"a{round_}", f"b{round_}"} <= set(b.chunk_table.id_to_row)  # a's save taken in first
    assert a.refresh()
    assert {"a1", "b1"} <= set(a.chunk_table.id_to_row)
    a.add_documents([Document("Quell lies on the Orvin river.", id="quell")])  # a: the writer, from now on
    _app_adds(store, ["b2"], ["Pelda sold flax in Brisk."], [{"source": "b.txt"}])
    with pytest.raises(IndexLockedError, match="already has a writer"):
        b.sync(wait=0.2)
    from langchain_bridge import BridgeRetriever

    with pytest.raises(IndexLockedError, match="already has a writer"):
        BridgeRetriever(strategy=b).sync(wait=0.1)  # the adapters take the same wait
    a.close()
    assert tuple(b.sync()) == (1, 0, 0)


def test_a_llama_index_node_synced_into_its_document_joins_it() -> None:
    """Nodes LlamaIndex stored carry their exclusions in ``_node_content``: a new node of an indexed
    document still joins that document, and deleting the document removes all of it."""
    import json

    def node_meta(i: int) -> dict[str, Any]:
        node = {
            "id_": f"n{i}",
            "text": "",
            "metadata": {"file_name": "guide.md"},
            "excluded_llm_metadata_keys": ["file_name"],
        }
        return {
            "file_name": "guide.md",
            "_node_content": json.dumps(node),
            "_node_type": "TextNode",
            "doc_id": "guide-doc",
            "ref_doc_id": "guide-doc",
            "document_id": "guide-doc",
        }

    store = ChunkStore.ephemeral(unique_name("sync-li"))
    texts = [
        "Arvel founded the Quellmoor Guild.",
        "Brisca trades salt in Rastwick.",
        "Corwen sails to Solbury.",
    ]
    _app_adds(store, ["n0", "n1"], texts[:2], [node_meta(0), node_meta(1)])
    rag = _from_store(store)
    _app_adds(store, ["n2"], texts[2:], [node_meta(2)])
    assert tuple(rag.sync()) == (1, 0, 0)
    assert set(rag.chunk_table.doc_ids) == {"guide-doc"}
    assert rag.delete_documents(["guide-doc"]) == 3


def test_after_a_sync_a_name_two_tenants_share_is_refused_as_in_a_build() -> None:
    store = ChunkStore.ephemeral(unique_name("sync-ambiguous"))
    _app_adds(store, ["a1"], ["Falcon launches in May."], [{"source": "report.pdf", "tenant": "acme"}])
    rag = _from_store(store)
    _app_adds(store, ["g1"], ["Zeta costs $41M."], [{"source": "report.pdf", "tenant": "globex"}])
    rag.sync()
    with pytest.raises(ValueError, match=r"2 documents carry the name 'report\.pdf'.*named by a filter"):
        rag.delete_documents(["report.pdf"])  # acme's id is report.pdf: the message says how to name it
    assert rag.delete_documents(["report.pdf"], filter={"tenant": "acme"}) == 1
