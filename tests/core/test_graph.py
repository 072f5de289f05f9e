from __future__ import annotations

import math
import random
import threading
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import Graph
from core import _native as native
from core.native.graph import BubbleResult, CegKind, ceg_at

GRAPH_CHECKSUM_SEED = 0x4B47524150483031
INF = math.inf


# ---------------------------------------------------------------------- helpers


def random_edges(rng: random.Random, n: int, m: int, loops: float = 0.05) -> tuple[list[int], list[int]]:
    heads, tails = [], []
    for _ in range(m):
        h = rng.randrange(n)
        t = h if rng.random() < loops else rng.randrange(n)
        heads.append(h)
        tails.append(t)
    return heads, tails


class Case:
    """A random bubble problem: graph, seed groups, costs and an allowed mask."""

    def __init__(self, seed: int, n: int, m: int, groups: int, per_group: int, allowed_frac: float = 0.85):
        rng = random.Random(seed)
        self.rng = rng
        self.n, self.m = n, m
        self.heads, self.tails = random_edges(rng, n, m)
        self.graph = Graph(n, self.heads, self.tails)
        self.node_cost = np.asarray([rng.random() for _ in range(n)], dtype=np.float32)
        self.edge_cost = np.asarray([rng.random() for _ in range(m)], dtype=np.float32)
        self.allowed = np.asarray([rng.random() < allowed_frac for _ in range(n)], dtype=np.uint8)
        self.offsets = [0]
        self.seed_nodes: list[int] = []
        self.seed_edges: list[int] = []
        self.seed_costs: list[float] = []
        for _ in range(groups):
            for v in rng.sample(range(n), min(per_group, n)):
                self.allowed[v] = 1
                incident = [e for e in range(m) if v in (self.heads[e], self.tails[e])]
                self.seed_nodes.append(v)
                self.seed_edges.append(rng.choice(incident) if incident and rng.random() < 0.4 else -1)
                self.seed_costs.append(float(np.float32(rng.random() * 0.3)))
            self.offsets.append(len(self.seed_nodes))
        self.weights = np.asarray([rng.uniform(0.5, 2.0) for _ in range(groups)], dtype=np.float32)

    def bubble(self, **kw: Any) -> BubbleResult:
        args: dict[str, Any] = {
            "alpha": 1.0,
            "max_cegs": 10_000,
            "max_path_cost": INF,
            "within_group_penalty": 0.5,
        }
        args.update(kw)
        return self.graph.bubble(
            self.offsets,
            self.seed_nodes,
            self.seed_edges,
            self.seed_costs,
            self.node_cost,
            self.edge_cost,
            self.allowed,
            self.weights,
            **args,
        )

    def group_seeds(self, g: int) -> list[tuple[int, int, float]]:
        lo, hi = self.offsets[g], self.offsets[g + 1]
        return list(zip(self.seed_nodes[lo:hi], self.seed_edges[lo:hi], self.seed_costs[lo:hi], strict=True))

    def allowed_graph(self) -> nx.Graph:
        """Simple undirected graph over allowed nodes: the cheapest parallel edge, no self-loops."""
        g = nx.Graph()
        g.add_nodes_from(v for v in range(self.n) if self.allowed[v])
        for e, (h, t) in enumerate(zip(self.heads, self.tails, strict=True)):
            if h == t or not (self.allowed[h] and self.allowed[t]):
                continue
            c = float(self.edge_cost[e])
            if not g.has_edge(h, t) or g[h][t]["weight"] > c:
                g.add_edge(h, t, weight=c)
        return g

    def group_distance(self, g: int, cutoff: float | None = None) -> dict[int, float]:
        """d_g(v) = min over seeds s of group g of cost(s) + dist(s, v), through allowed nodes."""
        h = nx.DiGraph(self.allowed_graph())
        for v, _, c in self.group_seeds(g):
            h.add_edge("src", v, weight=float(np.float32(c)))
        dist = nx.single_source_dijkstra_path_length(h, "src", cutoff=cutoff)
        return {v: d for v, d in dist.items() if v != "src"}


