from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("chromadb")

from core.store import DEFAULT_HNSW, ChunkStore, StoredChunks, sanitize_metadata


def _name() -> str:
    return f"test_{uuid.uuid4().hex[:12]}"


def _vectors(n: int, d: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32)


def _fill(store: ChunkStore, n: int, d: int = 8, seed: int = 0) -> tuple[list[str], np.ndarray]:
    ids = [f"c{i:03d}" for i in range(n)]
    vectors = _vectors(n, d, seed)
    store.add(
        ids, [f"text {i}" for i in range(n)], vectors, [{"doc_id": f"d{i % 3}", "i": i} for i in range(n)]
    )
    return ids, vectors


@pytest.fixture
def store() -> ChunkStore:
    return ChunkStore.ephemeral(_name())


# ------------------------------------------------------------------ construction


def test_ephemeral_wiring_and_default_hnsw(store: ChunkStore) -> None:
    assert store.location == {"kind": "ephemeral"}
    assert store.client is not None
    assert store.count() == 0
    assert store.dimension() is None
    config = store.collection.configuration_json["hnsw"]
    for key, value in DEFAULT_HNSW.items():
        assert config[key] == value


def test_hnsw_override_is_merged() -> None:
    s = ChunkStore.ephemeral(_name(), hnsw={"ef_search": 50})
    config = s.collection.configuration_json["hnsw"]
    assert config["ef_search"] == 50
    assert config["space"] == "cosine"


def test_wrapping_a_collection(store: ChunkStore) -> None:
    wrapped = ChunkStore(store.collection)
    assert wrapped.client is None
    assert wrapped.location == {"kind": "collection"}
    assert wrapped.name == store.name
    _fill(wrapped, 3)
    assert store.count() == 3


@pytest.mark.parametrize("name", ["ab", "-abc", "abc-", "has space", "a/b/c", "x" * 513, "ünï"])
def test_invalid_collection_names_are_rejected_before_chroma(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="3-512 characters"):
        ChunkStore.ephemeral(name)
    with pytest.raises(ValueError, match="3-512 characters"):
        ChunkStore.persistent(tmp_path / "db", name)
    assert not (tmp_path / "db").exists(), "Chroma must not have been called"


def test_persistent_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    first = ChunkStore.persistent(path, "persisted")
    assert first.location == {"kind": "persistent", "path": str(path.absolute())}
    ids, vectors = _fill(first, 5)
    first.close()

    again = ChunkStore.persistent(path, "persisted", create=False)
    got = again.get(ids)
    assert got.ids == ids
    assert got.texts == [f"text {i}" for i in range(5)]
    np.testing.assert_allclose(got.embeddings, vectors, rtol=1e-6)
    assert again.query(vectors[2], 1)[0][0] == "c002"
    again.close()


