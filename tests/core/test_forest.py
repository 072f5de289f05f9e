from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import AbstractForest
from core import _native as native

FOREST_CHECKSUM_SEED = 0x464F524553543031


def random_forest(
    rng: random.Random, n_leaves: int, branching: int
) -> tuple[AbstractForest, list[dict[str, int]]]:
    """Bottom-up forest: level-0 nodes own consecutive chunk ranges, parents group children."""
    nodes: list[dict[str, int]] = []
    chunk = 0
    level_nodes = []
    for _ in range(n_leaves):
        size = rng.randint(0, 5)
        nodes.append({"level": 0, "begin": chunk, "end": chunk + size, "parent": -1})
        level_nodes.append(len(nodes) - 1)
        chunk += size
    level = 0
    while len(level_nodes) > 1:
        level += 1
        shuffled = level_nodes[:]
        rng.shuffle(shuffled)  # group by "meaning", not by position
        nxt = []
        for i in range(0, len(shuffled), branching):
            if rng.random() < 0.15 and len(shuffled) - i > 1:
                continue  # leave some roots unattached: a forest, not a tree
            nodes.append({"level": level, "begin": 0, "end": 0, "parent": -1})
            pid = len(nodes) - 1
            for c in shuffled[i : i + branching]:
                nodes[c]["parent"] = pid
            nxt.append(pid)
        level_nodes = nxt
    f = AbstractForest()
    f.add_nodes(
        [n["level"] for n in nodes],
        [n["begin"] for n in nodes],
        [n["end"] for n in nodes],
        [n["parent"] for n in nodes],
    )
    return f, nodes


def ref_expand(nodes: list[dict[str, int]], seeds: list[int], depth: int) -> dict[int, int]:
    children: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        if n["parent"] >= 0:
            children.setdefault(n["parent"], []).append(i)
    best: dict[int, int] = {}
    for s in seeds:
        best[s] = 0
        p, d = nodes[s]["parent"], 1
        while p >= 0 and d <= depth:
            best[p] = min(best.get(p, d), d)
            p, d = nodes[p]["parent"], d + 1
        frontier = [s]
        for d in range(1, depth + 1):
            nxt = []
            for v in frontier:
                for c in children.get(v, []):
                    if d < best.get(c, 1 << 30):
                        best[c] = d
                    nxt.append(c)
            frontier = nxt
    return best