def cegs(result: BubbleResult) -> list[tuple[list[int], list[int]]]:
    return [tuple(a.tolist() for a in ceg_at(result, i)) for i in range(len(result["score"]))]  # type: ignore[misc]


def path_costs(result: BubbleResult, kind: CegKind) -> list[float]:
    return [float(c) for c, k in zip(result["path_cost"], result["kind"], strict=True) if k == kind]


def same_result(a: BubbleResult, b: BubbleResult) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes()  # type: ignore[literal-required]
        for k in a
    )


# ---------------------------------------------------------------------- structure


@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), m=st.integers(0, 60))
def test_csr_adjacency_matches_edge_list(seed: int, n: int, m: int) -> None:
    heads, tails = random_edges(random.Random(seed), n, m, loops=0.15)
    g = Graph(n, heads, tails)
    assert (g.num_nodes, g.num_edges) == (n, m)
    assert g.heads().tolist() == heads
    assert g.tails().tolist() == tails
    want: dict[int, list[tuple[int, int]]] = {v: [] for v in range(n)}
    for e, (h, t) in enumerate(zip(heads, tails, strict=True)):
        want[h].append((t, e))
        want[t].append((h, e))  # a self-loop is listed twice
    ref = nx.MultiGraph()
    ref.add_nodes_from(range(n))
    ref.add_edges_from(zip(heads, tails, strict=True))
    for v in range(n):
        nodes, edges = g.neighbors(v)
        assert list(zip(nodes.tolist(), edges.tolist(), strict=True)) == want[v]  # edge-id order
    assert g.degree().tolist() == [ref.degree(v) for v in range(n)]


def bfs_hops(g: nx.MultiGraph, seeds: list[int], hops: int) -> dict[int, int]:
    return dict(nx.multi_source_dijkstra_path_length(g, set(seeds), cutoff=hops, weight=lambda u, v, d: 1))


@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 40),
    m=st.integers(0, 80),
    hops=st.integers(0, 4),
    n_seeds=st.integers(1, 5),
    cap=st.integers(1, 40),
)
def test_localize_matches_reference_bfs(seed: int, n: int, m: int, hops: int, n_seeds: int, cap: int) -> None:
    rng = random.Random(seed)
    heads, tails = random_edges(rng, n, m)
    g = Graph(n, heads, tails)
    ref = nx.MultiGraph()
    ref.add_nodes_from(range(n))
    ref.add_edges_from(zip(heads, tails, strict=True))
    seeds = [rng.randrange(n) for _ in range(n_seeds)]  # duplicates allowed
    got = g.localize(seeds, hops).tolist()
    want = bfs_hops(ref, seeds, hops)
    assert len(got) == len(set(got))
    assert set(got) == set(want)
    assert got[: len(set(seeds))] == sorted(set(seeds))
    assert [want[v] for v in got] == sorted(want[v] for v in got)  # hop by hop
    capped = g.localize(seeds, hops, max_nodes=cap).tolist()
    assert len(capped) == min(cap, len(got))
    assert capped == got[: len(capped)]  # a capped search is a prefix of the full one


def test_localize_small_example_and_validation() -> None:
    #  0 - 1 - 2 - 3 - 4, plus 1 - 5
    g = Graph(6, [0, 1, 2, 3, 1], [1, 2, 3, 4, 5])
    assert g.localize([2, 2], 1).tolist() == [2, 1, 3]
    assert g.localize([4, 0], 2).tolist() == [0, 4, 1, 3, 2, 5]
    assert g.localize([0], 0).tolist() == [0]
    assert g.localize([], 3).tolist() == []
    assert g.localize([0], 10, max_nodes=3).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="seed 6 does not exist"):
        g.localize([6], 1)
    with pytest.raises(ValueError, match="hops must be >= 0"):
        g.localize([0], -1)
    with pytest.raises(ValueError, match="max_nodes must be >= 0"):
        g.localize([0], 1, max_nodes=-2)
    with pytest.raises(TypeError, match="integers"):
        g.localize([0.5], 1)
    with pytest.raises(TypeError, match="hops must be an integer"):
        g.localize([0], 1.5)  # type: ignore[arg-type]


