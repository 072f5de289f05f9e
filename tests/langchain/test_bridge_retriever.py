"""``langchain_bridge.BridgeRetriever`` over real Chroma, real embeddings and the demo corpus.

Most tests share one index of 20 demo documents (the ones ten of the demo questions need, and
their neighbours), built with ``persist_directory`` so the persistence tests can reopen it, and
never modified. The one-line-swap tests share a langchain-chroma store holding all 46 documents.
Tests that add or delete documents build their own small index.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import chromadb
import pytest
from langchain_chroma import Chroma
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import ValidationError

from core.store import ChunkStore
from langchain_bridge import BridgeRetriever

#: Provenance keys Bridge-RAG puts on every chunk it returns.
PROVENANCE_KEYS = (
    "strategy",
    "found_by",
    "matched_entities",
    "abstract_id",
    "abstract_level",
    "depth",
    "cosine",
)
FOUND_BY = {"entity", "hop", "tree", "bridge", "dense"}

#: Demo documents of the shared index: those ten demo questions need, plus related distractors.
SUBSET_IDS = (
    "marrowick",
    "corvane",
    "ilse-varga",
    "tomas-brel",
    "marrowick-observatory",
    "halden-institute",
    "oskar-halden",
    "anton-falk",
    "comet-varga",
    "lantern-festival",
    "mattias-ferrow",
    "tessel-suite",
    "corvane-conservatory",
    "clara-penhallow",
    "flood-1911",
    "pieter-ashby",
    "greywater-bridge",
    "agnes-moor",
    "edmund-moor",
    "university-of-corvane",
)

#: A new document whose entities appear nowhere in the demo corpus.
NEW_DOC_TEXT = (
    "Zephyrine Quill was a glassblower who opened the Quillworks studio in Marrowick in 1921. "
    "The Quillworks made lenses for lighthouses along the Bay of Corvane."
)
NEW_DOC_QUERY = "Who opened the Quillworks studio?"


def format_docs(docs: Sequence[Document]) -> str:
    """Context for a prompt: each chunk with the document it came from and the entities that led to it."""
    return "\n\n".join(
        f"[{d.metadata['doc_id']} | entities: {', '.join(d.metadata['matched_entities']) or '-'}]\n"
        f"{d.page_content}"
        for d in docs
    )


def assert_same_results(got: Sequence[Document], expected: Sequence[Document]) -> None:
    assert [d.id for d in got] == [d.id for d in expected]
    assert [d.page_content for d in got] == [d.page_content for d in expected]
    assert [d.metadata["score"] for d in got] == pytest.approx([d.metadata["score"] for d in expected])


@pytest.fixture(scope="module")
def subset_questions(demo_questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The demo questions whose supporting documents are all in the shared index."""
    chosen = [q for q in demo_questions if set(q["supporting_ids"]) <= set(SUBSET_IDS)]
    assert len(chosen) == 10
    return chosen


@pytest.fixture(scope="module")
def questions(subset_questions: list[dict[str, Any]]) -> list[str]:
    return [str(q["question"]) for q in subset_questions]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lc-bridge-index")


@pytest.fixture(scope="module")
def retriever(lc_demo_docs: list[Document], lc_embeddings: Any, index_dir: Path) -> BridgeRetriever:
    """Part of the demo corpus, indexed once for the module; tests must not modify it."""
    return BridgeRetriever.from_documents(
        [d for d in lc_demo_docs if d.id in SUBSET_IDS],
        embedding=lc_embeddings,
        persist_directory=index_dir,
        collection_name="lc-demo",
        k=4,
        show_progress=False,
    )


@pytest.fixture
def small_retriever(lc_demo_docs: list[Document], lc_embeddings: Any, tmp_path: Path) -> BridgeRetriever:
    """A small persisted index that a test may modify."""
    ids = {"marrowick-observatory", "ilse-varga", "tomas-brel", "lantern-festival"}
    return BridgeRetriever.from_documents(
        [d for d in lc_demo_docs if d.id in ids],
        embedding=lc_embeddings,
        persist_directory=tmp_path,
        k=3,
        show_progress=False,
    )


