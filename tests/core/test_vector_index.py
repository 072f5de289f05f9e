"""VectorIndex: exact below the threshold, faiss HNSW above, filters, persistence, bad input."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap

import numpy as np
import numpy.typing as npt
import pytest

from core.vector_index import ENGINE_FILE, HEADER_FILE, ROWS_FILE, HnswSettings, VectorIndex

FloatMatrix = npt.NDArray[np.float32]


def _unit(rows: npt.NDArray[np.float64]) -> FloatMatrix:
    out = np.asarray(rows, dtype=np.float32)
    return np.ascontiguousarray(out / np.linalg.norm(out, axis=1, keepdims=True))


def _clustered(n: int, seed: int = 0, dim: int = 64, centers: int = 100, noise: float = 0.35) -> FloatMatrix:
    """Unit vectors around random centres: the neighbourhood structure real embeddings have.

    Uniformly random vectors in 64 dimensions have no near neighbours (every cosine is about
    0), which no approximate index is built for; clustered data is the fair synthetic test.
    """
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centers, dim))
    return _unit(c[rng.integers(0, centers, n)] + noise * rng.normal(size=(n, dim)))


def _queries(x: FloatMatrix, n: int, seed: int = 1) -> FloatMatrix:
    rng = np.random.default_rng(seed)
    return _unit(x[rng.integers(0, x.shape[0], n)] + 0.05 * rng.normal(size=(n, x.shape[1])))


def _brute(q: FloatMatrix, x: FloatMatrix, rows: npt.NDArray[np.int64], k: int) -> list[list[int]]:
    sims = _unit(q) @ x[rows].T
    return [rows[np.lexsort((rows, -s))[:k]].tolist() for s in sims]


def _recall(found: npt.NDArray[np.int64], truth: list[list[int]]) -> float:
    return float(
        np.mean(
            [
                len(set(f[f >= 0].tolist()) & set(t)) / max(1, len(t))
                for f, t in zip(found, truth, strict=True)
            ]
        )
    )


@pytest.fixture(scope="module")
def big() -> tuple[FloatMatrix, VectorIndex]:
    x = _clustered(20_000)
    return x, VectorIndex.build(x, exact_below=1000)


@pytest.fixture(scope="module")
def small_engine() -> tuple[FloatMatrix, VectorIndex]:
    x = _clustered(3000, seed=3, dim=16, centers=30)
    return x, VectorIndex.build(x, exact_below=0, settings=HnswSettings(m=8, ef_construction=64))


# ---------------------------------------------------------------------- exact mode


def test_below_the_threshold_the_search_is_exact_with_ties_by_row() -> None:
    x = _clustered(500, dim=32)
    x[7] = x[3]
    x[100] = x[3]
    q = np.vstack([x[3], _queries(x, 9)])
    index = VectorIndex.build(x)
    assert not index.uses_engine
    assert len(index) == 500
    ids, scores = index.search(q, x, 5)
    assert ids.tolist() == _brute(q, x, np.arange(500), 5)
    assert ids[0, :3].tolist() == [3, 7, 100]
    assert ids.dtype == np.int64
    assert scores.dtype == np.float32
    assert np.allclose(scores, np.sort(_unit(q) @ x.T, axis=1)[:, ::-1][:, :5], atol=1e-5)


def test_a_subset_of_rows_and_short_results_are_padded() -> None:
    x = _clustered(300, dim=16)
    rows = np.arange(0, 300, 3)
    index = VectorIndex.build(x, rows)
    ids, _ = index.search(x[:4], x, 2)
    assert ids.tolist() == _brute(x[:4], x, rows, 2)
    tiny = VectorIndex.build(x, np.asarray([9, 5, 5]))
    assert len(tiny) == 2
    ids, scores = tiny.search(x[:1], x, 4)
    assert sorted(ids[0, :2].tolist()) == [5, 9]
    assert ids[0, 2:].tolist() == [-1, -1]
    assert np.isneginf(scores[0, 2:]).all()
    empty = VectorIndex.build(x, np.zeros(0, dtype=np.int64))
    ids, scores = empty.search(x[:2], x, 3)
    assert ids.shape == (2, 3)
    assert (ids == -1).all()
    assert np.isneginf(scores).all()
    ids, scores = index.search(x[:2], x, 0)
    assert ids.shape == (2, 0)
    assert scores.shape == (2, 0)


def test_a_zero_query_scores_zero_and_takes_the_lowest_rows(
    small_engine: tuple[FloatMatrix, VectorIndex],
) -> None:
    x, engine = small_engine
    exact = VectorIndex.build(x, exact_below=10**9)
    for index in (exact, engine):
        ids, scores = index.search(np.zeros((1, x.shape[1]), np.float32), x, 3)
        assert ids.tolist() == [[0, 1, 2]]
        assert scores.tolist() == [[0.0, 0.0, 0.0]]


# ---------------------------------------------------------------------- engine mode


def test_the_engine_finds_the_true_neighbours(big: tuple[FloatMatrix, VectorIndex]) -> None:
    x, index = big
    assert index.uses_engine
    assert len(index) == 20_000
    q = _queries(x, 300)
    truth = _brute(q, x, np.arange(x.shape[0]), 10)
    ids, scores = index.search(q, x, 10)
    assert _recall(ids, truth) >= 0.99
    # best first, scores are the exact cosines of the returned rows
    assert np.all(np.diff(scores, axis=1) <= 0)
    assert np.allclose(scores, np.einsum("qd,qkd->qk", q, x[ids]), atol=1e-5)
    # one query at a time gives the batch's answer
    single = np.vstack([index.search(q[i : i + 1], x, 10)[0] for i in range(20)])
    assert np.array_equal(single, ids[:20])


def test_the_build_is_deterministic_and_persistence_keeps_it() -> None:
    x = _clustered(1500, seed=4, dim=16, centers=20)
    settings = HnswSettings(m=8, ef_construction=40)
    a = VectorIndex.build(x, exact_below=0, seed=7, settings=settings)
    b = VectorIndex.build(x, exact_below=0, seed=7, settings=settings)
    assert a.to_files() == b.to_files()
    assert VectorIndex.build(x, exact_below=0, seed=8, settings=settings).to_files() != a.to_files()
    # add() after a save and load grows the same graph as add() without one
    grown = _clustered(1800, seed=4, dim=16, centers=20)
    grown[:1500] = x
    part = VectorIndex.build(grown, np.arange(1200), exact_below=0, seed=7, settings=settings)
    loaded = VectorIndex.from_files(part.to_files(), grown)
    part.add(grown, np.arange(1200, 1800))
    loaded.add(grown, np.arange(1200, 1800))
    assert part.to_files() == loaded.to_files()


# ---------------------------------------------------------------------- add


def test_add_indexes_new_rows_and_crosses_into_the_engine() -> None:
    x = _clustered(2000, seed=5, dim=16, centers=20)
    index = VectorIndex.build(
        x, np.arange(500), exact_below=1000, settings=HnswSettings(m=8, ef_construction=40)
    )
    assert not index.uses_engine
    index.add(x, np.arange(500, 800))
    assert not index.uses_engine
    assert len(index) == 800
    ids, _ = index.search(x[700:701], x, 1)
    assert ids.tolist() == [[700]]
    index.add(x, np.arange(800, 1500))
    assert index.uses_engine
    assert len(index) == 1500
    index.add(x, np.arange(1500, 2000))
    assert len(index) == 2000
    q = x[1500:2000]
    ids, scores = index.search(q, x, 1)
    assert np.mean(ids[:, 0] == np.arange(1500, 2000)) >= 0.99
    assert np.allclose(scores[ids[:, 0] == np.arange(1500, 2000), 0], 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="already indexed"):
        index.add(x, np.asarray([3]))
    with pytest.raises(ValueError, match="within"):
        index.add(x, np.asarray([2000]))
    with pytest.raises(ValueError, match="unique"):
        VectorIndex.build(x, np.arange(10)).add(x, np.asarray([11, 11]))


def test_a_copy_grows_without_changing_the_original() -> None:
    x = _clustered(1500, seed=6, dim=16, centers=20)
    index = VectorIndex.build(x, np.arange(1000), exact_below=100, settings=HnswSettings(m=8))
    before = index.search(x[:50], x, 5)
    files = index.to_files()
    assert index.with_rows(x, np.zeros(0, np.int64)) is index  # nothing to add: the same index
    grown = index.with_rows(x, np.arange(1000, 1500))
    assert grown is not index
    assert len(index) == 1000
    assert len(grown) == 1500
    assert index.to_files() == files  # the original graph is untouched
    after = index.search(x[:50], x, 5)
    assert np.array_equal(before[0], after[0])
    ids, _ = grown.search(x[1400:1401], x, 1)
    assert ids.tolist() == [[1400]]
    # growing a copy gives the graph that growing the original in place gives
    index.add(x, np.arange(1000, 1500))
    assert index.to_files() == grown.to_files()


def test_a_mask_that_allows_nearly_every_row_keeps_the_unfiltered_effort(
    big: tuple[FloatMatrix, VectorIndex],
) -> None:
    x, index = big
    q = x[:100]
    plain = index.search(q, x, 10)
    every = index.search(q, x, 10, allowed=np.ones(x.shape[0], bool))
    assert np.array_equal(plain[0], every[0])  # an all-true mask is no filter
    live = np.ones(x.shape[0], bool)
    live[::20] = False  # 5 % deleted
    ids, _ = index.search(q, x, 10, allowed=live)
    assert live[ids[ids >= 0]].all()
    exact = np.argsort(-(q @ x[live].T), axis=1)[:, :10]
    truth = np.flatnonzero(live)[exact]
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids.tolist(), truth.tolist(), strict=True)])
    assert recall >= 0.95


# ---------------------------------------------------------------------- allowed masks


def _masks(n: int, seed: int) -> list[npt.NDArray[np.bool_]]:
    rng = np.random.default_rng(seed)
    out = [np.zeros(n, bool), np.ones(n, bool)]
    one = np.zeros(n, bool)
    one[rng.integers(0, n)] = True
    out.append(one)
    for frac in (0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.9):
        for _ in range(3):
            out.append(rng.random(n) < frac)
    return out


@pytest.mark.parametrize("mode", ["exact", "engine", "engine-filtered"])
def test_allowed_rows_only_and_exact_when_few(
    mode: str, small_engine: tuple[FloatMatrix, VectorIndex]
) -> None:
    x, engine = small_engine
    n = x.shape[0]
    index = VectorIndex.build(x, exact_below=10**9) if mode == "exact" else engine
    feb = 0 if mode == "engine-filtered" else 2048  # 0 forces the filtered HNSW path above 5 %
    q = _queries(x, 40, seed=9)
    recalls = []
    for mask in _masks(n, seed=11):
        ids, scores = index.search(q, x, 10, allowed=mask, filter_exact_below=feb)
        found = ids[ids >= 0]
        assert mask[found].all(), "a disallowed row was returned"
        allowed = int(mask.sum())
        # every query gets min(k, allowed) rows: the engine falls back to the exact scan
        assert ((ids >= 0).sum(axis=1) == min(10, allowed)).all()
        assert np.isneginf(scores[ids < 0]).all()
        truth = _brute(q, x, np.flatnonzero(mask), 10)
        if mode == "exact" or allowed < max(feb, 0.05 * n) or allowed <= 40:
            assert ids[:, : min(10, allowed)].tolist() == [t[: min(10, allowed)] for t in truth]
        elif allowed:
            recalls.append(_recall(ids, truth))
    if recalls:
        assert min(recalls) >= 0.9


def test_a_subset_index_with_a_mask_never_returns_unindexed_rows() -> None:
    x = _clustered(4000, seed=6, dim=16, centers=20)
    rows = np.arange(0, 4000, 2)
    index = VectorIndex.build(x, rows, exact_below=0, settings=HnswSettings(m=8, ef_construction=40))
    mask = np.random.default_rng(0).random(4000) < 0.5
    for feb in (0, 10**6):
        ids, _ = index.search(_queries(x, 30), x, 10, allowed=mask, filter_exact_below=feb)
        found = ids[ids >= 0]
        assert mask[found].all()
        assert np.all(found % 2 == 0)


# ---------------------------------------------------------------------- shards

_SHARDED = HnswSettings(m=8, ef_construction=40, shard_rows=700)


def test_a_large_index_is_split_into_graphs_each_built_as_alone() -> None:
    x = _clustered(2000, seed=11, dim=16, centers=20)
    one = VectorIndex.build(x, exact_below=0, seed=3, settings=_SHARDED)
    two = VectorIndex.build(x, exact_below=0, seed=3, settings=_SHARDED, workers=2)
    files = one.to_files()
    assert one.shards == 3
    assert repr(one) == "VectorIndex(rows=2000, dim=16, mode='hnsw x3')"
    assert two.to_files() == files  # the same bytes whatever the number of threads
    assert {ENGINE_FILE, "vector_index.1.faiss", "vector_index.2.faiss"} <= set(files)
    assert [d["rows"] for d in json.loads(files[HEADER_FILE])["shards"]] == [700, 700, 600]
    # graph 0 is the graph an index of its rows alone has
    alone = VectorIndex.build(x, np.arange(700), exact_below=0, seed=3, settings=_SHARDED)
    assert alone.shards == 1
    assert alone.to_files()[ENGINE_FILE] == files[ENGINE_FILE]
    # a one-graph index of the same rows answers the same questions as well
    q = _queries(x, 200)
    truth = _brute(q, x, np.arange(2000), 10)
    single = VectorIndex.build(x, exact_below=0, seed=3, settings=HnswSettings(m=8, ef_construction=40))
    assert single.shards == 1
    found, scores = one.search(q, x, 10)
    assert _recall(found, truth) >= max(0.95, _recall(single.search(q, x, 10)[0], truth) - 0.02)
    assert np.all(np.diff(scores, axis=1) <= 0)  # best first across the graphs
    assert all(len(set(r.tolist())) == 10 for r in found)  # no row twice
    assert np.allclose(scores, np.einsum("qkd,qd->qk", x[found], q), atol=1e-5)


def test_a_filtered_search_over_graphs_keeps_to_the_allowed_rows() -> None:
    x = _clustered(2000, seed=12, dim=16, centers=20)
    index = VectorIndex.build(x, exact_below=0, settings=_SHARDED)
    q = _queries(x, 50)
    allowed = np.zeros(2000, dtype=bool)
    allowed[700:1400] = True  # graph 1 only: graphs 0 and 2 are not searched
    allowed[1950:] = True
    ids, _ = index.search(q, x, 10, allowed=allowed, filter_exact_below=0)
    assert allowed[ids[ids >= 0]].all()
    truth = _brute(q, x, np.flatnonzero(allowed), 10)
    assert _recall(ids, truth) >= 0.95


def test_adding_fills_the_last_graph_then_starts_new_ones() -> None:
    x = _clustered(1900, seed=13, dim=16, centers=20)
    index = VectorIndex.build(x, np.arange(1000), exact_below=0, seed=5, settings=_SHARDED)
    assert index.shards == 2
    before = index.to_files()
    grown = index.with_rows(x, np.arange(1000, 1900), workers=2)
    assert index.to_files() == before  # the original is untouched
    assert grown.shards == 3
    assert grown._engines[0] is index._engines[0]  # a full graph is shared, not cloned
    assert grown._engines[1] is not index._engines[1]
    # batches of 100 from position 0 either way: growing gives the graphs a build gives
    assert grown.to_files() == VectorIndex.build(x, exact_below=0, seed=5, settings=_SHARDED).to_files()
    ids, _ = grown.search(x[1850:1851], x, 1)
    assert ids.tolist() == [[1850]]


def test_graphs_round_trip_and_each_file_is_checked() -> None:
    x = _clustered(1500, seed=14, dim=16, centers=20)
    index = VectorIndex.build(x, exact_below=0, settings=_SHARDED)
    files = index.to_files("e_")
    loaded = VectorIndex.from_files(files, x, "e_")
    assert loaded.shards == 3
    q = _queries(x, 30)
    assert all(
        np.array_equal(a, b) for a, b in zip(index.search(q, x, 5), loaded.search(q, x, 5), strict=True)
    )
    assert loaded.to_files("e_") == files
    second = "e_vector_index.1.faiss"
    blob = files[second]
    for damaged in (
        {k: v for k, v in files.items() if k != second},
        {**files, second: blob[:-4]},
        {**files, second: bytes([blob[0] ^ 1]) + blob[1:]},
    ):
        with pytest.raises(ValueError, match="rebuild the index"):
            VectorIndex.from_files(damaged, x, "e_")
    header = json.loads(files["e_" + HEADER_FILE])
    header["shards"][1]["rows"] = 699
    with pytest.raises(ValueError, match="rebuild the index"):
        VectorIndex.from_files({**files, "e_" + HEADER_FILE: json.dumps(header).encode()}, x, "e_")


def test_a_version_1_index_still_loads() -> None:
    """An index saved before graphs were split: one graph, described by the header itself."""
    x, files = _engine_files()
    header = json.loads(files[HEADER_FILE])
    graph = header.pop("shards")[0]
    del header["settings"]["shard_rows"]
    header.update(version=1, engine_bytes=graph["bytes"], engine_sha256=graph["sha256"])
    old = {**files, HEADER_FILE: json.dumps(header).encode()}
    loaded = VectorIndex.from_files(old, x)
    assert loaded.settings.shard_rows == HnswSettings().shard_rows
    assert loaded.to_files()[ENGINE_FILE] == files[ENGINE_FILE]
    with pytest.raises(ValueError, match="rebuild the index"):
        VectorIndex.from_files(_with_header(old, engine_sha256="0" * 64), x)


# ---------------------------------------------------------------------- persistence


@pytest.mark.parametrize("exact_below", [10**9, 0])
def test_round_trip_gives_identical_results(exact_below: int) -> None:
    x = _clustered(1200, seed=2, dim=16, centers=20)
    index = VectorIndex.build(x, np.arange(0, 1200, 2), exact_below=exact_below, settings=HnswSettings(m=8))
    files = index.to_files("nodes_")
    assert set(files) >= {f"nodes_{HEADER_FILE}", f"nodes_{ROWS_FILE}"}
    assert (f"nodes_{ENGINE_FILE}" in files) == index.uses_engine
    loaded = VectorIndex.from_files(files, x, prefix="nodes_")
    assert loaded.uses_engine == index.uses_engine
    assert len(loaded) == len(index)
    q = _queries(x, 50)
    mask = np.random.default_rng(1).random(1200) < 0.3
    for allowed in (None, mask):
        a = index.search(q, x, 10, allowed=allowed, filter_exact_below=0)
        b = loaded.search(q, x, 10, allowed=allowed, filter_exact_below=0)
        assert np.array_equal(a[0], b[0])
        assert np.array_equal(a[1], b[1])
    assert loaded.to_files("nodes_") == files
    header = json.loads(files[f"nodes_{HEADER_FILE}"])
    assert header["version"] == 2
    assert [d["rows"] for d in header["shards"]] == ([600] if index.uses_engine else [])
    assert header["dim"] == 16
    assert header["rows"] == 600


def _engine_files() -> tuple[FloatMatrix, dict[str, bytes]]:
    x = _clustered(400, seed=8, dim=8, centers=10)
    return x, VectorIndex.build(x, exact_below=0, settings=HnswSettings(m=4, ef_construction=20)).to_files()


def _with_header(files: dict[str, bytes], **changes: object) -> dict[str, bytes]:
    header = json.loads(files[HEADER_FILE])
    header.update(changes)
    return {**files, HEADER_FILE: json.dumps(header).encode()}


def _with_graph(files: dict[str, bytes], blob: bytes) -> dict[str, bytes]:
    """``files`` with graph 0's bytes replaced and described by a valid length and digest."""
    header = json.loads(files[HEADER_FILE])
    header["shards"][0].update(bytes=len(blob), sha256=hashlib.sha256(blob).hexdigest())
    return {**files, ENGINE_FILE: blob, HEADER_FILE: json.dumps(header).encode()}