def test_construction_validation() -> None:
    with pytest.raises(ValueError, match="outside"):
        Graph(3, [0, 3], [1, 1])
    with pytest.raises(ValueError, match="outside"):
        Graph(3, [0], [-1])
    with pytest.raises(ValueError, match="same length"):
        Graph(3, [0, 1], [1])
    with pytest.raises(ValueError, match="num_nodes"):
        Graph(-1, [], [])
    with pytest.raises(TypeError, match="integers"):
        Graph(3, [0.0], [1.0])
    with pytest.raises(TypeError, match="num_nodes must be an integer"):
        Graph(True, [], [])
    with pytest.raises(ValueError, match="does not exist"):
        Graph(3, [0], [1]).neighbors(3)
    empty = Graph(0, [], [])
    assert empty.degree().size == 0
    assert repr(Graph(3, [0], [1])) == "Graph(nodes=3, edges=1)"


# ---------------------------------------------------------------------- bubble expansion


def check_ceg_invariants(case: Case, res: BubbleResult, alpha: float = 1.0, penalty: float = 0.5) -> None:
    n_cegs = len(res["score"])
    assert res["node_offsets"].tolist()[0] == 0
    assert res["edge_offsets"].tolist()[0] == 0
    assert len(res["node_offsets"]) == len(res["edge_offsets"]) == n_cegs + 1
    total_w = float(case.weights.astype(np.float64).sum())
    seed_edge_ends = {
        v
        for e in case.seed_edges
        if e >= 0
        for v in (case.heads[e], case.tails[e])  # anchors bring both endpoints
    }
    keys = []
    for i in range(n_cegs):
        nodes, edges = (a.tolist() for a in ceg_at(res, i))
        assert nodes
        assert nodes == sorted(set(nodes))
        assert edges == sorted(set(edges))
        keys.append((float(res["score"][i]), nodes, edges))
        for v in nodes:
            assert case.allowed[v] or v in seed_edge_ends
        sub = nx.MultiGraph()
        sub.add_nodes_from(nodes)
        for e in edges:
            assert case.heads[e] in nodes
            assert case.tails[e] in nodes
            sub.add_edge(case.heads[e], case.tails[e])
        assert nx.is_connected(sub)
        covered = int(res["covered"][i])
        kind = int(res["kind"][i])
        n_groups = len(case.offsets) - 1
        for g in range(n_groups):
            if covered >> g & 1:  # a covered group has a seed in the CEG
                assert any(v in nodes and (e < 0 or e in edges) for v, e, _ in case.group_seeds(g))
        assert covered >> n_groups == 0
        if kind == CegKind.MEETING:
            assert bin(covered).count("1") >= 2
        mean = float(np.concatenate([case.node_cost[nodes], case.edge_cost[edges]]).astype(np.float64).mean())
        assert float(res["mean_cost"][i]) == pytest.approx(mean, rel=1e-5, abs=1e-6)
        unc = sum(float(case.weights[g]) for g in range(n_groups) if not covered >> g & 1)
        score = (mean + alpha * unc / total_w) * (1 + penalty if kind == CegKind.WITHIN_GROUP else 1)
        assert float(res["score"][i]) == pytest.approx(score, rel=1e-5, abs=1e-6)
    assert keys == sorted(keys)  # by score, then node list, then edge list
    assert len({(tuple(k[1]), tuple(k[2])) for k in keys}) == n_cegs  # distinct


@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 30),
    m=st.integers(1, 60),
    groups=st.integers(1, 4),
    per_group=st.integers(1, 3),
    max_cegs=st.integers(1, 12),
)
def test_bubble_cegs_are_connected_covered_and_scored(
    seed: int, n: int, m: int, groups: int, per_group: int, max_cegs: int
) -> None:
    case = Case(seed, n, m, groups, per_group)
    res = case.bubble(max_cegs=max_cegs)
    assert 1 <= len(res["score"]) <= max_cegs  # never empty when there are seeds
    check_ceg_invariants(case, res)
    again = case.bubble(max_cegs=max_cegs)
    assert same_result(res, again)