# --------------------------------------------------------------------------- basic retrieval


def test_is_a_langchain_retriever(retriever: BridgeRetriever) -> None:
    assert isinstance(retriever, BaseRetriever)
    assert retriever.strategy.name == "bridge"
    assert retriever.strategy.report.counts["documents"] == len(SUBSET_IDS)
    assert retriever.strategy.num_chunks > len(SUBSET_IDS)  # long documents are split into chunks


def test_invoke_returns_chunks_with_provenance(
    retriever: BridgeRetriever, demo_texts: dict[str, str], demo_questions: list[dict[str, Any]]
) -> None:
    question = demo_questions[0]
    docs = retriever.invoke(question["question"])

    assert len(docs) == 4
    assert len({d.id for d in docs}) == 4
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    for d in docs:
        meta = d.metadata
        for key in PROVENANCE_KEYS:
            assert key in meta, key
        assert meta["strategy"] == "bridge"
        assert meta["found_by"] in FOUND_BY
        assert d.id == meta["id"]
        assert isinstance(meta["matched_entities"], list)
        assert isinstance(meta["depth"], int)
        assert meta["depth"] >= 0
        # A chunk is an exact slice of its document, and the document's metadata is kept.
        doc_id = meta["doc_id"]
        assert demo_texts[doc_id][meta["start_index"] : meta["end_index"]] == d.page_content
        assert meta["title"] == demo_texts[doc_id].split("\n", 1)[0]
        assert meta["source"] == "bridge-rag demo corpus"
        assert isinstance(meta["score"], float)
        assert -1.0 <= meta["cosine"] <= 1.0 + 1e-5
    # The question names Marrowick's observatory: the top result comes through the entity filter.
    assert docs[0].metadata["matched_entities"]
    assert docs[0].metadata["fallback"] is None
    found = {d.metadata["doc_id"] for d in docs}
    assert len(found & set(question["supporting_ids"])) >= 2


def test_every_question_reaches_a_supporting_document(
    retriever: BridgeRetriever, subset_questions: list[dict[str, Any]]
) -> None:
    missed = []
    for q in subset_questions:
        found = {d.metadata["doc_id"] for d in retriever.invoke(q["question"], k=6)}
        if not found & set(q["supporting_ids"]):
            missed.append(q["id"])
    assert missed == []


def test_queries_use_the_given_embeddings(retriever: BridgeRetriever, lc_embeddings: Any) -> None:
    before = lc_embeddings.query_calls
    retriever.invoke("  Who founded the Marrowick Courier?  ")
    assert lc_embeddings.query_calls == before + 1
    assert lc_embeddings.queries[-1] == "Who founded the Marrowick Courier?"


# --------------------------------------------------------------------------- k


@pytest.mark.parametrize("k", [1, 3, 9])
def test_k_at_invoke_time(retriever: BridgeRetriever, questions: list[str], k: int) -> None:
    docs = retriever.invoke(questions[1], k=k)
    assert len(docs) == k
    assert len({d.id for d in docs}) == k
    assert retriever.k == 4  # the per-call k does not stick


def test_k_none_and_constructor_k(retriever: BridgeRetriever, questions: list[str]) -> None:
    assert len(retriever.invoke(questions[2], k=None)) == 4
    two = BridgeRetriever(strategy=retriever.strategy, k=2)
    assert len(two.invoke(questions[2])) == 2
    via_search_kwargs = BridgeRetriever(strategy=retriever.strategy, search_kwargs={"k": 3})
    assert via_search_kwargs.k == 3
    assert via_search_kwargs.search_kwargs == {}
    assert len(via_search_kwargs.invoke(questions[2])) == 3


