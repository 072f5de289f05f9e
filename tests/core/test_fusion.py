from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from itertools import pairwise
from typing import Literal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core
from core.native.fusion import MergedIntervals, fuse_weighted, merge_intervals, pack_lists, rrf_fuse

# ---------------------------------------------------------------------- plain-Python references

Ranking = list[tuple[int, float]]
Mode = Literal["union", "keep_best"]


def _f32(x: float) -> float:
    return float(np.float32(x))


def _ranked(total: dict[int, float], k: int) -> tuple[list[int], list[float]]:
    rows = sorted(((u, _f32(s)) for u, s in total.items()), key=lambda r: (-r[1], r[0]))
    if k:
        rows = rows[:k]
    return [u for u, _ in rows], [s for _, s in rows]


def ref_fuse(lists: Sequence[Ranking], weights: Sequence[float], k: int) -> tuple[list[int], list[float]]:
    total: dict[int, float] = {}
    for items, w in zip(lists, weights, strict=True):
        best: dict[int, float] = {}
        for u, s in items:
            s32 = _f32(s)
            s32 = 0.0 if math.isnan(s32) else s32
            best[u] = max(best.get(u, -math.inf), s32)
        for u, s in best.items():
            total.setdefault(u, 0.0)
            if _f32(w) != 0.0:
                total[u] += _f32(w) * s
    return _ranked({u: (-math.inf if math.isnan(s) else s) for u, s in total.items()}, k)


def ref_rrf(lists: Sequence[Sequence[int]], k_rrf: float, k: int) -> tuple[list[int], list[float]]:
    total: dict[int, float] = {}
    for items in lists:
        seen: set[int] = set()
        for u in items:
            if u in seen:
                continue
            seen.add(u)
            total[u] = total.get(u, 0.0) + 1.0 / (k_rrf + len(seen))
    return _ranked(total, k)


def _rank_key(score: float, index: int) -> tuple[bool, float, int]:
    return (math.isnan(score), 0.0 if math.isnan(score) else -score, index)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < a[1] and b[0] < b[1] and a[0] < b[1] and b[0] < a[1]


Row = tuple[int, int, int, float, int, int]  # group, start, end, score, best_index, members


def _sorted_rows(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (*_rank_key(r[3], 0)[:2], r[0], r[1], r[2], r[4]))


def ref_union(groups: list[int], spans: list[tuple[int, int]], scores: list[float]) -> list[Row]:
    n = len(groups)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if groups[i] == groups[j] and _overlap(spans[i], spans[j]):
                parent[find(i)] = find(j)
    comps: dict[int, list[int]] = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(i)
    rows: list[Row] = []
    for members in comps.values():
        best = min(members, key=lambda i: _rank_key(scores[i], i))
        rows.append(
            (
                groups[best],
                min(spans[i][0] for i in members),
                max(spans[i][1] for i in members),
                scores[best],
                best,
                len(members),
            )
        )
    return _sorted_rows(rows)


def ref_keep_best(groups: list[int], spans: list[tuple[int, int]], scores: list[float]) -> list[Row]:
    kept: list[int] = []
    members: dict[int, int] = {}
    for i in sorted(range(len(groups)), key=lambda i: _rank_key(scores[i], i)):
        hit = next((j for j in kept if groups[j] == groups[i] and _overlap(spans[i], spans[j])), None)
        if hit is None:
            kept.append(i)
            members[i] = 1
        else:
            members[hit] += 1
    return _sorted_rows([(groups[i], *spans[i], scores[i], i, members[i]) for i in kept])


def rows_of(out: MergedIntervals) -> list[Row]:
    return list(
        zip(
            out["group"].tolist(),
            out["start"].tolist(),
            out["end"].tolist(),
            out["score"].tolist(),
            out["best_index"].tolist(),
            out["members"].tolist(),
            strict=True,
        )
    )


def assert_rows_equal(got: list[Row], want: list[Row]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:3] == w[:3]
        assert g[4:] == w[4:]
        assert (math.isnan(g[3]) and math.isnan(w[3])) or g[3] == w[3]


# ---------------------------------------------------------------------- strategies

unit = st.integers(-3, 12)
score = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, -1.0, math.nan, math.inf, -math.inf]),
    st.floats(-1e6, 1e6, width=32),
)
weight = st.one_of(st.sampled_from([0.0, 1.0, 0.5, -1.0]), st.floats(-1e3, 1e3, width=32))
rankings = st.lists(st.lists(st.tuples(unit, score), max_size=12), max_size=5)


