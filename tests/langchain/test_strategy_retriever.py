from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from pydantic import ValidationError

import langchain_bridge
from core.types import Document as CoreDocument
from core.types import Retrieved
from langchain_bridge import StrategyRetriever, from_langchain_document, to_langchain_document
from tests.fake_strategy import FakeStrategy

QUERY = "Which iron tower is in Paris?"


@pytest.fixture
def strategy() -> FakeStrategy:
    return FakeStrategy()


@pytest.fixture
def retriever(strategy: FakeStrategy) -> StrategyRetriever:
    return StrategyRetriever(strategy=strategy, k=2)


def test_real_packages_are_not_shadowed() -> None:
    import langchain_core
    import llama_index.core

    assert langchain_core.__file__ is not None
    assert "site-packages" in langchain_core.__file__
    assert llama_index.core.__file__ is not None
    assert "site-packages" in llama_index.core.__file__


def test_all_exports() -> None:
    assert "StrategyRetriever" in langchain_bridge.__all__
    for name in langchain_bridge.__all__:
        assert hasattr(langchain_bridge, name)


def test_is_a_langchain_retriever(retriever: StrategyRetriever, strategy: FakeStrategy) -> None:
    assert isinstance(retriever, BaseRetriever)
    assert retriever.strategy is strategy  # pydantic neither copies nor wraps the native object
    assert StrategyRetriever.model_fields["k"].description


def test_invoke_maps_results(retriever: StrategyRetriever) -> None:
    docs = retriever.invoke(QUERY)

    assert [d.id for d in docs] == ["eiffel::0", "louvre::0"]
    top = docs[0]
    assert isinstance(top, Document)
    assert top.page_content == "The Eiffel Tower is a wrought iron tower in Paris."
    assert top.metadata["id"] == "eiffel::0"
    assert top.metadata["score"] == pytest.approx(5 / 6)
    assert top.metadata["source"] == "wiki/eiffel"
    assert top.metadata["doc_id"] == "eiffel"
    assert top.metadata["provenance"] == {
        "strategy": "fake",
        "matched": ["in", "iron", "is", "paris", "tower"],
        "depth": 1,
    }
    assert docs[0].metadata["score"] > docs[1].metadata["score"]


def test_default_k_is_four(strategy: FakeStrategy) -> None:
    retriever = StrategyRetriever(strategy=strategy)
    assert retriever.k == 4
    assert len(retriever.invoke(QUERY)) == 4
    assert strategy.calls[-1][1] == 4


@pytest.mark.parametrize("k", [1, 3, 5])
def test_k_at_construction(strategy: FakeStrategy, k: int) -> None:
    docs = StrategyRetriever(strategy=strategy, k=k).invoke(QUERY)
    assert len(docs) == k


def test_k_larger_than_corpus_returns_everything_that_matches(strategy: FakeStrategy) -> None:
    docs = StrategyRetriever(strategy=strategy, k=50).invoke("Paris Berlin iron")
    assert len(docs) == 6


def test_k_at_invoke_time_overrides_field(retriever: StrategyRetriever, strategy: FakeStrategy) -> None:
    assert len(retriever.invoke(QUERY, k=1)) == 1
    assert len(retriever.invoke(QUERY, k=3)) == 3
    assert strategy.calls[-1][1] == 3
    assert len(retriever.invoke(QUERY)) == 2  # the field is untouched


def test_k_none_at_invoke_time_keeps_field(retriever: StrategyRetriever) -> None:
    assert len(retriever.invoke(QUERY, k=None)) == 2


def test_search_kwargs_are_forwarded(strategy: FakeStrategy) -> None:
    retriever = StrategyRetriever(strategy=strategy, k=3, search_kwargs={"depth": 2, "min_score": 0.5})
    docs = retriever.invoke(QUERY)

    assert strategy.calls[-1][2] == {"depth": 2, "min_score": 0.5}
    assert [d.id for d in docs] == ["eiffel::0", "louvre::0", "ore::0"]
    assert all(d.metadata["provenance"]["depth"] == 2 for d in docs)
    assert all(d.metadata["score"] >= 0.5 for d in docs)


def test_invoke_kwargs_override_search_kwargs(strategy: FakeStrategy) -> None:
    retriever = StrategyRetriever(strategy=strategy, search_kwargs={"depth": 2, "min_score": 0.5})
    docs = retriever.invoke(QUERY, depth=3)

    assert strategy.calls[-1][2] == {"depth": 3, "min_score": 0.5}
    assert all(d.metadata["provenance"]["depth"] == 3 for d in docs)
    assert retriever.search_kwargs == {"depth": 2, "min_score": 0.5}


def test_langchain_verbose_kwarg_is_not_forwarded(
    retriever: StrategyRetriever, strategy: FakeStrategy
) -> None:
    retriever.invoke(QUERY, verbose=False)
    assert strategy.calls[-1][2] == {}