def test_from_files_rejects_damaged_bytes() -> None:
    x, files = _engine_files()
    blob = files[ENGINE_FILE]
    rng = np.random.default_rng(0)
    bad: list[dict[str, bytes]] = [
        {**files, ENGINE_FILE: blob[: len(blob) // 2]},
        {**files, ENGINE_FILE: blob[:-1]},
        {**files, ENGINE_FILE: blob + b"\0"},
        {**files, ENGINE_FILE: rng.bytes(len(blob))},
        {**files, ENGINE_FILE: b""},
        {**files, HEADER_FILE: b"not json"},
        {**files, HEADER_FILE: b"[1, 2]"},
        {**files, HEADER_FILE: files[HEADER_FILE][:-3]},
        {**files, ROWS_FILE: files[ROWS_FILE][:-8]},
        {**files, ROWS_FILE: rng.bytes(200)},
        {k: v for k, v in files.items() if k != ENGINE_FILE},
        {k: v for k, v in files.items() if k != ROWS_FILE},
        {k: v for k, v in files.items() if k != HEADER_FILE},
        _with_header(files, version=3),
        _with_header(files, version=True),
        _with_header(files, shards=[]),
        _with_header(files, shards=[{"rows": 399, "bytes": len(blob), "sha256": "0" * 64}]),
        _with_header(files, shards="graph"),
        _with_header(files, engine="usearch"),
        _with_header(files, rows=401),
        _with_header(files, dim=9),
        _with_header(files, rows="400"),
        _with_header(files, settings={"m": 4}),
        _with_header(
            files,
            settings={
                "m": 0,
                "ef_construction": 20,
                "ef_search": 128,
                "filtered_ef_search": 256,
                "shard_rows": 1000,
            },
        ),
        _with_header(
            files, settings={"m": 4, "ef_construction": 20, "ef_search": 96, "filtered_ef_search": 256}
        ),
        _with_header(files, metric="l2"),
    ]
    for pos in rng.integers(0, len(blob), 40):  # bit flips: caught by the digest
        flipped = bytearray(blob)
        flipped[pos] ^= 1 << int(rng.integers(0, 8))
        bad.append({**files, ENGINE_FILE: bytes(flipped)})
    for damaged in bad:
        with pytest.raises(ValueError, match="rebuild the index"):
            VectorIndex.from_files(damaged, x)


def test_from_files_rejects_a_matrix_that_does_not_fit() -> None:
    x, files = _engine_files()
    with pytest.raises(ValueError, match="dimension"):
        VectorIndex.from_files(files, np.ascontiguousarray(np.hstack([x, x])))
    with pytest.raises(ValueError, match="outside the matrix"):
        VectorIndex.from_files(files, x[:300])
    other = x.copy()
    other[17] = other[18]
    with pytest.raises(ValueError, match="differ from the matrix"):
        VectorIndex.from_files(files, other)
    rows = VectorIndex.build(x, np.asarray([1, 399])).to_files()
    with pytest.raises(ValueError, match="outside the matrix"):
        VectorIndex.from_files(rows, x[:100])
    with pytest.raises(ValueError, match="float32"):
        VectorIndex.from_files(files, x.astype(np.float64))


def test_forged_engine_bytes_with_a_valid_digest_are_checked_before_faiss() -> None:
    """A size field announcing terabytes is refused by the walk, never allocated by faiss."""
    x, files = _engine_files()
    blob = bytearray(files[ENGINE_FILE])
    blob[4 + 4 + 8 + 16 + 1 + 4 : 4 + 4 + 8 + 16 + 1 + 4 + 8] = (2**39).to_bytes(8, "little")  # level probs
    forged = bytes(blob)
    digest = hashlib.sha256(forged).hexdigest()
    with pytest.raises(ValueError, match="past their end"):
        VectorIndex.from_files(_with_graph(files, forged), x)
    header = json.loads(files[HEADER_FILE])  # the same in a version 1 header
    settings = {k: v for k, v in header["settings"].items() if k != "shard_rows"}
    del header["shards"]
    header.update(version=1, settings=settings, engine_bytes=len(forged), engine_sha256=digest)
    old = {**files, ENGINE_FILE: forged, HEADER_FILE: json.dumps(header).encode()}
    with pytest.raises(ValueError, match="past their end"):
        VectorIndex.from_files(old, x)


_FORGERY_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    import numpy as np
    from core.vector_index import ENGINE_FILE, HEADER_FILE, HnswSettings, VectorIndex

    rng = np.random.default_rng(0)
    c = rng.normal(size=(10, 8))
    x = c[rng.integers(0, 10, 300)] + 0.3 * rng.normal(size=(300, 8))
    x = np.ascontiguousarray(x / np.linalg.norm(x, axis=1, keepdims=True), dtype=np.float32)
    files = VectorIndex.build(x, exact_below=0, settings=HnswSettings(m=4, ef_construction=16)).to_files()
    blob, header = files[ENGINE_FILE], json.loads(files[HEADER_FILE])
    q = x[:20]

    def attempt(data):
        graph = {"rows": 300, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        h = dict(header, shards=[graph])
        try:
            forged = {**files, ENGINE_FILE: data, HEADER_FILE: json.dumps(h).encode()}
            index = VectorIndex.from_files(forged, x)
        except ValueError:
            return "rejected"
        ids, scores = index.search(q, x, 5)
        assert ids.min() >= 0 and ids.max() < 300, ids
        return "loaded"

    graph_end = len(blob) - 300 * 8 * 4 - 8  # flips inside the stored vectors are caught by the matrix check
    outcomes = {"rejected": 0, "loaded": 0}
    for pos in list(range(0, 200)) + list(rng.integers(0, graph_end, 1500)):
        data = bytearray(blob)
        data[int(pos)] ^= 1 << int(rng.integers(0, 8))
        outcomes[attempt(bytes(data))] += 1
    for _ in range(200):  # random bytes behind a valid digest, some starting like a faiss index
        size = int(rng.integers(0, len(blob) + 100))
        data = bytearray(rng.bytes(size))
        if size > 40 and rng.random() < 0.5:
            data[:40] = blob[:40]
        outcomes[attempt(bytes(data))] += 1
    for cut in range(0, len(blob), 97):  # truncations behind a valid digest
        outcomes[attempt(blob[:cut])] += 1
    print(json.dumps(outcomes))
    """
)


def test_forged_bytes_never_crash_the_process() -> None:
    """Bit flips, random bytes and truncations with a recomputed digest: ValueError or a sane index."""
    done = subprocess.run(
        [sys.executable, "-c", _FORGERY_SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcomes["rejected"] > 0


# ---------------------------------------------------------------------- bad arguments


def test_bad_arguments_raise_clear_errors(small_engine: tuple[FloatMatrix, VectorIndex]) -> None:
    x, engine = small_engine
    exact = VectorIndex.build(x, exact_below=10**9)
    for index in (exact, engine):
        with pytest.raises(ValueError, match="k must be"):
            index.search(x[:1], x, -1)
        with pytest.raises(ValueError, match="k must be"):
            index.search(x[:1], x, 2.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="16 columns"):
            index.search(np.ones((1, 5), np.float32), x, 3)
        with pytest.raises(ValueError, match="two-dimensional"):
            index.search(x[0], x, 3)
        with pytest.raises(ValueError, match="NaN"):
            index.search(np.full((1, 16), np.nan, np.float32), x, 3)
        with pytest.raises(ValueError, match="allowed must be"):
            index.search(x[:1], x, 3, allowed=np.ones(10, bool))
        with pytest.raises(ValueError, match="allowed must be"):
            index.search(x[:1], x, 3, allowed=np.ones(x.shape[0], np.int64))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="columns"):
            index.search(x[:1], np.ascontiguousarray(x[:, :8]), 3)
        with pytest.raises(ValueError, match="pass the matrix"):
            index.search(x[:1], x[:10], 3)
        with pytest.raises(ValueError, match="float32"):
            index.search(x[:1], x.astype(np.float64), 3)
    with pytest.raises(ValueError, match="ef_search"):
        engine.search(x[:1], x, 3, ef_search=0)
    with pytest.raises(ValueError, match="two-dimensional"):
        VectorIndex.build(x[0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="within"):
        VectorIndex.build(x, np.asarray([-1]))
    with pytest.raises(ValueError, match="NaN"):
        VectorIndex.build(np.full((3, 4), np.inf, np.float32))
    with pytest.raises(ValueError, match="exact_below"):
        VectorIndex.build(x, exact_below=-1)
    with pytest.raises(ValueError, match=r"HnswSettings\.m"):
        HnswSettings(m=1)
    with pytest.raises(ValueError, match="ef_search"):
        HnswSettings(ef_search=0)
    with pytest.raises(ValueError, match="shard_rows"):
        HnswSettings(shard_rows=0)
    with pytest.raises(ValueError, match="workers"):
        VectorIndex.build(x, workers=0)
    with pytest.raises(ValueError, match="workers"):
        engine.add(x, np.zeros(0, np.int64), workers=True)  # type: ignore[arg-type]