def packed(lists: Sequence[Ranking]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = pack_lists([[u for u, _ in items] for items in lists], [[s for _, s in items] for items in lists])
    assert p.scores is not None
    return p.list_offsets, p.unit_ids, p.scores


# ---------------------------------------------------------------------- fuse_weighted


@given(lists=rankings, data=st.data(), k=st.integers(0, 20))
def test_fuse_weighted_matches_reference(lists: list[Ranking], data: st.DataObject, k: int) -> None:
    weights = data.draw(st.lists(weight, min_size=len(lists), max_size=len(lists)))
    off, ids, scores = packed(lists)
    got_ids, got = fuse_weighted(off, ids, scores, weights, k)
    want_ids, want = ref_fuse(lists, weights, k)
    assert got_ids.dtype == np.int64
    assert got.dtype == np.float32
    assert got_ids.tolist() == want_ids
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))
    assert not np.isnan(got).any()


def test_fuse_weighted_duplicates_count_once_with_their_best_score() -> None:
    ids, fused = fuse_weighted([0, 3, 4], [5, 5, 6, 5], [0.25, 0.75, 0.5, 1.0], [1.0, 2.0])
    assert ids.tolist() == [5, 6]
    assert fused.tolist() == [2.75, 0.5]


def test_fuse_weighted_ties_by_unit_id() -> None:
    ids, fused = fuse_weighted([0, 2, 4], [9, 3, 3, 9], [1.0, 0.5, 1.0, 0.5], [1.0, 1.0])
    assert ids.tolist() == [3, 9]
    assert fused.tolist() == [1.5, 1.5]
    ids, _ = fuse_weighted([0, 4], [8, -1, 2, 5], [0.5, 0.5, 0.5, 0.5], [1.0], k=3)
    assert ids.tolist() == [-1, 2, 5]


def test_fuse_weighted_nan_and_infinite_scores() -> None:
    # NaN counts as 0, also when choosing a unit's best score within a list.
    ids, fused = fuse_weighted([0, 4], [1, 2, 3, 3], [math.nan, -1.0, math.nan, -2.0], [1.0])
    assert ids.tolist() == [1, 3, 2]
    assert fused.tolist() == [0.0, 0.0, -1.0]
    # +inf and -inf from two lists leave the fused score undefined: -inf, ranked last.
    ids, fused = fuse_weighted([0, 2, 3], [1, 2, 1], [math.inf, -5.0, -math.inf], [1.0, 1.0])
    assert ids.tolist() == [2, 1]
    assert fused[0] == -5.0
    assert np.isneginf(fused[1])
    # A list of weight 0 contributes nothing, not 0 * inf = NaN; its units still appear.
    ids, fused = fuse_weighted([0, 1, 2], [1, 2], [math.inf, 0.5], [0.0, 1.0])
    assert ids.tolist() == [2, 1]
    assert fused.tolist() == [0.5, 0.0]


@pytest.mark.parametrize(
    ("offsets", "weights", "k", "expected"),
    [
        ([0], [], 0, []),
        ([0, 0, 0], [1.0, 2.0], 0, []),
        ([0, 2], [1.0], 100, [1, 2]),
        ([0, 2], [1.0], 1, [1]),
    ],
)
def test_fuse_weighted_empty_lists_and_large_k(
    offsets: list[int], weights: list[float], k: int, expected: list[int]
) -> None:
    n = offsets[-1]
    ids, fused = fuse_weighted(offsets, [1, 2][:n], [0.5, 0.25][:n], weights, k)
    assert ids.tolist() == expected
    assert len(fused) == len(expected)