def test_unknown_option_error_comes_from_strategy(retriever: StrategyRetriever) -> None:
    with pytest.raises(TypeError, match="unexpected retrieve options"):
        retriever.invoke(QUERY, colour="blue")


def test_search_kwargs_k_is_the_langchain_spelling_of_k(strategy: FakeStrategy) -> None:
    source = {"k": 3, "depth": 2}
    retriever = StrategyRetriever(strategy=strategy, search_kwargs=source)

    assert retriever.k == 3
    assert retriever.search_kwargs == {"depth": 2}
    assert source == {"k": 3, "depth": 2}  # the caller's dict is not modified
    assert len(retriever.invoke(QUERY)) == 3


def test_search_kwargs_k_conflicting_with_k_is_rejected(strategy: FakeStrategy) -> None:
    with pytest.raises(ValidationError, match="k is given twice"):
        StrategyRetriever(strategy=strategy, k=2, search_kwargs={"k": 3})


def test_search_kwargs_query_is_rejected(strategy: FakeStrategy) -> None:
    with pytest.raises(ValidationError, match="may not contain"):
        StrategyRetriever(strategy=strategy, search_kwargs={"query": "x"})


@pytest.mark.parametrize("k", [0, -1, "3", 2.0, True, None])
def test_bad_k_at_construction(strategy: FakeStrategy, k: Any) -> None:
    with pytest.raises(ValidationError, match="k must be"):
        StrategyRetriever(strategy=strategy, k=k)


def test_bad_strategy_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"core\.strategies\.Strategy"):
        StrategyRetriever(strategy=object())