@given(seed=st.integers(0, 10_000), n=st.integers(2, 30), m=st.integers(1, 60), per_group=st.integers(1, 3))
def test_two_group_meeting_cost_matches_networkx(seed: int, n: int, m: int, per_group: int) -> None:
    case = Case(seed, n, m, 2, per_group)
    res = case.bubble()
    da, db = case.group_distance(0), case.group_distance(1)
    both = [da[v] + db[v] for v in da if v in db]
    meeting = path_costs(res, CegKind.MEETING)
    if both:
        assert min(meeting) == pytest.approx(min(both), rel=1e-5, abs=1e-6)
    else:
        assert meeting == []
    # The same with a path-cost limit: only paths of cost <= limit may meet.
    limit = 0.6
    res = case.bubble(max_path_cost=limit)
    da, db = case.group_distance(0, cutoff=limit), case.group_distance(1, cutoff=limit)
    both = [da[v] + db[v] for v in da if v in db]
    meeting = path_costs(res, CegKind.MEETING)
    if both:
        assert min(meeting) == pytest.approx(min(both), rel=1e-5, abs=1e-6)
    else:
        assert meeting == []


@given(seed=st.integers(0, 10_000), n=st.integers(3, 30), m=st.integers(1, 60), per_group=st.integers(2, 5))
def test_within_group_cost_matches_closest_seed_pair(seed: int, n: int, m: int, per_group: int) -> None:
    case = Case(seed, n, m, 1, per_group)
    case.seed_edges = [-1] * len(case.seed_edges)
    res = case.bubble()
    check_ceg_invariants(case, res)
    h = case.allowed_graph()
    seeds = case.group_seeds(0)
    pairs = []
    for i, (s, _, cs) in enumerate(seeds):
        lengths = nx.single_source_dijkstra_path_length(h, s)
        pairs += [cs + ct + lengths[t] for t, _, ct in seeds[i + 1 :] if t in lengths]
    within = path_costs(res, CegKind.WITHIN_GROUP)
    if pairs:
        assert min(within) == pytest.approx(min(pairs), rel=1e-5, abs=1e-6)
        assert set(res["kind"].tolist()) == {CegKind.WITHIN_GROUP}
    else:
        assert within == []
        assert set(res["kind"].tolist()) == {CegKind.FALLBACK}


def path_case(penalty: float) -> BubbleResult:
    # 0 - 1 - 2 - 3 - 4 with one concept anchored at both ends
    g = Graph(5, [0, 1, 2, 3], [1, 2, 3, 4])
    return g.bubble(
        [0, 2],
        [0, 4],
        [-1, -1],
        [0.0, 0.0],
        [0.2] * 5,
        [1.0] * 4,
        [1] * 5,
        [1.0],
        within_group_penalty=penalty,
    )


def test_within_group_ceg_and_penalty() -> None:
    plain, penalised = path_case(0.0), path_case(0.5)
    assert cegs(plain) == [([0, 1, 2, 3, 4], [0, 1, 2, 3])]
    assert plain["kind"].tolist() == [CegKind.WITHIN_GROUP]
    assert plain["path_cost"].tolist() == [4.0]
    mean = (5 * 0.2 + 4 * 1.0) / 9
    assert float(plain["score"][0]) == pytest.approx(mean)
    assert float(penalised["score"][0]) == pytest.approx(1.5 * mean)
    assert float(penalised["mean_cost"][0]) == pytest.approx(mean)


def test_meeting_beats_within_group_and_fills_up_with_it() -> None:
    # Star around 0; group 0 anchored at 1 and 2, group 1 at 3.
    g = Graph(4, [0, 0, 0], [1, 2, 3])
    args = (
        [0, 2, 3],
        [1, 2, 3],
        [-1, -1, -1],
        [0.0, 0.0, 0.0],
        [0.0] * 4,
        [0.1, 0.1, 0.1],
        [1] * 4,
        [1.0, 1.0],
    )
    res = g.bubble(*args, max_cegs=1)
    assert res["kind"].tolist() == [CegKind.MEETING]
    assert res["covered"].tolist() == [0b11]
    res = g.bubble(*args, max_cegs=10)
    kinds = res["kind"].tolist()
    assert CegKind.MEETING in kinds
    assert CegKind.WITHIN_GROUP in kinds
    assert ([0, 1, 2], [0, 1]) in cegs(res)  # the two anchors of group 0 joined through 0