@pytest.mark.parametrize(
    ("offsets", "ids", "scores", "weights", "k", "exc", "match"),
    [
        ([], [], [], [], 0, ValueError, "starting at 0"),
        ([1, 2], [1, 2], [1.0, 1.0], [1.0], 0, ValueError, "start at 0"),
        ([0, 2, 1, 2], [1, 2], [1.0, 1.0], [1.0, 1.0, 1.0], 0, ValueError, "non-decreasing"),
        ([0, 1], [1, 2], [1.0, 1.0], [1.0], 0, ValueError, "end at the number of items"),
        ([0, 3], [1, 2], [1.0, 1.0], [1.0], 0, ValueError, "end at the number of items"),
        ([0, 2], [1, 2], [1.0], [1.0], 0, ValueError, "one entry per unit id"),
        ([0, 2], [1, 2], [1.0, 1.0], [1.0, 1.0], 0, ValueError, "one entry per list"),
        ([0, 2], [1, 2], [1.0, 1.0], [math.nan], 0, ValueError, "finite"),
        ([0, 2], [1, 2], [1.0, 1.0], [math.inf], 0, ValueError, "finite"),
        ([0, 2], [1, 2], [1.0, 1.0], [1.0], -1, ValueError, "k must be"),
        ([0, 2], [1.0, 2.0], [1.0, 1.0], [1.0], 0, TypeError, "unit_ids must be integers"),
        ([0.0, 2.0], [1, 2], [1.0, 1.0], [1.0], 0, TypeError, "list_offsets must be integers"),
        ([0, 2], [1, 2], ["a", "b"], [1.0], 0, TypeError, "scores must be real numbers"),
        ([0, 2], [1, 2], [True, False], [1.0], 0, TypeError, "scores must be real numbers"),
        ([0, 2], [[1, 2]], [1.0, 1.0], [1.0], 0, ValueError, "one-dimensional"),
    ],
)
def test_fuse_weighted_bad_input(offsets, ids, scores, weights, k, exc, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=match):
        fuse_weighted(offsets, ids, scores, weights, k)


def test_fuse_weighted_accepts_any_integer_and_real_dtypes() -> None:
    want = fuse_weighted([0, 2, 3], [4, 7, 4], [0.5, 0.25, 1.0], [1.0, 2.0])
    got = fuse_weighted(
        np.array([0, 2, 3], dtype=np.int32),
        np.array([4, 7, 4], dtype=np.uint16),
        np.array([0.5, 0.25, 1.0], dtype=np.float64),
        np.array([1, 2], dtype=np.int8),
    )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------------- rrf_fuse


@given(
    lists=st.lists(st.lists(unit, max_size=12), max_size=5),
    k_rrf=st.one_of(st.sampled_from([0.0, 1.0, 60.0]), st.floats(0, 1000)),
    k=st.integers(0, 20),
)
def test_rrf_matches_reference(lists: list[list[int]], k_rrf: float, k: int) -> None:
    p = pack_lists(lists)
    got_ids, got = rrf_fuse(p.list_offsets, p.unit_ids, k_rrf, k)
    want_ids, want = ref_rrf(lists, k_rrf, k)
    assert got_ids.dtype == np.int64
    assert got.dtype == np.float32
    assert got_ids.tolist() == want_ids
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))


def test_rrf_duplicates_take_no_rank_and_ties_go_to_the_lower_id() -> None:
    # List 0 ranks 5 then 3 (the repeated 5 is skipped); list 1 ranks 3 then 5.
    ids, scores = rrf_fuse([0, 3, 5], [5, 5, 3, 3, 5], k_rrf=0.0)
    assert ids.tolist() == [3, 5]
    assert scores.tolist() == [1.5, 1.5]
    ids, scores = rrf_fuse([0, 3], [2, 2, 1])
    assert ids.tolist() == [2, 1]
    assert scores.tolist() == [np.float32(1 / 61), np.float32(1 / 62)]


def test_rrf_defaults_and_empty() -> None:
    ids, scores = rrf_fuse([0], [])
    assert ids.tolist() == []
    assert scores.dtype == np.float32
    ids, _ = rrf_fuse([0, 0, 3], [7, 8, 9], k=10)
    assert ids.tolist() == [7, 8, 9]