def test_k_larger_than_the_corpus_returns_every_chunk(small_retriever: BridgeRetriever) -> None:
    n = small_retriever.strategy.num_chunks
    docs = small_retriever.invoke("Ilse Varga and the Marrowick Observatory", k=n + 50)
    assert len(docs) == n
    assert len({d.id for d in docs}) == n


# --------------------------------------------------------------------------- search options


def test_depth_reaches_the_strategy(retriever: BridgeRetriever, questions: list[str]) -> None:
    deepest = 0
    for q in questions:  # k large enough to reach below the entity-hop results
        flat = retriever.invoke(q, k=40, depth=0)
        deep = retriever.invoke(q, k=40, depth=3)
        assert all(d.metadata["depth"] == 0 for d in flat)
        assert all(0 <= d.metadata["depth"] <= 3 for d in deep)
        deepest = max(deepest, *(d.metadata["depth"] for d in deep))
    # Chunks reached through the forest say how many levels away they were found.
    assert deepest > 0
    # The adapter forwards the option unchanged: the same as asking the strategy directly.
    direct = retriever.strategy.retrieve(questions[2], k=40, depth=3)
    assert [(d.id, d.metadata["depth"]) for d in deep] != [(d.id, d.metadata["depth"]) for d in flat]
    assert [(d.id, d.metadata["depth"]) for d in retriever.invoke(questions[2], k=40, depth=3)] == [
        (r.id, r.metadata["depth"]) for r in direct
    ]


def test_search_kwargs_are_defaults_that_invoke_overrides(
    retriever: BridgeRetriever, questions: list[str]
) -> None:
    flat = BridgeRetriever(strategy=retriever.strategy, k=6, search_kwargs={"depth": 0})
    assert_same_results(flat.invoke(questions[2]), retriever.invoke(questions[2], k=6, depth=0))
    assert_same_results(flat.invoke(questions[2], depth=3), retriever.invoke(questions[2], k=6, depth=3))
    with pytest.raises(ValueError, match="depth must be >= 0"):
        flat.invoke(questions[2], depth=-1)
    with pytest.raises(ValueError, match="depth"):  # moved to the depth field, checked at once
        BridgeRetriever(strategy=retriever.strategy, search_kwargs={"depth": -1})


def test_include_abstracts(retriever: BridgeRetriever, questions: list[str]) -> None:
    plain = retriever.invoke(questions[0])
    docs = retriever.invoke(questions[0], include_abstracts=True)

    chunks = [d for d in docs if d.metadata.get("type") != "abstract"]
    abstracts = [d for d in docs if d.metadata.get("type") == "abstract"]
    assert docs[: len(chunks)] == chunks  # chunks first, then the abstracts
    assert_same_results(chunks, plain)
    # One level-0 abstract per document here (no demo document has more than five chunks).
    chunk_docs = list(dict.fromkeys(d.metadata["doc_id"] for d in chunks))
    assert [a.metadata["doc_id"] for a in abstracts] == chunk_docs
    for a in abstracts:
        assert a.id is not None
        assert a.id.startswith("abstract::")
        assert a.page_content.strip()
        assert a.metadata["abstract_level"] == 0
        assert a.metadata["entities"]

    defaults = BridgeRetriever(strategy=retriever.strategy, search_kwargs={"include_abstracts": True})
    assert [d.id for d in defaults.invoke(questions[0])] == [d.id for d in docs]


def test_unknown_search_option_is_an_error(retriever: BridgeRetriever, questions: list[str]) -> None:
    with pytest.raises(TypeError, match="unknown retrieve option"):
        retriever.invoke(questions[0], fetch_k=20)
    with pytest.raises(ValidationError, match="does not take: score_threshold; it takes depth"):
        BridgeRetriever(strategy=retriever.strategy, search_kwargs={"score_threshold": 0.5})


# --------------------------------------------------------------------------- async, batch, concurrency