def test_anchor_edges_join_the_ceg() -> None:
    # 0 -e0- 1 -e1- 2 -e2- 3; group 0 anchored on edge e0 at node 1, group 1 on e2 at node 2.
    g = Graph(4, [0, 1, 2], [1, 2, 3])
    res = g.bubble(
        [0, 1, 2], [1, 2], [0, 2], [0.0, 0.0], [0.0] * 4, [0.5] * 3, [0, 1, 1, 0], [1.0, 1.0], max_cegs=1
    )
    assert cegs(res) == [([0, 1, 2, 3], [0, 1, 2])]
    assert res["meeting_node"].tolist()[0] in (1, 2)
    with pytest.raises(ValueError, match="not incident"):
        g.bubble([0, 1], [0], [2], [0.0], [0.0] * 4, [0.5] * 3, [1] * 4, [1.0])


def test_allowed_mask_reroutes_or_blocks() -> None:
    # Square 0-1-2-3-0: the short way from 0 to 2 is through 1 (cheap edges).
    g = Graph(4, [0, 1, 2, 3], [1, 2, 3, 0])
    costs = [0.1, 0.1, 0.4, 0.4]
    base = ([0, 1, 2], [0, 2], [-1, -1], [0.0, 0.0], [0.0] * 4, costs)
    res = g.bubble(*base, [1, 1, 1, 1], [1.0, 1.0], max_cegs=1)
    assert cegs(res) == [([0, 1, 2], [0, 1])]
    res = g.bubble(*base, [1, 0, 1, 1], [1.0, 1.0], max_cegs=1)
    assert cegs(res) == [([0, 2, 3], [2, 3])]
    res = g.bubble(*base, np.array([True, False, True, False]), [1.0, 1.0], max_cegs=5)
    assert res["kind"].tolist() == [CegKind.FALLBACK] * 2
    assert sorted(cegs(res)) == [([0], []), ([2], [])]
    assert res["covered"].tolist() in ([1, 2], [2, 1])
    # Uncovered groups cost alpha * their share of the weight.
    assert res["score"].tolist() == pytest.approx([0.5, 0.5])


def test_fallback_one_ceg_per_seed_capped_and_unreachable_by_cost() -> None:
    # Two components; group 0 (seeds 0 and 2, anchored on e1) lives in one, group 1 (seed 3) in the other.
    g = Graph(6, [0, 1, 3, 4], [1, 2, 4, 5])
    args = ([0, 2, 3], [0, 2, 3], [-1, 1, -1], [0.0, 0.1, 0.0], [0.3] * 6, [0.5] * 4, [1] * 6, [1.0, 3.0])
    res = g.bubble(*args, max_cegs=10, within_group_penalty=0.0)
    # group 0 joins its two seeds through 1; the groups never meet
    assert res["kind"].tolist() == [CegKind.WITHIN_GROUP]
    assert cegs(res) == [([0, 1, 2], [0, 1])]
    assert res["path_cost"].tolist() == pytest.approx([1.1])
    assert res["score"].tolist() == pytest.approx([0.3 * 3 / 5 + 0.5 * 2 / 5 + 3.0 / 4.0])
    res = g.bubble(*args, max_cegs=10, max_path_cost=0.2)  # too short to join
    assert res["kind"].tolist() == [CegKind.FALLBACK] * 3
    assert sorted(cegs(res)) == [([0], []), ([1, 2], [1]), ([3], [])]
    assert len(g.bubble(*args, max_cegs=2, max_path_cost=0.2)["score"]) == 2
    # Self-loops are never followed.
    loop = Graph(2, [0, 1], [0, 1])
    res = loop.bubble([0, 1, 2], [0, 1], [0, -1], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1, 1], [1.0, 1.0])
    assert res["kind"].tolist() == [CegKind.FALLBACK] * 2
    assert sorted(cegs(res)) == [([0], [0]), ([1], [])]