def test_persistent_without_create(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ChunkStore.persistent(tmp_path / "missing", create=False)
    ChunkStore.persistent(tmp_path / "db", "exists").close()
    with pytest.raises(ValueError, match="no collection 'other'"):
        ChunkStore.persistent(tmp_path / "db", "other", create=False)


# ------------------------------------------------------------------ add validation


def test_add_rejects_length_mismatch(store: ChunkStore) -> None:
    with pytest.raises(ValueError, match="same length"):
        store.add(["a", "b"], ["x"], _vectors(2), [{}, {}])
    with pytest.raises(ValueError, match="same length"):
        store.add(["a", "b"], ["x", "y"], _vectors(2), [{}])
    with pytest.raises(ValueError, match="2 ids but 3 embedding rows"):
        store.add(["a", "b"], ["x", "y"], _vectors(3), [{}, {}])
    assert store.count() == 0


def test_add_rejects_duplicate_ids(store: ChunkStore) -> None:
    with pytest.raises(ValueError, match="duplicate ids: 'b'"):
        store.add(["a", "b", "b"], ["x", "y", "z"], _vectors(3), [{}, {}, {}])
    assert store.count() == 0


def test_add_rejects_ids_already_present(store: ChunkStore) -> None:
    _fill(store, 3)
    with pytest.raises(ValueError, match=r"already in the collection.*'c001'"):
        store.add(["new", "c001"], ["x", "y"], _vectors(2), [{}, {}])
    assert store.count() == 3, "nothing was written"


@pytest.mark.parametrize(
    ("ids", "error"), [(["a", ""], ValueError), (["a", 3], TypeError), ("ab", TypeError)]
)
def test_add_rejects_bad_ids(store: ChunkStore, ids: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        store.add(ids, ["x", "y"], _vectors(2), [{}, {}])


def test_add_rejects_non_string_text(store: ChunkStore) -> None:
    with pytest.raises(TypeError, match="texts must be strings"):
        store.add(["a"], [None], _vectors(1), [{}])  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_add_names_the_non_finite_row(store: ChunkStore, bad: float) -> None:
    vectors = _vectors(4)
    vectors[2, 5] = bad
    with pytest.raises(ValueError, match="row 2 contains NaN or infinity"):
        store.add(list("abcd"), list("abcd"), vectors, [{}] * 4)
    assert store.count() == 0


@pytest.mark.parametrize(
    "embeddings",
    [
        np.ones(4, np.float32),
        np.ones((1, 2, 2), np.float32),
        np.array([["a", "b"]]),
        np.ones((1, 2), complex),
    ],
)
def test_add_rejects_bad_embedding_arrays(store: ChunkStore, embeddings: np.ndarray) -> None:
    with pytest.raises(ValueError, match="embeddings must"):
        store.add(["a"], ["x"], embeddings, [{}])


def test_add_rejects_a_different_dimension(store: ChunkStore) -> None:
    _fill(store, 2, d=8)
    with pytest.raises(ValueError, match="embedding dimension 5 differs from the collection's 8"):
        store.add(["z"], ["x"], _vectors(1, d=5), [{}])


def test_add_nothing_is_a_no_op(store: ChunkStore) -> None:
    store.add([], [], np.zeros((0, 8), np.float32), [])
    assert store.count() == 0


def test_add_accepts_float64_and_stores_float32(store: ChunkStore) -> None:
    vectors = _vectors(2).astype(np.float64)
    store.add(["a", "b"], ["x", "y"], vectors, [{}, {}])
    got = store.get(["a", "b"])
    assert got.embeddings is not None
    assert got.embeddings.dtype == np.float32
    assert got.embeddings.flags.c_contiguous
    assert got.metadatas == [{}, {}]


# ------------------------------------------------------------------ batching


def test_add_and_delete_in_batches(store: ChunkStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store.client, "get_max_batch_size", lambda: 3)
    adds: list[int] = []
    gets: list[int] = []
    deletes: list[int] = []
    real_add, real_get, real_delete = store.collection.add, store.collection.get, store.collection.delete

    def add(**kw: Any) -> Any:
        adds.append(len(kw["ids"]))
        return real_add(**kw)

    def get(**kw: Any) -> Any:
        if kw.get("ids") is not None:
            gets.append(len(kw["ids"]))
        return real_get(**kw)

    def delete(**kw: Any) -> Any:
        deletes.append(len(kw["ids"]))
        return real_delete(**kw)

    monkeypatch.setattr(store.collection, "add", add)
    monkeypatch.setattr(store.collection, "get", get)
    monkeypatch.setattr(store.collection, "delete", delete)
    ids, _ = _fill(store, 8)
    assert adds == [3, 3, 2]
    assert gets == [3, 3, 2], "one existence check per batch"
    assert store.count() == 8
    store.delete(ids[:7])
    assert deletes == [3, 3, 1]
    assert store.count() == 1


def test_wrapped_collection_uses_the_fallback_batch_size(store: ChunkStore) -> None:
    wrapped = ChunkStore(store.collection)
    assert wrapped._batch_size() == 1000


def test_show_progress_draws_a_bar(store: ChunkStore, capsys: pytest.CaptureFixture[str]) -> None:
    store.add(["a", "b"], ["x", "y"], _vectors(2), [{}, {}], show_progress=True)
    assert "storing chunks" in capsys.readouterr().err


# ------------------------------------------------------------------ metadata


def test_sanitize_metadata_rules() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing!"

    raw: dict[Any, Any] = {
        "s": "x",
        "i": 3,
        "f": 1.5,
        "b": True,
        "none": None,
        "nan": float("nan"),
        "inf": float("inf"),
        "list": [1, 2, 3],
        "list_nan": [1.0, float("nan"), 2.0],
        "mixed_num": [1, 2.5],
        "mixed": [1, "a"],
        "nested_list": [[1], [2]],
        "empty": [],
        "dict": {"a": {"b": 1}},
        "obj": Thing(),
        "set": {3},
        "dict_obj": {"t": Thing()},
        "np": np.float32(0.5),
        "np_int": np.int64(7),
        "np_arr": np.array([1, 2]),
        "huge": 2**70,
        7: "int key",
        "": "empty key",
        "#reserved": 1,
        "$op": 1,
        "chroma:document": "x",
        "chroma:tenant": "x",  # Chroma stores it, then never returns it
    }
    clean = sanitize_metadata(raw)
    assert clean == {
        "s": "x",
        "i": 3,
        "f": 1.5,
        "b": True,
        "list": [1, 2, 3],
        "list_nan": [1.0, 2.0],
        "mixed_num": [1.0, 2.5],
        "mixed": '[1, "a"]',
        "nested_list": "[[1], [2]]",
        "dict": '{"a": {"b": 1}}',
        "obj": "thing!",
        "set": "[3]",
        "dict_obj": '{"t": "thing!"}',
        "np": 0.5,
        "np_int": 7,
        "np_arr": [1, 2],
        "huge": str(2**70),
        "7": "int key",
    }
    assert type(clean["np_int"]) is int
    assert json.loads(clean["dict"]) == {"a": {"b": 1}}
    assert sanitize_metadata(None) == {}
    assert sanitize_metadata({"only": None}) == {}


def test_sanitized_metadata_round_trips_through_chroma(store: ChunkStore) -> None:
    metas = [
        {"nested": {"k": [1, {"x": None}]}, "none": None, "nan": math.nan, "tags": ["a", "b"], "n": 1},
        {"none": None},  # sanitises to {} -> stored as "no metadata"
    ]
    store.add(["m1", "m2"], ["x", "y"], _vectors(2), metas)
    got = store.get(["m1", "m2"])
    assert got.metadatas[0] == {"nested": '{"k": [1, {"x": null}]}', "tags": ["a", "b"], "n": 1}
    assert got.metadatas[1] == {}


# ------------------------------------------------------------------ reading


def test_get_in_requested_order_with_repeats(store: ChunkStore) -> None:
    _ids, vectors = _fill(store, 6)
    got = store.get(["c004", "c000", "c004", "c002"], batch_size=2)
    assert got.ids == ["c004", "c000", "c004", "c002"]
    assert got.texts == ["text 4", "text 0", "text 4", "text 2"]
    assert [m["i"] for m in got.metadatas] == [4, 0, 4, 2]
    assert got.embeddings is not None
    np.testing.assert_allclose(got.embeddings, vectors[[4, 0, 4, 2]], rtol=1e-6)
    assert len(got) == 4


def test_get_missing_ids_raise_key_error(store: ChunkStore) -> None:
    _fill(store, 3)
    with pytest.raises(KeyError, match=r"'nope'.*'gone'"):
        store.get(["c000", "nope", "gone"])
    assert store.get(["nope", "c000", "gone"], missing_ok=True).texts == ["text 0"]


def test_get_all_pages_through_the_collection(store: ChunkStore) -> None:
    ids, vectors = _fill(store, 7)
    got = store.get(batch_size=3)
    assert sorted(got.ids) == ids
    assert got.embeddings is not None
    assert got.embeddings.shape == (7, 8)
    for row, chunk_id in enumerate(got.ids):
        np.testing.assert_allclose(got.embeddings[row], vectors[ids.index(chunk_id)], rtol=1e-6)
    assert store.get(batch_size=3).ids == got.ids, "Chroma's order is stable"


def test_get_with_where_and_without_embeddings(store: ChunkStore) -> None:
    _fill(store, 9)
    got = store.get(where={"doc_id": "d1"}, include_embeddings=False, batch_size=2)
    assert sorted(got.ids) == ["c001", "c004", "c007"]
    assert got.embeddings is None
    # With ids, existing ids outside the filter are left out; unknown ids still raise.
    assert store.get(["c004", "c000", "c001"], where={"doc_id": "d1"}).ids == ["c004", "c001"]
    with pytest.raises(KeyError, match="'zzz'"):
        store.get(["c004", "zzz"], where={"doc_id": "d1"})


def test_get_on_empty_collection(store: ChunkStore) -> None:
    got = store.get()
    assert got == StoredChunks(ids=[], texts=[], metadatas=[], embeddings=got.embeddings)
    assert got.embeddings is not None
    assert got.embeddings.shape == (0, 0)
    assert store.get([]).ids == []
    with pytest.raises(ValueError, match="batch_size"):
        store.get(batch_size=0)


def test_query_orders_by_cosine_similarity(store: ChunkStore) -> None:
    base = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    vectors = np.array(
        [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0], [-1, 0, 0, 0], [2, 0.1, 0, 0]], dtype=np.float32
    )
    store.add(list("abcde"), list("ABCDE"), vectors, [{"g": i % 2} for i in range(5)])
    hits = store.query(base, 10)
    assert [h[0] for h in hits] == ["a", "e", "b", "c", "d"], "k capped at count()"
    expected = vectors @ base / np.linalg.norm(vectors, axis=1)
    for chunk_id, sim, text, meta in hits:
        row = "abcde".index(chunk_id)
        assert sim == pytest.approx(float(expected[row]), abs=1e-5)
        assert text == chunk_id.upper()
        assert meta == {"g": row % 2}
    assert [h[0] for h in store.query(base[None, :], 2)] == ["a", "e"]
    assert [h[0] for h in store.query(base, 5, where={"g": 1})] == ["b", "d"]


def test_query_edge_cases(store: ChunkStore) -> None:
    assert store.query(np.ones(4, np.float32), 3) == []
    _fill(store, 2, d=4)
    for k in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            store.query(np.ones(4, np.float32), k)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN"):
        store.query(np.array([1, np.nan, 0, 0], np.float32), 1)
    with pytest.raises(ValueError, match="1-D"):
        store.query(np.ones((2, 4), np.float32), 1)


# ------------------------------------------------------------------ deleting


def test_delete_and_delete_where(store: ChunkStore) -> None:
    _fill(store, 9)
    store.delete(["c000", "c001", "not-there"])
    store.delete([])
    assert store.count() == 7
    assert store.delete_where({"doc_id": "d2"}) == 3  # c002, c005, c008
    assert store.count() == 4
    assert sorted(store.get(include_embeddings=False).ids) == ["c003", "c004", "c006", "c007"]
    assert store.delete_where({"doc_id": "nobody"}) == 0
    with pytest.raises(ValueError, match="non-empty filter"):
        store.delete_where({})
    assert store.count() == 4


def test_a_deferred_store_opens_its_collection_on_first_use(tmp_path: Path) -> None:
    made = ChunkStore.persistent(tmp_path / "chroma", "deferred_c")
    made.add(["a"], ["hello"], np.ones((1, 4), np.float32), [{"doc_id": "d"}])
    made.close()
    opened: list[int] = []

    def opener() -> ChunkStore:
        opened.append(1)
        return ChunkStore.persistent(tmp_path / "chroma", "deferred_c", create=False)

    location = {"kind": "persistent", "path": str(tmp_path / "chroma")}
    store = ChunkStore.deferred(opener, "deferred_c", location)
    assert store.is_deferred
    assert store.name == "deferred_c"
    assert store.location == location
    assert opened == []
    assert store.count() == 1
    assert store.get(["a"]).texts == ["hello"]
    assert opened == [1]
    assert not store.is_deferred
    store.count()
    assert opened == [1]
    store.close()
    missing = ChunkStore.deferred(
        lambda: ChunkStore.persistent(tmp_path / "nowhere", "xyz", create=False), "xyz", location
    )
    missing.close()  # never opened: nothing to release
    with pytest.raises(FileNotFoundError, match="no Chroma data"):
        ChunkStore.deferred(
            lambda: ChunkStore.persistent(tmp_path / "nowhere", "xyz", create=False), "xyz", location
        ).count()


def test_recording_additions_keeps_what_this_object_wrote(store: ChunkStore) -> None:
    _fill(store, 2)  # rows written before the recording: not recorded
    vectors = np.ones((2, 8), dtype=np.float32)
    with store.recording_additions() as written:
        store.add(["mine-1", "mine-2"], ["a", "b"], vectors, [{}, {}])
        with pytest.raises(ValueError, match="already in the collection"):
            store.add(["mine-1", "mine-3"], ["a", "c"], vectors, [{}, {}])  # refused: writes nothing
        ChunkStore(store.collection).add(["other"], ["o"], vectors[:1], [{}])  # another writer's row
    store.add(["later"], ["l"], vectors[:1], [{}])
    assert written == ["mine-1", "mine-2"]