async def test_ainvoke_matches_invoke(retriever: BridgeRetriever, questions: list[str]) -> None:
    assert_same_results(await retriever.ainvoke(questions[3]), retriever.invoke(questions[3]))
    assert_same_results(
        await retriever.ainvoke(questions[3], k=2, depth=0), retriever.invoke(questions[3], k=2, depth=0)
    )


async def test_batch_and_abatch(retriever: BridgeRetriever, questions: list[str]) -> None:
    some = questions[:3]
    serial = [retriever.invoke(q, k=2) for q in some]
    batched = retriever.batch(some, k=2)
    abatched = await retriever.abatch(some, k=2)
    for got, agot, expected in zip(batched, abatched, serial, strict=True):
        assert len(got) == 2
        assert_same_results(got, expected)
        assert_same_results(agot, expected)


async def test_concurrent_ainvoke_matches_serial(retriever: BridgeRetriever, questions: list[str]) -> None:
    queries = [questions[i % 10] for i in range(20)]
    serial = {q: retriever.invoke(q, k=5) for q in dict.fromkeys(queries)}
    results = await asyncio.gather(*(retriever.ainvoke(q, k=5) for q in queries))
    assert len(results) == 20
    for q, got in zip(queries, results, strict=True):
        assert_same_results(got, serial[q])


# --------------------------------------------------------------------------- persistence


def test_load_gives_the_same_results(
    retriever: BridgeRetriever, index_dir: Path, lc_embeddings: Any, questions: list[str]
) -> None:
    loaded = BridgeRetriever.load(index_dir, embedding=lc_embeddings, k=4)
    assert loaded.strategy is not retriever.strategy
    assert loaded.strategy.num_chunks == retriever.strategy.num_chunks
    for q in questions:
        got = loaded.invoke(q)
        expected = retriever.invoke(q)
        assert_same_results(got, expected)
        assert [d.metadata for d in got] == [d.metadata for d in expected]


def test_save_elsewhere_and_load(
    retriever: BridgeRetriever, tmp_path: Path, lc_embeddings: Any, questions: list[str]
) -> None:
    retriever.save(tmp_path / "copy")
    # The copy holds only the Bridge structures; the chunks are found in the original Chroma.
    assert not (tmp_path / "copy" / "chroma").exists()
    loaded = BridgeRetriever.load(tmp_path / "copy", embedding=lc_embeddings, search_kwargs={"depth": 0})
    assert (loaded.depth, loaded.search_kwargs) == (0, {})  # the option moves to its field
    assert_same_results(loaded.invoke(questions[4]), retriever.invoke(questions[4], depth=0))


def test_load_missing_index_is_an_error(tmp_path: Path, lc_embeddings: Any) -> None:
    with pytest.raises(FileNotFoundError):
        BridgeRetriever.load(tmp_path / "nothing-here", embedding=lc_embeddings)


# --------------------------------------------------------------------------- updates


def test_add_and_delete_documents(
    small_retriever: BridgeRetriever, tmp_path: Path, lc_embeddings: Any
) -> None:
    store = small_retriever.strategy.store
    chunks_before = store.count()
    assert small_retriever.invoke(NEW_DOC_QUERY)[0].metadata["doc_id"] != "quill"

    assert small_retriever.add_documents([Document(page_content=NEW_DOC_TEXT, id="quill")]) == ["quill"]
    assert store.count() == chunks_before + 1
    top = small_retriever.invoke(NEW_DOC_QUERY)[0]
    assert top.metadata["doc_id"] == "quill"
    assert top.page_content == NEW_DOC_TEXT
    # The change was saved: a reopened index sees the new document too.
    assert BridgeRetriever.load(tmp_path, embedding=lc_embeddings).invoke(NEW_DOC_QUERY)[0].id == top.id

    # Ids come from the document's id, else metadata["id"], else a hash of the text.
    ids = small_retriever.add_documents(
        [
            Document(page_content="The Quillworks kiln was rebuilt in 1930.", metadata={"id": "kiln"}),
            Document(page_content="Lighthouse lenses need careful polishing."),
        ]
    )
    assert ids[0] == "kiln"
    assert ids[1]
    assert ids[1] != "kiln"

    with pytest.raises(ValueError, match="duplicate document id"):
        small_retriever.add_documents([Document(page_content="Something else.", id="quill")])

    assert small_retriever.delete_documents(["quill"]) == 1
    assert store.count() == chunks_before + 2
    assert all(d.metadata["doc_id"] != "quill" for d in small_retriever.invoke(NEW_DOC_QUERY, k=20))
    reopened = BridgeRetriever.load(tmp_path, embedding=lc_embeddings)
    assert all(d.metadata["doc_id"] != "quill" for d in reopened.invoke(NEW_DOC_QUERY, k=20))

    assert small_retriever.delete_documents(["no-such-document"]) == 0
    assert small_retriever.add_documents([]) == []