def test_shared_seed_node_meets_at_once_and_infinite_edges_are_walls() -> None:
    g = Graph(3, [0, 1], [1, 2])
    res = g.bubble([0, 1, 2], [1, 1], [-1, -1], [0.0, 0.0], [1.0, 0.0, 1.0], [0.0, INF], [1] * 3, [1.0, 1.0])
    assert cegs(res) == [([1], []), ([0, 1], [0])]
    assert res["kind"].tolist() == [CegKind.MEETING] * 2
    res = g.bubble([0, 1, 2], [0, 2], [-1, -1], [0.0, 0.0], [0.0] * 3, [0.0, INF], [1] * 3, [1.0, 1.0])
    assert set(res["kind"].tolist()) == {CegKind.FALLBACK}


def test_empty_inputs() -> None:
    g = Graph(3, [0], [1])
    res = g.bubble([0], [], [], [], [0.0] * 3, [0.0], [1] * 3, [])
    assert res["node_offsets"].tolist() == [0]
    assert res["score"].size == 0
    res = g.bubble([0, 0, 0], [], [], [], [0.0] * 3, [0.0], [1] * 3, [1.0, 1.0])
    assert res["score"].size == 0
    assert Graph(0, [], []).bubble([0], [], [], [], [], [], [], [])["score"].size == 0
    with pytest.raises(IndexError, match="CEG 0 does not exist"):
        ceg_at(res, 0)


GOOD: dict[str, Any] = {
    "group_offsets": [0, 1, 2],
    "seed_nodes": [0, 2],
    "seed_edges": [-1, 1],
    "seed_costs": [0.0, 0.1],
    "node_cost": [0.1, 0.2, 0.3],
    "edge_cost": [0.5, 0.5],
    "allowed": [1, 1, 1],
    "group_weights": [1.0, 1.0],
}


@pytest.mark.parametrize(
    ("field", "value", "exc", "match"),
    [
        ("group_offsets", [], ValueError, "G \\+ 1 entries"),
        ("group_offsets", [1, 2, 2], ValueError, "start at 0"),
        ("group_offsets", [0, 2, 1], ValueError, "non-decreasing"),
        ("group_offsets", [0, 1, 3], ValueError, "end at the number of seeds"),
        ("group_offsets", [0] + [2] * 65, ValueError, "at most 64"),
        ("seed_nodes", [0, 3], ValueError, "does not exist"),
        ("seed_nodes", [0, -1], ValueError, "does not exist"),
        ("seed_nodes", [0, 2, 1], ValueError, "same length"),
        ("seed_nodes", [0.0, 2.0], TypeError, "integers"),
        ("seed_edges", [-1, 2], ValueError, "does not exist"),
        ("seed_edges", [-2, 1], ValueError, "does not exist"),
        ("seed_edges", [1, 1], ValueError, "not incident"),
        ("seed_costs", [0.0, math.nan], ValueError, "never NaN"),
        ("seed_costs", [0.0, -0.5], ValueError, "never NaN or negative"),
        ("seed_costs", [0.0, INF], ValueError, "finite"),
        ("node_cost", [0.1, 0.2], ValueError, "one entry per node"),
        ("node_cost", [0.1, math.nan, 0.3], ValueError, "node_cost\\[1\\]"),
        ("edge_cost", [0.5], ValueError, "one entry per edge"),
        ("edge_cost", [0.5, -1.0], ValueError, "edge_cost\\[1\\]"),
        ("edge_cost", ["a", "b"], TypeError, "real numbers"),
        ("allowed", [1, 1], ValueError, "one entry per node"),
        ("allowed", [1, 1, 0], ValueError, "not allowed"),
        ("allowed", [0.5, 1.0, 1.0], TypeError, "bool or integer"),
        ("group_weights", [1.0], ValueError, "one entry per group"),
        ("group_weights", [1.0, -1.0], ValueError, "group_weights\\[1\\]"),
        ("group_weights", [1.0, INF], ValueError, "finite"),
        ("alpha", -1.0, ValueError, "alpha"),
        ("alpha", math.nan, ValueError, "alpha must not be NaN"),
        ("alpha", "1", TypeError, "alpha must be a real number"),
        ("max_cegs", 0, ValueError, "max_cegs must be >= 1"),
        ("max_cegs", 2.0, TypeError, "max_cegs must be an integer"),
        ("max_path_cost", -0.1, ValueError, "max_path_cost"),
        ("within_group_penalty", INF, ValueError, "within_group_penalty"),
    ],
)
def test_bubble_validation(field: str, value: Any, exc: type[Exception], match: str) -> None:
    g = Graph(3, [0, 1], [1, 2])
    args = dict(GOOD)
    assert len(g.bubble(**args)["score"]) >= 1
    args[field] = value
    with pytest.raises(exc, match=match):
        g.bubble(**args)