def ref_chunks(nodes: list[dict[str, int]], ids: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        if n["parent"] >= 0:
            children.setdefault(n["parent"], []).append(i)
    out: set[int] = set()
    stack = list(ids)
    while stack:
        v = stack.pop()
        out.update(range(nodes[v]["begin"], nodes[v]["end"]))
        stack.extend(children.get(v, []))
    return sorted(out)


@given(
    seed=st.integers(0, 10_000),
    n_leaves=st.integers(1, 60),
    branching=st.integers(2, 6),
    depth=st.integers(0, 4),
)
def test_expand_and_chunk_ids_match_reference(seed: int, n_leaves: int, branching: int, depth: int) -> None:
    rng = random.Random(seed)
    f, nodes = random_forest(rng, n_leaves, branching)
    assert len(f) == len(nodes)
    seeds = [rng.randrange(len(nodes)) for _ in range(rng.randint(1, 4))]
    got_nodes, got_dist = f.expand(seeds, depth)
    want = ref_expand(nodes, seeds, depth)
    assert got_nodes.tolist() == sorted(want)
    assert got_dist.tolist() == [want[v] for v in sorted(want)]
    assert f.chunk_ids(got_nodes).tolist() == ref_chunks(nodes, got_nodes.tolist())
    assert f.chunk_ids(seeds).tolist() == ref_chunks(nodes, seeds)


def test_accessors_and_arrays() -> None:
    f = AbstractForest()
    assert f.add_nodes([0, 0, 0, 1], [0, 5, 9, 0], [5, 9, 12, 0], [3, 3, -1, -1]) == 0
    assert f.children(3).tolist() == [0, 1]
    assert f.parent(0) == 3
    assert f.parent(3) == -1
    assert f.level(3) == 1
    assert f.chunk_range(1) == (5, 9)
    arr = f.arrays()
    assert arr["parent"].tolist() == [3, 3, -1, -1]
    f.set_parents([2], [3])
    assert f.chunk_ids([3]).tolist() == list(range(12))
    assert f.memory_bytes() > 0
    with pytest.raises(IndexError, match="does not exist"):
        f.parent(10)


def test_incremental_append_references_new_and_old_nodes() -> None:
    f = AbstractForest()
    f.add_nodes([0, 0], [0, 5], [5, 10], [-1, -1])
    first = f.add_nodes([0, 1], [10, 0], [15, 0], [3, -1])  # new node 2 -> new parent 3
    assert first == 2
    f.set_parents([0, 1], [3, 3])
    assert f.chunk_ids([3]).tolist() == list(range(15))
    nodes, dist = f.expand([2], 1)
    assert nodes.tolist() == [2, 3]
    assert dist.tolist() == [0, 1]


@pytest.mark.parametrize(
    ("levels", "begins", "ends", "parents", "exc", "match"),
    [
        ([0], [5], [4], [-1], ValueError, "begin > end"),
        ([-1], [0], [1], [-1], ValueError, "level"),
        ([0, 0], [0, 0], [1, 1], [1, -1], ValueError, "above its child"),
        ([0], [0], [1], [7], ValueError, "does not exist"),
        ([0, 1], [0, 0], [1], [-1, -1], ValueError, "same length"),
        ([0], [0.5], [1], [-1], TypeError, "integers"),
    ],
)
def test_add_nodes_validates_before_changing(levels, begins, ends, parents, exc, match) -> None:  # type: ignore[no-untyped-def]
    f = AbstractForest()
    f.add_nodes([0], [0], [3], [-1])
    before = f.to_bytes()
    with pytest.raises(exc, match=match):
        f.add_nodes(levels, begins, ends, parents)
    assert f.to_bytes() == before


def test_set_parents_and_query_validation() -> None:
    f = AbstractForest()
    f.add_nodes([0, 1], [0, 0], [2, 0], [-1, -1])
    with pytest.raises(ValueError, match="above its child"):
        f.set_parents([1], [0])
    with pytest.raises(IndexError, match="does not exist"):
        f.set_parents([5], [1])
    with pytest.raises(IndexError, match="does not exist"):
        f.expand([9], 1)
    with pytest.raises(ValueError, match="depth"):
        f.expand([0], -1)
    with pytest.raises(IndexError, match="does not exist"):
        f.chunk_ids([2])
    assert f.expand([], 2)[0].size == 0
    assert f.chunk_ids([]).size == 0


def test_round_trip_and_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f, nodes = random_forest(random.Random(5), 200, 4)
    data = f.to_bytes()
    g = AbstractForest.from_bytes(data)
    assert g.to_bytes() == data
    seeds = list(range(0, len(nodes), 17))
    assert np.array_equal(g.expand(seeds, 2)[0], f.expand(seeds, 2)[0])
    f.save(tmp_path / "forest.bin")
    assert AbstractForest.load(tmp_path / "forest.bin").to_bytes() == data
    with pytest.raises(FileNotFoundError, match="no abstract forest file"):
        AbstractForest.load(tmp_path / "nope.bin")


def test_mutated_and_truncated_forests_raise_value_error() -> None:
    f, _ = random_forest(random.Random(9), 30, 3)
    good = f.to_bytes()
    rng = random.Random(77)
    rejected = 0
    for trial in range(3000):
        buf = bytearray(good)
        if trial % 3 == 0:
            buf = buf[: rng.randrange(len(buf))]
        else:
            for _ in range(rng.randint(1, 3)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            if trial % 3 == 2:
                body = bytes(buf[:-8])
                buf = bytearray(body + native.hash_bytes(body, FOREST_CHECKSUM_SEED).to_bytes(8, "little"))
        try:
            g = AbstractForest.from_bytes(bytes(buf))
        except ValueError:
            rejected += 1
            continue
        # Whatever parses must be a valid forest: queries terminate and stay in range.
        n = len(g)
        if n:
            nodes, _ = g.expand(list(range(n)), 3)
            assert nodes.max() < n
            arr = g.arrays()
            owned = int((arr["chunk_end"].astype(np.int64) - arr["chunk_begin"]).sum())
            if owned < 1_000_000:  # a re-signed mutation may declare billions of chunks: valid, just big
                assert g.chunk_ids(list(range(n))).size <= owned
    assert rejected > 2000


def test_concurrent_queries_during_appends() -> None:
    f, nodes = random_forest(random.Random(3), 300, 4)
    n0 = len(nodes)
    expected = f.chunk_ids(list(range(n0))).tolist()
    errors: list[str] = []

    def reader() -> None:
        for i in range(300):
            if f.chunk_ids(list(range(n0))).tolist() != expected:
                errors.append("chunk ids changed")
            f.expand([i % n0], 2)

    def writer() -> None:
        for i in range(100):
            f.add_nodes([0], [100_000 + i], [100_001 + i], [-1])

    threads = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(f) == n0 + 100