def test_delete_a_whole_document(small_retriever: BridgeRetriever) -> None:
    query = "When did Ilse Varga discover her comet?"
    assert "ilse-varga" in {d.metadata["doc_id"] for d in small_retriever.invoke(query)}
    n_chunks = sum(1 for cid in small_retriever.strategy.store.get().ids if cid.startswith("ilse-varga::"))
    assert n_chunks >= 2
    assert small_retriever.delete_documents(["ilse-varga"]) == n_chunks
    assert "ilse-varga" not in {d.metadata["doc_id"] for d in small_retriever.invoke(query, k=50)}


def test_delete_documents_rejects_a_single_string(small_retriever: BridgeRetriever) -> None:
    with pytest.raises(TypeError, match="single string"):
        small_retriever.delete_documents("ilse-varga")


# --------------------------------------------------------------------------- in a chain


def test_chain_end_to_end(retriever: BridgeRetriever, demo_questions: list[dict[str, Any]]) -> None:
    question = demo_questions[0]["question"]
    prompts: list[ChatPromptValue] = []

    def spy(prompt: ChatPromptValue) -> ChatPromptValue:
        prompts.append(prompt)
        return prompt

    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer the question using only this context:\n\n{context}"),
            ("human", "{question}"),
        ]
    )
    llm = FakeListChatModel(responses=["Tomas Brel later directed the Halden Institute."])
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | RunnableLambda(spy)
        | llm
        | StrOutputParser()
    )

    assert chain.invoke(question) == "Tomas Brel later directed the Halden Institute."
    system, human = prompts[0].to_messages()
    assert human.content == question
    assert system.content == (
        "Answer the question using only this context:\n\n" + format_docs(retriever.invoke(question))
    )
    assert "[marrowick-observatory | entities: " in system.content


async def test_chain_ainvoke(retriever: BridgeRetriever, questions: list[str]) -> None:
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=["first", "second"])
        | StrOutputParser()
    )
    assert await chain.ainvoke(questions[7]) == "first"
    assert await chain.abatch(questions[8:10]) == ["second", "first"]