@pytest.mark.parametrize(
    ("offsets", "ids", "k_rrf", "k", "match"),
    [
        ([0, 1], [1], -1.0, 0, "k_rrf"),
        ([0, 1], [1], math.nan, 0, "k_rrf"),
        ([0, 1], [1], math.inf, 0, "k_rrf"),
        ([0, 1], [1], 60.0, -2, "k must be"),
        ([0, 2], [1], 60.0, 0, "end at the number of items"),
        ([], [], 60.0, 0, "starting at 0"),
    ],
)
def test_rrf_bad_input(offsets: list[int], ids: list[int], k_rrf: float, k: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        rrf_fuse(offsets, ids, k_rrf, k)


# ---------------------------------------------------------------------- merge_intervals

intervals = st.lists(
    st.tuples(st.integers(0, 2), st.integers(-5, 20), st.integers(0, 6), score),
    max_size=40,
)


@pytest.mark.parametrize("mode", ["union", "keep_best"])
@given(items=intervals)
def test_merge_intervals_matches_reference(mode: Mode, items: list[tuple[int, int, int, float]]) -> None:
    groups = [g for g, _, _, _ in items]
    spans = [(s, s + length) for _, s, length, _ in items]
    scores = [_f32(sc) for _, _, _, sc in items]
    out = merge_intervals(groups, [s for s, _ in spans], [e for _, e in spans], scores, mode)
    assert set(out) == {"group", "start", "end", "score", "best_index", "members"}
    assert out["score"].dtype == np.float32
    for key in ("group", "start", "end", "best_index", "members"):
        assert out[key].dtype == np.int64
    assert int(out["members"].sum()) == len(items)
    ref = ref_union if mode == "union" else ref_keep_best
    assert_rows_equal(rows_of(out), ref(groups, spans, scores))
    # No two outputs of a group overlap, in either mode.
    rows = rows_of(out)
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            assert not (a[0] == b[0] and _overlap((a[1], a[2]), (b[1], b[2])))


def test_union_merges_transitively_and_keeps_adjacent_apart() -> None:
    out = merge_intervals(
        groups=[0, 0, 0, 0, 1, 0],
        starts=[0, 4, 2, 8, 0, 1],
        ends=[3, 6, 5, 10, 3, 2],
        scores=[0.5, 0.25, 0.75, 0.75, 0.75, 0.9],
    )
    # [0,3) [2,5) [4,6) and the nested [1,2) chain into [0,6); [8,10) touches nothing.
    assert rows_of(out) == [
        (0, 0, 6, np.float32(0.9), 5, 4),
        (0, 8, 10, 0.75, 3, 1),
        (1, 0, 3, 0.75, 4, 1),
    ]
    adjacent = merge_intervals([0, 0], [0, 3], [3, 5], [1.0, 1.0])
    assert adjacent["start"].tolist() == [0, 3]
    assert adjacent["members"].tolist() == [1, 1]


def test_keep_best_keeps_short_spans_and_counts_the_dropped() -> None:
    out = merge_intervals(
        groups=[0, 0, 0, 0, 0],
        starts=[0, 2, 4, 6, 0],
        ends=[3, 5, 7, 9, 9],
        scores=[0.5, 0.9, 0.4, 0.8, 0.1],
        mode="keep_best",
    )
    # [2,5) wins, then [6,9); [0,3) and [4,7) overlap [2,5), [0,9) overlaps both (earliest: [2,5)).
    assert rows_of(out) == [(0, 2, 5, np.float32(0.9), 1, 4), (0, 6, 9, np.float32(0.8), 3, 1)]


def test_merge_ties_and_nan_scores() -> None:
    # Equal scores: the lowest index is the best member and is visited first.
    out = merge_intervals([0, 0], [0, 1], [2, 3], [0.5, 0.5])
    assert out["best_index"].tolist() == [0]
    out = merge_intervals([0, 0], [1, 0], [3, 2], [0.5, 0.5], mode="keep_best")
    assert rows_of(out) == [(0, 1, 3, 0.5, 0, 2)]
    # NaN ranks after every number, -inf included; an all-NaN cluster keeps a NaN score.
    out = merge_intervals([0, 0, 1], [0, 1, 0], [2, 3, 1], [math.nan, -math.inf, math.nan])
    assert out["best_index"].tolist() == [1, 2]
    assert np.isneginf(out["score"][0])
    assert np.isnan(out["score"][1])
    # Output ties on score are ordered by group, then start.
    out = merge_intervals([1, 0, 0], [0, 5, 0], [1, 6, 1], [1.0, 1.0, 1.0])
    assert list(zip(out["group"].tolist(), out["start"].tolist(), strict=True)) == [(0, 0), (0, 5), (1, 0)]


@pytest.mark.parametrize("mode", ["union", "keep_best"])
def test_empty_intervals_stay_alone(mode: Mode) -> None:
    out = merge_intervals([0, 0, 0], [0, 2, 2], [5, 2, 2], [0.1, 0.9, 0.5], mode)
    assert rows_of(out) == [
        (0, 2, 2, np.float32(0.9), 1, 1),
        (0, 2, 2, 0.5, 2, 1),
        (0, 0, 5, np.float32(0.1), 0, 1),
    ]


def test_merge_empty_input() -> None:
    out = merge_intervals([], [], [], [])
    assert all(len(v) == 0 for v in out.values())
    assert out["members"].dtype == np.int64


@pytest.mark.parametrize(
    ("args", "mode", "exc", "match"),
    [
        (([0], [3], [2], [1.0]), "union", ValueError, "start 3 > end 2"),
        (([0, 0], [1], [2], [1.0]), "union", ValueError, "same length"),
        (([0], [1], [2], [1.0, 2.0]), "keep_best", ValueError, "same length"),
        (([0], [1], [2], [1.0]), "intersect", ValueError, "mode must be"),
        (([0], [1.5], [2], [1.0]), "union", TypeError, "starts must be integers"),
        (([True], [1], [2], [1.0]), "union", TypeError, "groups must be integers"),
        (([0], [1], [2], ["x"]), "union", TypeError, "scores must be real numbers"),
    ],
)
def test_merge_bad_input(args, mode, exc, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=match):
        merge_intervals(*args, mode=mode)


# ---------------------------------------------------------------------- packing, exports, threads


def test_pack_lists() -> None:
    p = pack_lists([[3, 1], [], np.array([2])], [[0.5, 0.25], [], [1.0]])
    assert p.list_offsets.tolist() == [0, 2, 2, 3]
    assert p.unit_ids.tolist() == [3, 1, 2]
    assert p.scores is not None
    assert p.scores.tolist() == [0.5, 0.25, 1.0]
    assert p.scores.dtype == np.float32
    empty = pack_lists([])
    assert empty.list_offsets.tolist() == [0]
    assert empty.unit_ids.dtype == np.int64
    assert empty.scores is None
    with pytest.raises(ValueError, match="score_lists has 1 lists"):
        pack_lists([[1], [2]], [[1.0]])
    with pytest.raises(ValueError, match="list 1 has 1 unit ids but 2 scores"):
        pack_lists([[1], [2]], [[1.0], [1.0, 2.0]])


def test_exported_from_core() -> None:
    for name in ("fuse_weighted", "rrf_fuse", "merge_intervals"):
        assert name in core.__all__
        assert getattr(core, name) is getattr(core.native.fusion, name)


def test_large_input_matches_reference() -> None:
    rng = np.random.default_rng(7)
    lengths = [40_000, 30_000, 30_000]
    ids = rng.integers(0, 20_000, size=sum(lengths))
    scores = rng.random(sum(lengths)).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    lists = [
        list(zip(ids[a:b].tolist(), scores[a:b].tolist(), strict=True)) for a, b in pairwise(offsets.tolist())
    ]
    got_ids, got = fuse_weighted(offsets, ids, scores, [1.0, 0.5, 0.25], 50)
    want_ids, want = ref_fuse(lists, [1.0, 0.5, 0.25], 50)
    assert got_ids.tolist() == want_ids
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))
    got_ids, got = rrf_fuse(offsets, ids, 60.0, 50)
    want_ids, want = ref_rrf([[u for u, _ in items] for items in lists], 60.0, 50)
    assert got_ids.tolist() == want_ids


def test_threads_get_the_same_results() -> None:
    rng = np.random.default_rng(0)
    m = 60_000
    offsets = np.array([0, 20_000, 45_000, m])
    ids = rng.integers(0, 5_000, size=m)
    scores = rng.standard_normal(m).astype(np.float32)
    starts = rng.integers(0, 10_000, size=m)
    ends = starts + rng.integers(0, 30, size=m)
    groups = rng.integers(0, 50, size=m)

    def run_all() -> list[np.ndarray]:
        out = [*fuse_weighted(offsets, ids, scores, [1.0, 0.5, 2.0], 100), *rrf_fuse(offsets, ids, 60.0, 100)]
        for mode in ("union", "keep_best"):
            merged = merge_intervals(groups, starts, ends, scores, mode)
            out.extend(merged[key] for key in ("group", "start", "end", "score", "best_index", "members"))
        return out

    expected = run_all()
    errors: list[str] = []

    def worker() -> None:
        for _ in range(5):
            for got, want in zip(run_all(), expected, strict=True):
                if not np.array_equal(got, want):
                    errors.append("mismatch")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