# ---------------------------------------------------------------------- persistence


def test_round_trip_and_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    case = Case(11, 200, 600, 3, 3)
    data = case.graph.to_bytes()
    back = Graph.from_bytes(bytearray(data))
    assert back.to_bytes() == data
    assert np.array_equal(back.heads(), case.graph.heads())
    assert np.array_equal(back.tails(), case.graph.tails())
    assert np.array_equal(back.degree(), case.graph.degree())
    assert np.array_equal(back.localize([1, 5], 2), case.graph.localize([1, 5], 2))
    before = case.bubble(max_cegs=20)
    case.graph = back
    assert same_result(case.bubble(max_cegs=20), before)
    assert back.memory_bytes() >= 24 * 600
    back.save(tmp_path / "graph.bin")
    assert Graph.load(tmp_path / "graph.bin").to_bytes() == data
    with pytest.raises(FileNotFoundError, match="knowledge graph file"):
        Graph.load(tmp_path / "nope.bin")
    (tmp_path / "bad.bin").write_bytes(data[:-1])
    with pytest.raises(ValueError, match=r"bad\.bin"):
        Graph.load(tmp_path / "bad.bin")
    with pytest.raises(TypeError, match="bytes"):
        Graph.from_bytes("abc")  # type: ignore[arg-type]
    assert Graph.from_bytes(Graph(0, [], []).to_bytes()).num_nodes == 0


def test_mutated_and_truncated_graphs_raise_value_error() -> None:
    heads, tails = random_edges(random.Random(4), 40, 90)
    good = Graph(40, heads, tails).to_bytes()
    rng = random.Random(99)
    rejected = 0
    trials = 3000
    for trial in range(trials):
        buf = bytearray(good)
        if trial % 3 == 0:
            buf = buf[: rng.randrange(len(buf))]
        else:
            for _ in range(rng.randint(1, 3)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            if trial % 3 == 2:  # re-sign: only the structural checks stand in the way
                body = bytes(buf[:-8])
                buf = bytearray(body + native.hash_bytes(body, GRAPH_CHECKSUM_SEED).to_bytes(8, "little"))
        try:
            g = Graph.from_bytes(bytes(buf))
        except ValueError:
            rejected += 1
            continue
        # Whatever parses is a consistent graph (a mutation that left the bytes unchanged).
        n = g.num_nodes
        assert int(g.degree().sum()) == 2 * g.num_edges
        assert g.localize(list(range(n)), 2).size == n
    assert rejected > 2900


# ---------------------------------------------------------------------- threads


def test_concurrent_queries_match_serial() -> None:
    case = Case(21, 1500, 6000, 3, 4)
    rng = random.Random(5)
    jobs = [([rng.randrange(1500) for _ in range(3)], rng.randint(1, 3)) for _ in range(8)]
    serial_local = [case.graph.localize(s, h, max_nodes=500) for s, h in jobs]
    serial_bubble = [case.bubble(max_cegs=c) for c in (1, 5, 40)]
    errors: list[str] = []

    def worker() -> None:
        for _ in range(3):
            for (s, h), want in zip(jobs, serial_local, strict=True):
                if not np.array_equal(case.graph.localize(s, h, max_nodes=500), want):
                    errors.append("localize differs")
            for c, want_b in zip((1, 5, 40), serial_bubble, strict=True):
                if not same_result(case.bubble(max_cegs=c), want_b):
                    errors.append("bubble differs")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