class RetrieverEvents(BaseCallbackHandler):
    """Records what LangChain's callback system reports about retriever runs."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.documents: list[list[Document]] = []
        self.errors: list[BaseException] = []

    def on_retriever_start(self, serialized: dict[str, Any], query: str, **kwargs: Any) -> None:
        self.queries.append(query)

    def on_retriever_end(self, documents: Sequence[Document], **kwargs: Any) -> None:
        self.documents.append(list(documents))

    def on_retriever_error(self, error: BaseException, **kwargs: Any) -> None:
        self.errors.append(error)


async def test_callbacks_see_the_retriever_runs(retriever: BridgeRetriever, questions: list[str]) -> None:
    events = RetrieverEvents()
    docs = retriever.invoke(questions[0], config={"callbacks": [events]})
    adocs = await retriever.ainvoke(questions[1], config={"callbacks": [events]}, k=2)
    with pytest.raises(ValueError, match="query is empty"):
        retriever.invoke(" ", config={"callbacks": [events]})

    assert events.queries == [questions[0], questions[1], " "]
    assert [[d.id for d in run] for run in events.documents] == [[d.id for d in docs], [d.id for d in adocs]]
    assert len(events.errors) == 1
    assert isinstance(events.errors[0], ValueError)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("query", ["", "   \n\t"])
def test_empty_query_is_an_error(retriever: BridgeRetriever, query: str) -> None:
    with pytest.raises(ValueError, match="query is empty"):
        retriever.invoke(query)


async def test_empty_query_is_an_error_async(retriever: BridgeRetriever) -> None:
    with pytest.raises(ValueError, match="query is empty"):
        await retriever.ainvoke("")


def test_non_string_and_overlong_queries_are_errors(retriever: BridgeRetriever) -> None:
    with pytest.raises(TypeError, match="query must be a str"):
        retriever.invoke(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="above the limit"):
        retriever.invoke("Marrowick " * 2_000)


@pytest.mark.parametrize("k", [0, -3])
def test_bad_k_at_invoke_time(retriever: BridgeRetriever, questions: list[str], k: int) -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        retriever.invoke(questions[0], k=k)


@pytest.mark.parametrize("k", ["3", 2.0, True])
def test_k_of_the_wrong_type_at_invoke_time(retriever: BridgeRetriever, questions: list[str], k: Any) -> None:
    with pytest.raises(TypeError, match="k must be an int"):
        retriever.invoke(questions[0], k=k)


@pytest.mark.parametrize("k", [0, -1, True, "4"])
def test_bad_k_in_the_constructor(retriever: BridgeRetriever, k: Any) -> None:
    with pytest.raises(ValidationError, match="k must be"):
        BridgeRetriever(strategy=retriever.strategy, k=k)


def test_bad_constructor_arguments(retriever: BridgeRetriever) -> None:
    with pytest.raises(ValidationError, match="search_kwargs may not contain"):
        BridgeRetriever(strategy=retriever.strategy, search_kwargs={"query": "x"})
    with pytest.raises(ValidationError, match="strategy must implement"):
        BridgeRetriever(strategy=object())
    with pytest.raises(ValidationError, match="k is given twice"):
        BridgeRetriever(strategy=retriever.strategy, k=2, search_kwargs={"k": 3})


def test_bad_build_arguments(lc_demo_docs: list[Document], lc_embeddings: Any, collection_name: str) -> None:
    with pytest.raises(TypeError, match="unknown Bridge-RAG setting"):
        BridgeRetriever.from_documents(lc_demo_docs[:2], embedding=lc_embeddings, chunk_sise=100)
    with pytest.raises(ValueError, match="depth must be >= 0"):
        BridgeRetriever.from_documents(lc_demo_docs[:2], embedding=lc_embeddings, depth=-1)
    with pytest.raises(ValueError, match="empty corpus"):
        BridgeRetriever.from_documents([], embedding=lc_embeddings, collection_name=collection_name)
    with pytest.raises(ValueError, match="has no text"):
        BridgeRetriever.from_documents(
            [Document(page_content="  ", id="blank")],
            embedding=lc_embeddings,
            collection_name=collection_name + "-blank",
        )
    with pytest.raises(ValueError, match="duplicate document id"):
        BridgeRetriever.from_documents(
            [Document(page_content="One.", id="same"), Document(page_content="Two.", id="same")],
            embedding=lc_embeddings,
            collection_name=collection_name + "-dup",
        )


# --------------------------------------------------------------------------- the one-line swap


@pytest.fixture(scope="module")
def swap_embeddings(make_embeddings: Any) -> Any:
    """The existing app's embedding function (own counters)."""
    return make_embeddings()