@pytest.mark.parametrize(
    ("query", "error", "match"),
    [
        ("", ValueError, "query is empty"),
        ("   ", ValueError, "query is empty"),
        (None, TypeError, "query must be a str"),
        (42, TypeError, "query must be a str"),
    ],
)
def test_bad_query_errors_propagate_unchanged(
    retriever: StrategyRetriever, query: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        retriever.invoke(query)


@pytest.mark.parametrize(
    ("k", "error", "match"),
    [
        (0, ValueError, "k must be >= 1"),
        (-2, ValueError, "k must be >= 1"),
        ("3", TypeError, "k must be an int"),
    ],
)
def test_bad_k_at_invoke_time(
    retriever: StrategyRetriever, k: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        retriever.invoke(QUERY, k=k)


async def test_bad_input_propagates_from_ainvoke(retriever: StrategyRetriever) -> None:
    with pytest.raises(ValueError, match="query is empty"):
        await retriever.ainvoke("")
    with pytest.raises(TypeError, match="k must be an int"):
        await retriever.ainvoke(QUERY, k="3")


async def test_ainvoke_matches_invoke(retriever: StrategyRetriever) -> None:
    assert await retriever.ainvoke(QUERY) == retriever.invoke(QUERY)
    assert len(await retriever.ainvoke(QUERY, k=3)) == 3


async def test_ainvoke_forwards_kwargs(strategy: FakeStrategy) -> None:
    retriever = StrategyRetriever(strategy=strategy, search_kwargs={"depth": 2})
    docs = await retriever.ainvoke(QUERY, k=1, min_score=0.5)
    assert len(docs) == 1
    assert strategy.calls[-1][1:3] == (1, {"depth": 2, "min_score": 0.5})


async def test_ainvoke_runs_in_a_worker_thread(retriever: StrategyRetriever, strategy: FakeStrategy) -> None:
    await retriever.ainvoke(QUERY)
    assert strategy.calls[-1][3] != threading.get_ident()


async def test_ainvoke_calls_run_concurrently() -> None:
    # Both retrievals must be inside the strategy at once to pass the barrier; if ainvoke
    # blocked the event loop (or serialised calls) the barrier would break instead.
    barrier = threading.Barrier(2, timeout=30)
    retriever = StrategyRetriever(strategy=FakeStrategy(hook=barrier.wait), k=1)
    first, second = await asyncio.gather(retriever.ainvoke(QUERY), retriever.ainvoke("capital of Germany"))
    assert [d.id for d in first] == ["eiffel::0"]
    assert [d.id for d in second] == ["berlin::0"]


def test_batch(retriever: StrategyRetriever) -> None:
    results = retriever.batch([QUERY, "capital of Germany"])
    assert [[d.id for d in docs] for docs in results] == [
        ["eiffel::0", "louvre::0"],
        ["berlin::0", "paris::0"],
    ]


def test_batch_with_kwargs(retriever: StrategyRetriever) -> None:
    results = retriever.batch([QUERY, "capital of Germany"], k=1)
    assert [len(docs) for docs in results] == [1, 1]


async def test_abatch(retriever: StrategyRetriever) -> None:
    results = await retriever.abatch([QUERY, "capital of Germany"])
    assert [docs[0].id for docs in results] == ["eiffel::0", "berlin::0"]


def test_batch_return_exceptions(retriever: StrategyRetriever) -> None:
    results = retriever.batch([QUERY, ""], return_exceptions=True)
    assert isinstance(results[0], list)
    assert isinstance(results[1], ValueError)


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def test_in_a_chain(retriever: StrategyRetriever) -> None:
    chain = retriever | RunnableLambda(format_docs)
    assert chain.invoke(QUERY) == (
        "The Eiffel Tower is a wrought iron tower in Paris.\n\nThe Louvre in Paris is the largest art museum."
    )


async def test_in_a_chain_async(retriever: StrategyRetriever) -> None:
    chain = retriever | RunnableLambda(format_docs)
    assert (await chain.ainvoke(QUERY)).startswith("The Eiffel Tower")


def test_callbacks_see_the_run(retriever: StrategyRetriever) -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    class Recorder(BaseCallbackHandler):
        def __init__(self) -> None:
            self.events: list[str] = []

        def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
            self.events.append(f"start:{query}")

        def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
            self.events.append(f"end:{len(documents)}")

    recorder = Recorder()
    retriever.invoke(QUERY, config={"callbacks": [recorder]})
    assert recorder.events == [f"start:{QUERY}", "end:2"]


def test_to_langchain_document() -> None:
    r = Retrieved(id="d::1", text="hello", score=0.25, metadata={"doc_id": "d", "via": ["x"]})
    doc = to_langchain_document(r)
    assert doc.id == "d::1"
    assert doc.page_content == "hello"
    assert doc.metadata == {"doc_id": "d", "via": ["x"], "id": "d::1", "score": 0.25}
    assert r.metadata == {"doc_id": "d", "via": ["x"]}  # the result is not modified


@pytest.mark.parametrize(
    ("doc", "expected_id"),
    [
        (Document(page_content="t", id="a", metadata={"id": "b", "doc_id": "c"}), "a"),
        (Document(page_content="t", metadata={"id": "b", "doc_id": "c"}), "b"),
        (Document(page_content="t", metadata={"doc_id": "c"}), "c"),
        (Document(page_content="t", metadata={"doc_id": 7}), "7"),
        (Document(page_content="t", metadata={"x": 1}), None),
    ],
)
def test_from_langchain_document(doc: Document, expected_id: str | None) -> None:
    core_doc = from_langchain_document(doc)
    assert isinstance(core_doc, CoreDocument)
    assert core_doc.text == "t"
    assert core_doc.id == expected_id
    assert dict(core_doc.metadata) == doc.metadata
    assert core_doc.metadata is not doc.metadata


def test_documents_round_trip_into_a_strategy() -> None:
    strategy = FakeStrategy(documents=[])
    ids = strategy.add_documents(
        [from_langchain_document(Document(page_content="Rome is in Italy.", id="rome", metadata={"n": 1}))]
    )
    assert ids == ["rome"]
    [doc] = StrategyRetriever(strategy=strategy).invoke("Rome")
    assert doc.metadata["doc_id"] == "rome"
    assert doc.metadata["n"] == 1


class _AbstractAwareStrategy(FakeStrategy):
    """Accepts include_abstracts (as BridgeRAG does) and records the options it got."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def retrieve(self, query: str, k: int | None = None, **options: Any) -> Any:
        self.seen.append(dict(options))
        options.pop("include_abstracts", None)
        return super().retrieve(query, k=k, **options)


def test_bridge_retriever_depth_and_abstract_fields_are_forwarded() -> None:
    from langchain_bridge import BridgeRetriever

    class AnyBridgeRetriever(BridgeRetriever):
        """BridgeRetriever's fields over any strategy (the named class insists on BridgeRAG)."""

        strategy_cls = None

    strategy = _AbstractAwareStrategy()
    with pytest.raises(ValidationError, match=r"strategy must be a core\.strategies\.bridge\.BridgeRAG"):
        BridgeRetriever(strategy=strategy)
    BridgeRetriever = AnyBridgeRetriever  # noqa: N806
    retriever = BridgeRetriever(strategy=strategy, k=2, depth=3, include_abstracts=True)
    retriever.invoke("Which iron tower is in Paris?")
    assert strategy.seen[-1] == {"depth": 3, "include_abstracts": True}
    retriever.invoke("Which iron tower is in Paris?", depth=1)
    assert strategy.seen[-1] == {"depth": 1, "include_abstracts": True}
    plain = BridgeRetriever(strategy=strategy, search_kwargs={"depth": 0})
    plain.invoke("Which iron tower is in Paris?")
    assert strategy.seen[-1] == {"depth": 0}
    with pytest.raises(ValueError, match="depth must be >= 0"):
        BridgeRetriever(strategy=strategy, depth=-1)