@pytest.fixture(scope="module")
def swap_store(lc_demo_docs: list[Document], swap_embeddings: Any) -> Chroma:
    """An existing langchain-chroma app: the demo corpus added with metadata {"source": doc_id}."""
    vs = Chroma(
        collection_name=f"app-{uuid.uuid4().hex[:12]}",
        embedding_function=swap_embeddings,
        client=chromadb.EphemeralClient(),
    )
    vs.add_documents([Document(page_content=d.page_content, metadata={"source": d.id}) for d in lc_demo_docs])
    return vs


@pytest.fixture(scope="module")
def swapped(swap_store: Chroma) -> BridgeRetriever:
    return BridgeRetriever.from_vectorstore(swap_store, k=4, show_progress=False)


@pytest.fixture(scope="module")
def source_of(swap_store: Chroma) -> dict[str, str]:
    """Chroma item id -> the "source" metadata the app stored."""
    stored = swap_store.get(include=["metadatas"])
    return {i: m["source"] for i, m in zip(stored["ids"], stored["metadatas"], strict=True)}


def test_swap_builds_over_the_stored_items(
    swapped: BridgeRetriever, swap_store: Chroma, lc_demo_docs: list[Document], swap_embeddings: Any
) -> None:
    counts = swapped.strategy.report.counts
    assert counts["chunks"] == 46  # each stored item is one chunk, as the app stored it
    assert counts["documents"] == 46  # grouped by the "source" metadata
    # Nothing is re-embedded: each corpus text went through the embedding function once, when the
    # app added it, and Bridge reads the stored vectors.
    embedded = Counter(swap_embeddings.embedded_texts)
    assert all(embedded[d.page_content] == 1 for d in lc_demo_docs)
    assert swapped.strategy.store.collection.id == swap_store._collection.id


def test_swap_answers_a_multi_hop_question(
    swapped: BridgeRetriever,
    swap_store: Chroma,
    source_of: dict[str, str],
    demo_questions: list[dict[str, Any]],
) -> None:
    question = demo_questions[0]
    docs = swapped.invoke(question["question"])

    assert len(docs) == 4
    stored = swap_store.get(ids=[d.id for d in docs if d.id is not None])
    text_of = dict(zip(stored["ids"], stored["documents"], strict=True))
    for d in docs:
        assert d.id in source_of
        assert d.page_content == text_of[d.id]
        for key in PROVENANCE_KEYS:
            assert key in d.metadata, key
    assert docs[0].metadata["matched_entities"]
    found = {source_of[d.id] for d in docs if d.id is not None}
    assert len(found & set(question["supporting_ids"])) >= 2

    # The plain retriever of the same store still works and sees the same items.
    plain = swap_store.as_retriever(search_kwargs={"k": 4}).invoke(question["question"])
    assert {d.metadata["source"] for d in plain} <= set(source_of.values())


def test_swap_queries_use_the_store_embedding_function(
    swapped: BridgeRetriever, swap_embeddings: Any, questions: list[str]
) -> None:
    before = swap_embeddings.query_calls
    swapped.invoke(questions[3])
    swapped.batch(questions[4:6])
    assert swap_embeddings.query_calls == before + 3
    assert swap_embeddings.queries[-3:][0] == questions[3]


def test_swap_keeps_the_apps_metadata(
    swapped: BridgeRetriever, source_of: dict[str, str], questions: list[str]
) -> None:
    for q in questions[:3]:
        for d in swapped.invoke(q):
            # The app's "source" survives (provenance lives under "found_by"), and names the document.
            assert d.metadata["source"] == source_of[d.id]
            assert d.metadata["doc_id"] == source_of[d.id]
            assert d.metadata["found_by"] in FOUND_BY


def test_swap_save_and_load_with_the_apps_collection(
    swapped: BridgeRetriever, swap_store: Chroma, swap_embeddings: Any, tmp_path: Path, questions: list[str]
) -> None:
    swapped.save(tmp_path)
    with pytest.raises(ValueError, match="pass store="):
        BridgeRetriever.load(tmp_path, embedding=swap_embeddings)
    loaded = BridgeRetriever.load(
        tmp_path, embedding=swap_embeddings, store=ChunkStore(swap_store._collection)
    )
    for q in questions[:4]:
        assert_same_results(loaded.invoke(q), swapped.invoke(q))


def test_swap_add_and_delete_write_to_the_apps_collection(
    lc_demo_docs: list[Document], make_embeddings: Any, collection_name: str
) -> None:
    embeddings = make_embeddings()
    vs = Chroma(
        collection_name=collection_name, embedding_function=embeddings, client=chromadb.EphemeralClient()
    )
    small = [d for d in lc_demo_docs if d.id in {"marrowick-courier", "ilse-varga", "tomas-brel"}]
    vs.add_documents([Document(page_content=d.page_content, metadata={"source": d.id}) for d in small])
    retriever = BridgeRetriever.from_vectorstore(vs, k=2, show_progress=False)

    retriever.add_documents([Document(page_content=NEW_DOC_TEXT, id="quill")])
    assert vs._collection.count() == 4
    assert retriever.invoke(NEW_DOC_QUERY)[0].page_content == NEW_DOC_TEXT
    # The app's own retriever sees the new chunk too: the app's collection is the one source of truth.
    assert vs.similarity_search(NEW_DOC_QUERY, k=1)[0].page_content == NEW_DOC_TEXT

    # Items the app stored are deleted by their "source" document id.
    assert retriever.delete_documents(["marrowick-courier"]) == 1
    assert vs._collection.count() == 3
    remaining = {m["source"] for m in vs.get(include=["metadatas"])["metadatas"] if "source" in m}
    assert "marrowick-courier" not in remaining


def test_from_vectorstore_without_embeddings_is_a_value_error(collection_name: str) -> None:
    vs = Chroma(collection_name=collection_name, client=chromadb.EphemeralClient())
    with pytest.raises(ValueError, match="no embedding function"):
        BridgeRetriever.from_vectorstore(vs)


def test_from_vectorstore_empty_store_is_a_value_error(make_embeddings: Any, collection_name: str) -> None:
    vs = Chroma(
        collection_name=collection_name,
        embedding_function=make_embeddings(),
        client=chromadb.EphemeralClient(),
    )
    with pytest.raises(ValueError, match="collection is empty"):
        BridgeRetriever.from_vectorstore(vs, show_progress=False)
    for name in ("embedder", "embedding"):  # queries go through the store's own function
        with pytest.raises(TypeError, match=f"{name}= is not a setting .* vectorstore's own"):
            BridgeRetriever.from_vectorstore(vs, **{name: make_embeddings()})


@pytest.mark.parametrize("kind", ["in-memory vector store", "string", "none"])
def test_from_vectorstore_wrong_object_is_a_type_error(make_embeddings: Any, kind: str) -> None:
    wrong: Any = {
        "in-memory vector store": InMemoryVectorStore(embedding=make_embeddings()),
        "string": "./chroma",
        "none": None,
    }[kind]
    with pytest.raises(TypeError, match=r"expects a langchain_chroma\.Chroma store"):
        BridgeRetriever.from_vectorstore(wrong)


def test_a_bad_retriever_argument_fails_before_the_index_is_written(
    lc_demo_docs: list[Document], lc_embeddings: Any, tmp_path: Path
) -> None:
    """A typo once failed after the build had written the index, and the corrected retry was refused."""
    for bad in ({"k": 0}, {"search_kwargs": {"score_threshold": 0.3}}, {"include_abstracts": "yes"}):
        with pytest.raises((TypeError, ValueError)):
            BridgeRetriever.from_documents(
                lc_demo_docs[:2],
                embedding=lc_embeddings,
                persist_directory=tmp_path,
                show_progress=False,
                **bad,
            )
        assert not any(tmp_path.iterdir()), bad
    fixed = BridgeRetriever.from_documents(
        lc_demo_docs[:2], embedding=lc_embeddings, persist_directory=tmp_path, k=2, show_progress=False
    )
    assert fixed.k == 2
