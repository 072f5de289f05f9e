// The knowledge-graph core of BubbleRAG: an immutable undirected multigraph in CSR form,
// breadth-first localisation around seed nodes, and the "bubble" expansion that grows
// low-cost paths from groups of anchor seeds until they meet, forming candidate evidence
// graphs (CEGs).
//
// Storage. Nodes are 0..N-1 and edges 0..E-1 (both below 2^31 - 1); edge e joins head[e] and
// tail[e]. Every edge appears in the adjacency of both endpoints as (neighbour, edge id), in
// edge-id order; a self-loop therefore appears twice in its node's list (and counts 2 towards
// its degree, as in networkx). Building is a counting sort, O(N + E).
//
// Thread safety. A Graph never changes after it is built, and the queries keep all their
// scratch space in per-call, open-addressing hash tables sized to what they touch (no O(N)
// allocation per call, no shared mutable state). Any number of threads may query one Graph
// at the same time.
//
// localize(seeds, hops, max_nodes). Breadth-first search: the sorted, unique seeds first,
// then every node one hop away in discovery order (frontier order, then adjacency order),
// then two hops, ... up to `hops`; it stops as soon as `max_nodes` nodes are collected
// (0: no cap), so a capped result is a prefix of the uncapped one. Cost: O(nodes collected +
// adjacency entries scanned), independent of N.
//
// bubble(...). Seeds come in G groups (G <= 64, one per query concept); seed i starts a path
// at node seed_nodes[i] with cost seed_costs[i], and, when seed_edges[i] >= 0, that anchor
// edge (incident to the seed node) belongs to the path too. Only nodes with allowed[v] != 0
// are visited; seeds must be allowed. Duplicate seeds of one group (same node and edge) are
// merged, keeping the lowest cost.
//   1. Meetings between groups: one multi-source Dijkstra for all groups at once. Queue
//      entries are (path cost, node, group, origin seed, predecessor); each (node, group)
//      state is settled once, with its best cost, origin seed and predecessor edge, kept in a
//      hash table keyed by (node, group); a per-node uint64 mask records which groups have
//      settled the node. Path costs add edge costs (+inf: never traversed); a path is not
//      extended past `max_path_cost` (seeds are always settled). When a group settles a node
//      that another group already settled, the frontiers meet: the union of every settled
//      group's best path to that node (nodes, edges, anchor edges and their endpoints) is a
//      CEG. The search stops once `max_cegs` distinct CEGs (by node and edge set) exist, or
//      when the queue is empty.
//   2. Meetings within a group: if fewer than `max_cegs` CEGs exist, a second Dijkstra keeps,
//      for every (node, group), the best and the second-best path from two *different* seeds
//      of that group (each state settled at most twice, once per distinct origin; the
//      second-best path of a node always extends a best or second-best path of its
//      predecessor). A node holding two origins joins them; for each pair of seeds only the
//      cheapest such node is kept (ties: the lowest node id). These CEGs are added in order
//      of joined path cost until `max_cegs` exist; their score is multiplied by
//      (1 + within_group_penalty).
//   3. Fallback: if there is still no CEG, each seed alone (its node and anchor edge) is one,
//      so the result is never empty when there are seeds.
// Scoring. mean_cost is the mean of node_cost over a CEG's nodes and edge_cost over its edges;
// score = mean_cost + alpha * (weight of the groups not covered) / (total group weight)
// (the second term is 0 when every weight is 0), times (1 + within_group_penalty) for
// within-group CEGs. A group is covered when it contributed a path or when one of its seeds
// lies in the CEG (its node, and its anchor edge if it has one). CEGs are returned sorted by
// (float32 score, node list, edge list), lowest score first, at most `max_cegs` of them.
// Determinism: the queue orders entries totally (cost, then node, group, origin,
// predecessor), costs add in double precision along each path, and nothing depends on
// addresses or hash seeds, so the same inputs give the same output, byte for byte.
// Cost: O((settled states + relaxed adjacency entries) log) plus, per meeting, the length
// of the paths joined; nothing is proportional to N beyond validating the cost arrays.
//
// Serialisation: magic "BRKG", version, N, E, the degree of every node, heads, tails, and a
// checksum. Loading checks every id and that the degrees match the edge list, so a buffer
// whose declared sizes are not backed by its bytes is rejected before anything is allocated.
//
// Header-only C++17; no Python here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common.hpp"

namespace bridge {

namespace graph_detail {

/// Open-addressing hash index (linear probing, at most half full): maps 64-bit keys to dense
/// ids 0, 1, 2, ... in insertion order. Memory and time follow the number of keys inserted.
class FlatIndex {
public:
    static constexpr std::uint32_t kAbsent = 0xffffffffU;

    explicit FlatIndex(std::size_t expected = 8) {
        std::size_t cap = 16;
        while (cap < expected * 2) cap <<= 1;
        slots_.assign(cap, kAbsent);
        keys_.reserve(expected);
    }

    /// Returns (id, true) for a new key, (existing id, false) otherwise.
    std::pair<std::uint32_t, bool> insert(std::uint64_t key) {
        if ((keys_.size() + 1) * 2 > slots_.size()) grow();
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
            const std::uint32_t id = slots_[i];
            if (id == kAbsent) {
                const auto fresh = static_cast<std::uint32_t>(keys_.size());
                slots_[i] = fresh;
                keys_.push_back(key);
                return {fresh, true};
            }
            if (keys_[id] == key) return {id, false};
        }
    }

    /// The id of `key`, or kAbsent.
    std::uint32_t find(std::uint64_t key) const {
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
            const std::uint32_t id = slots_[i];
            if (id == kAbsent || keys_[id] == key) return id;
        }
    }

    std::size_t size() const noexcept { return keys_.size(); }

private:
    void grow() {
        std::vector<std::uint32_t> slots(slots_.size() * 2, kAbsent);
        const std::size_t mask = slots.size() - 1;
        for (std::uint32_t id = 0; id < keys_.size(); ++id) {
            std::size_t i = mix64(keys_[id]) & mask;
            while (slots[i] != kAbsent) i = (i + 1) & mask;
            slots[i] = id;
        }
        slots_.swap(slots);
    }

    std::vector<std::uint32_t> slots_;
    std::vector<std::uint64_t> keys_;
};

}  // namespace graph_detail

/// Inputs of Graph::bubble (pointers are borrowed for the duration of the call).
struct BubbleInput {
    const std::int64_t* group_offsets = nullptr;  ///< G + 1 entries
    std::size_t group_offsets_len = 0;
    const std::int64_t* seed_nodes = nullptr;  ///< S entries
    const std::int64_t* seed_edges = nullptr;  ///< S entries, -1 for a plain node seed
    const float* seed_costs = nullptr;         ///< S entries
    std::size_t num_seeds = 0;
    std::size_t seed_edges_len = 0;
    std::size_t seed_costs_len = 0;
    const float* node_cost = nullptr;  ///< N entries
    std::size_t node_cost_len = 0;
    const float* edge_cost = nullptr;  ///< E entries
    std::size_t edge_cost_len = 0;
    const std::uint8_t* allowed = nullptr;  ///< N entries
    std::size_t allowed_len = 0;
    const float* group_weights = nullptr;  ///< G entries
    std::size_t group_weights_len = 0;
    double alpha = 1.0;
    std::int64_t max_cegs = 10;
    double max_path_cost = std::numeric_limits<double>::infinity();
    double within_group_penalty = 0.5;
};

/// Candidate evidence graphs, CSR-packed, in rank order.
struct BubbleResult {
    std::vector<std::int64_t> node_offsets{0}, nodes, edge_offsets{0}, edges, meeting_node;
    std::vector<float> score, mean_cost, path_cost;
    std::vector<std::uint64_t> covered;
    std::vector<std::uint8_t> kind;
};

/// CEG kinds.
enum CegKind : std::uint8_t { kMeeting = 0, kWithinGroup = 1, kFallback = 2 };

class Graph {
public:
    static constexpr std::uint32_t kFormatVersion = 1;
    static constexpr std::uint64_t kMaxNodes = 0x7fffffffULL - 1;
    static constexpr std::uint64_t kMaxEdges = 0x7fffffffULL - 1;
    static constexpr std::size_t kMaxGroups = 64;

    /// The empty graph.
    Graph() : offsets_(1, 0) {}

    /// Builds the graph; throws std::invalid_argument for a bad count or an id out of range.
    Graph(std::int64_t num_nodes, const std::int64_t* heads, const std::int64_t* tails, std::size_t num_edges) {
        if (num_nodes < 0 || static_cast<std::uint64_t>(num_nodes) > kMaxNodes)
            throw std::invalid_argument("num_nodes must be in [0, " + std::to_string(kMaxNodes) + "], got " +
                                        std::to_string(num_nodes));
        if (num_edges > kMaxEdges)
            throw std::invalid_argument("a graph holds at most " + std::to_string(kMaxEdges) + " edges");
        const auto n = static_cast<std::uint64_t>(num_nodes);
        for (std::size_t e = 0; e < num_edges; ++e) {
            if (heads[e] < 0 || static_cast<std::uint64_t>(heads[e]) >= n || tails[e] < 0 ||
                static_cast<std::uint64_t>(tails[e]) >= n)
                throw std::invalid_argument("edge " + std::to_string(e) + " (" + std::to_string(heads[e]) + ", " +
                                            std::to_string(tails[e]) + ") has a node id outside [0, num_nodes = " +
                                            std::to_string(n) + ")");
        }
        num_nodes_ = static_cast<std::size_t>(n);
        head_.resize(num_edges);
        tail_.resize(num_edges);
        for (std::size_t e = 0; e < num_edges; ++e) {
            head_[e] = static_cast<std::uint32_t>(heads[e]);
            tail_[e] = static_cast<std::uint32_t>(tails[e]);
        }
        build_csr();
    }

    std::size_t num_nodes() const noexcept { return num_nodes_; }
    std::size_t num_edges() const noexcept { return head_.size(); }
    const std::vector<std::uint32_t>& heads() const noexcept { return head_; }
    const std::vector<std::uint32_t>& tails() const noexcept { return tail_; }
    std::uint32_t degree(std::size_t v) const noexcept { return offsets_[v + 1] - offsets_[v]; }

    /// Adjacency of `v` as (neighbour, edge id) pairs, in edge-id order.
    void neighbors(std::int64_t v, std::vector<std::int64_t>& nodes, std::vector<std::int64_t>& edges) const {
        check_node(v, "node");
        const auto b = offsets_[static_cast<std::size_t>(v)];
        const auto e = offsets_[static_cast<std::size_t>(v) + 1];
        nodes.resize(e - b);
        edges.resize(e - b);
        for (std::uint32_t i = b; i < e; ++i) {
            nodes[i - b] = adj_node_[i];
            edges[i - b] = adj_edge_[i];
        }
    }

    std::size_t memory_bytes() const noexcept {
        return (head_.capacity() + tail_.capacity() + offsets_.capacity() + adj_node_.capacity() +
                adj_edge_.capacity()) * sizeof(std::uint32_t) + sizeof(*this);
    }

    /// Breadth-first neighbourhood of `seeds` (see the file comment).
    std::vector<std::int64_t> localize(const std::int64_t* seeds, std::size_t n, std::int64_t hops,
                                       std::int64_t max_nodes) const {
        if (hops < 0) throw std::invalid_argument("hops must be >= 0, got " + std::to_string(hops));
        if (max_nodes < 0)
            throw std::invalid_argument("max_nodes must be >= 0 (0 means no cap), got " + std::to_string(max_nodes));
        for (std::size_t i = 0; i < n; ++i) check_node(seeds[i], "seed");
        std::vector<std::int64_t> sorted(seeds, seeds + n);
        std::sort(sorted.begin(), sorted.end());
        sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
        const std::size_t cap = max_nodes == 0 ? std::numeric_limits<std::size_t>::max()
                                               : static_cast<std::size_t>(max_nodes);
        std::vector<std::int64_t> out;
        graph_detail::FlatIndex seen(std::min<std::size_t>(cap, sorted.size() * 16 + 16));
        for (const std::int64_t s : sorted) {
            if (out.size() >= cap) return out;
            seen.insert(static_cast<std::uint64_t>(s));
            out.push_back(s);
        }
        std::size_t begin = 0;
        for (std::int64_t hop = 1; hop <= hops; ++hop) {
            const std::size_t end = out.size();
            if (begin == end) break;
            for (std::size_t i = begin; i < end; ++i) {
                const auto v = static_cast<std::size_t>(out[i]);
                for (std::uint32_t a = offsets_[v]; a < offsets_[v + 1]; ++a) {
                    const std::uint32_t u = adj_node_[a];
                    if (!seen.insert(u).second) continue;
                    if (out.size() >= cap) return out;
                    out.push_back(u);
                }
            }
            begin = end;
        }
        return out;
    }

    /// The bubble expansion (see the file comment). Throws std::invalid_argument for bad input.
    BubbleResult bubble(const BubbleInput& in) const;

    std::string to_bytes() const {
        ByteWriter w;
        w.raw(kMagic, 4);
        w.u32(kFormatVersion);
        w.u64(num_nodes_);
        w.u64(head_.size());
        for (std::size_t v = 0; v < num_nodes_; ++v) w.u32(degree(v));
        for (const std::uint32_t h : head_) w.u32(h);
        for (const std::uint32_t t : tail_) w.u32(t);
        return w.finish(kChecksumSeed);
    }

    /// A graph from to_bytes() output; throws FormatError for any malformed buffer.
    static Graph from_bytes(const char* data, std::size_t len) {
        ByteReader r(data, len);
        r.check_envelope(kMagic, kFormatVersion, kChecksumSeed, "knowledge graph");
        const std::uint64_t n = r.u64();
        const std::uint64_t m = r.u64();
        if (n > kMaxNodes || m > kMaxEdges) throw FormatError("knowledge graph: node or edge count out of range");
        r.need_items(n, 4);
        std::vector<std::uint32_t> deg(static_cast<std::size_t>(n));
        for (auto& d : deg) d = r.u32();
        r.need_items(m, 8);
        Graph g;
        g.num_nodes_ = static_cast<std::size_t>(n);
        g.head_.resize(static_cast<std::size_t>(m));
        g.tail_.resize(static_cast<std::size_t>(m));
        for (auto& h : g.head_) h = r.u32();
        for (auto& t : g.tail_) t = r.u32();
        r.expect_end();
        for (std::size_t e = 0; e < g.head_.size(); ++e)
            if (g.head_[e] >= n || g.tail_[e] >= n)
                throw FormatError("knowledge graph: edge " + std::to_string(e) + " refers to a node that does not exist");
        g.build_csr();
        for (std::size_t v = 0; v < g.num_nodes_; ++v)
            if (g.degree(v) != deg[v]) throw FormatError("knowledge graph: degree table does not match the edge list");
        return g;
    }

private:
    static constexpr char kMagic[5] = "BRKG";
    static constexpr std::uint64_t kChecksumSeed = 0x4b47524150483031ULL;  // "KGRAPH01"

    void check_node(std::int64_t v, const char* what) const {
        if (v < 0 || static_cast<std::uint64_t>(v) >= num_nodes_)
            throw std::invalid_argument(std::string(what) + " " + std::to_string(v) +
                                        " does not exist (node ids are 0.." +
                                        std::to_string(static_cast<std::int64_t>(num_nodes_) - 1) + ")");
    }

    /// CSR adjacency by counting sort: both directions, in edge-id order per node.
    void build_csr() {
        offsets_.assign(num_nodes_ + 1, 0);
        for (std::size_t e = 0; e < head_.size(); ++e) {
            ++offsets_[head_[e] + 1];
            ++offsets_[tail_[e] + 1];
        }
        for (std::size_t v = 0; v < num_nodes_; ++v) offsets_[v + 1] += offsets_[v];
        adj_node_.resize(head_.size() * 2);
        adj_edge_.resize(head_.size() * 2);
        std::vector<std::uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
        for (std::size_t e = 0; e < head_.size(); ++e) {
            const std::uint32_t h = head_[e], t = tail_[e];
            std::uint32_t p = fill[h]++;
            adj_node_[p] = t;
            adj_edge_[p] = static_cast<std::uint32_t>(e);
            p = fill[t]++;
            adj_node_[p] = h;
            adj_edge_[p] = static_cast<std::uint32_t>(e);
        }
    }

    friend class BubbleSearch;

    std::size_t num_nodes_ = 0;
    std::vector<std::uint32_t> head_, tail_;
    std::vector<std::uint32_t> offsets_;  // N + 1 entries; 2E < 2^32
    std::vector<std::uint32_t> adj_node_, adj_edge_;
};

/// One bubble expansion over a Graph (per-call state; see the file comment).
class BubbleSearch {
public:
    BubbleSearch(const Graph& g, const BubbleInput& in) : g_(g), in_(in) {
        validate();
        dedupe_seeds();
    }

    BubbleResult run() {
        if (num_groups_ == 0 || seeds_.empty()) return finish();
        std::size_t groups_with_seeds = 0, groups_with_pairs = 0;
        std::uint64_t pair_groups = 0;
        for (std::size_t g = 0; g < num_groups_; ++g) {
            const std::size_t k = group_end_[g] - group_begin_[g];
            if (k > 0) ++groups_with_seeds;
            if (k > 1) {
                ++groups_with_pairs;
                pair_groups |= std::uint64_t{1} << g;
            }
        }
        if (groups_with_seeds >= 2) search(1, true, ~std::uint64_t{0});
        if (cegs_.size() < max_cegs_ && groups_with_pairs > 0) {
            search(2, false, pair_groups);
            within_group_cegs();
        }
        if (cegs_.empty()) fallback_cegs();
        return finish();
    }

private:
    struct Seed {
        std::uint32_t node;
        std::int64_t edge;
        double cost;
        std::int32_t index;  // the input position: the origin id
        std::uint32_t group;
    };
    struct Slot {
        double dist;
        std::int32_t origin;  // index into seeds_
        std::int64_t pred_edge;  // -1 at the seed
        std::uint32_t pred_state;
        std::uint32_t pred_slot;
    };
    struct State {
        std::uint32_t node;
        std::uint32_t group;
        std::uint32_t settled = 0;
        double tent_d[2] = {kInf, kInf};
        std::int32_t tent_o[2] = {-1, -1};
        Slot slot[2] = {};
    };
    struct Entry {
        double d;
        std::uint32_t node;
        std::uint32_t group;
        std::int32_t origin;
        std::int64_t pred_edge;
        std::uint32_t pred_state;
        std::uint32_t pred_slot;
        bool operator>(const Entry& o) const {
            return std::tie(d, node, group, origin, pred_edge, pred_state, pred_slot) >
                   std::tie(o.d, o.node, o.group, o.origin, o.pred_edge, o.pred_state, o.pred_slot);
        }
    };
    struct Ceg {
        std::vector<std::uint32_t> nodes, edges;
        double path_cost;
        std::uint32_t meeting;
        std::uint64_t groups;  // groups that contributed a path
        std::uint8_t kind;
    };

    static constexpr double kInf = std::numeric_limits<double>::infinity();

    static void bad(const std::string& msg) { throw std::invalid_argument(msg); }

    static void check_costs(const float* c, std::size_t n, const char* what) {
        for (std::size_t i = 0; i < n; ++i)
            if (!(c[i] >= 0.0f))  // also catches NaN
                bad(std::string(what) + "[" + std::to_string(i) + "] is " + std::to_string(c[i]) +
                    "; costs must be >= 0 (+inf allowed), never NaN or negative");
    }

    void validate() {
        const std::size_t n = g_.num_nodes_, m = g_.head_.size();
        if (in_.group_offsets_len == 0)
            bad("group_offsets must have G + 1 entries starting at 0 ([0] for no groups)");
        num_groups_ = in_.group_offsets_len - 1;
        if (num_groups_ > Graph::kMaxGroups)
            bad("at most 64 seed groups are supported, got " + std::to_string(num_groups_));
        const std::size_t s = in_.num_seeds;
        if (in_.seed_edges_len != s || in_.seed_costs_len != s)
            bad("seed_nodes, seed_edges and seed_costs must have the same length, got " + std::to_string(s) + ", " +
                std::to_string(in_.seed_edges_len) + " and " + std::to_string(in_.seed_costs_len));
        check_offsets(in_.group_offsets, num_groups_, s, "group_offsets", "the number of seeds");
        if (in_.node_cost_len != n)
            bad("node_cost must have one entry per node (" + std::to_string(n) + "), got " +
                std::to_string(in_.node_cost_len));
        if (in_.edge_cost_len != m)
            bad("edge_cost must have one entry per edge (" + std::to_string(m) + "), got " +
                std::to_string(in_.edge_cost_len));
        if (in_.allowed_len != n)
            bad("allowed must have one entry per node (" + std::to_string(n) + "), got " +
                std::to_string(in_.allowed_len));
        if (in_.group_weights_len != num_groups_)
            bad("group_weights must have one entry per group (" + std::to_string(num_groups_) + "), got " +
                std::to_string(in_.group_weights_len));
        check_costs(in_.node_cost, n, "node_cost");
        check_costs(in_.edge_cost, m, "edge_cost");
        check_costs(in_.seed_costs, s, "seed_costs");
        for (std::size_t i = 0; i < s; ++i)
            if (!std::isfinite(in_.seed_costs[i])) bad("seed_costs[" + std::to_string(i) + "] must be finite");
        total_weight_ = 0.0;
        for (std::size_t g = 0; g < num_groups_; ++g) {
            const float w = in_.group_weights[g];
            if (!(w >= 0.0f) || !std::isfinite(w))
                bad("group_weights[" + std::to_string(g) + "] is " + std::to_string(w) + "; weights must be finite and >= 0");
            total_weight_ += w;
        }
        if (!(in_.alpha >= 0.0) || !std::isfinite(in_.alpha))
            bad("alpha must be finite and >= 0, got " + std::to_string(in_.alpha));
        if (in_.max_cegs < 1) bad("max_cegs must be >= 1, got " + std::to_string(in_.max_cegs));
        if (!(in_.max_path_cost >= 0.0))
            bad("max_path_cost must be >= 0 (+inf for no limit), got " + std::to_string(in_.max_path_cost));
        if (!(in_.within_group_penalty >= 0.0) || !std::isfinite(in_.within_group_penalty))
            bad("within_group_penalty must be finite and >= 0, got " + std::to_string(in_.within_group_penalty));
        max_cegs_ = static_cast<std::size_t>(in_.max_cegs);
        for (std::size_t i = 0; i < s; ++i) {
            const std::int64_t v = in_.seed_nodes[i];
            if (v < 0 || static_cast<std::uint64_t>(v) >= n)
                bad("seed_nodes[" + std::to_string(i) + "] = " + std::to_string(v) + " does not exist (node ids are 0.." +
                    std::to_string(static_cast<std::int64_t>(n) - 1) + ")");
            if (in_.allowed[static_cast<std::size_t>(v)] == 0)
                bad("seed node " + std::to_string(v) + " is not allowed (allowed[" + std::to_string(v) +
                    "] == 0); include every seed in the allowed mask");
            const std::int64_t e = in_.seed_edges[i];
            if (e == -1) continue;
            if (e < 0 || static_cast<std::uint64_t>(e) >= m)
                bad("seed_edges[" + std::to_string(i) + "] = " + std::to_string(e) +
                    " does not exist (use -1 for a seed without an anchor edge)");
            const auto eu = static_cast<std::size_t>(e);
            if (g_.head_[eu] != static_cast<std::uint64_t>(v) && g_.tail_[eu] != static_cast<std::uint64_t>(v))
                bad("seed_edges[" + std::to_string(i) + "] = " + std::to_string(e) + " is not incident to its seed node " +
                    std::to_string(v));
        }
    }

    /// Seeds per group, duplicates (same node and anchor edge) merged keeping the lowest cost.
    void dedupe_seeds() {
        group_begin_.assign(num_groups_, 0);
        group_end_.assign(num_groups_, 0);
        for (std::size_t g = 0; g < num_groups_; ++g) {
            std::vector<Seed> group;
            for (auto i = in_.group_offsets[g]; i < in_.group_offsets[g + 1]; ++i) {
                const auto iu = static_cast<std::size_t>(i);
                group.push_back(Seed{static_cast<std::uint32_t>(in_.seed_nodes[iu]), in_.seed_edges[iu],
                                     static_cast<double>(in_.seed_costs[iu]), static_cast<std::int32_t>(i),
                                     static_cast<std::uint32_t>(g)});
            }
            std::sort(group.begin(), group.end(), [](const Seed& a, const Seed& b) {
                return std::tie(a.node, a.edge, a.cost, a.index) < std::tie(b.node, b.edge, b.cost, b.index);
            });
            group_begin_[g] = seeds_.size();
            for (std::size_t i = 0; i < group.size(); ++i)
                if (i == 0 || group[i].node != group[i - 1].node || group[i].edge != group[i - 1].edge)
                    seeds_.push_back(group[i]);
            group_end_[g] = seeds_.size();
        }
    }

    static std::uint64_t key(std::uint32_t node, std::uint32_t group) {
        return (static_cast<std::uint64_t>(node) << 6) | group;
    }

    /// Records a candidate path to (node, group) from `origin` if it can still become one of
    /// the node's `slots` best distinct-origin paths, and queues it.
    void offer(std::uint32_t node, std::uint32_t group, std::int32_t origin, double d, std::int64_t pred_edge,
               std::uint32_t pred_state, std::uint32_t pred_slot) {
        const auto ins = index_.insert(key(node, group));
        if (ins.second) {
            State st;
            st.node = node;
            st.group = group;
            states_.push_back(st);
        }
        State& st = states_[ins.first];
        if (st.settled >= slots_) return;
        if (st.settled == 1 && st.slot[0].origin == origin) return;
        if (slots_ == 1) {
            if (!(d < st.tent_d[0])) return;
            st.tent_d[0] = d;
            st.tent_o[0] = origin;
        } else if (origin == st.tent_o[0]) {
            if (!(d < st.tent_d[0])) return;
            st.tent_d[0] = d;
        } else if (origin == st.tent_o[1]) {
            if (!(d < st.tent_d[1])) return;
            st.tent_d[1] = d;
            if (st.tent_d[1] < st.tent_d[0]) {
                std::swap(st.tent_d[0], st.tent_d[1]);
                std::swap(st.tent_o[0], st.tent_o[1]);
            }
        } else if (d < st.tent_d[0]) {
            st.tent_d[1] = st.tent_d[0];
            st.tent_o[1] = st.tent_o[0];
            st.tent_d[0] = d;
            st.tent_o[0] = origin;
        } else if (d < st.tent_d[1]) {
            st.tent_d[1] = d;
            st.tent_o[1] = origin;
        } else {
            return;
        }
        queue_.push(Entry{d, node, group, origin, pred_edge, pred_state, pred_slot});
    }

    /// Dijkstra over the allowed nodes from the seeds of `group_mask`, keeping `slots` (1 or
    /// 2) distinct-origin paths per (node, group); with `meetings`, forms a CEG whenever a
    /// node is settled by a second group and stops at max_cegs.
    void search(std::uint32_t slots, bool meetings, std::uint64_t group_mask) {
        slots_ = slots;
        states_.clear();
        index_ = graph_detail::FlatIndex(seeds_.size() * 64 + 64);
        queue_ = decltype(queue_)();
        graph_detail::FlatIndex node_index(seeds_.size() * 32 + 32);
        std::vector<std::uint64_t> node_mask;
        for (std::size_t i = 0; i < seeds_.size(); ++i)
            if ((group_mask >> seeds_[i].group) & 1U)
                offer(seeds_[i].node, seeds_[i].group, static_cast<std::int32_t>(i), seeds_[i].cost, -1, 0, 0);
        const std::uint32_t* off = g_.offsets_.data();
        const std::uint32_t* adj_node = g_.adj_node_.data();
        const std::uint32_t* adj_edge = g_.adj_edge_.data();
        while (!queue_.empty()) {
            const Entry e = queue_.top();
            queue_.pop();
            const std::uint32_t sid = index_.find(key(e.node, e.group));
            State& st = states_[sid];
            if (st.settled >= slots_) continue;
            if (st.settled == 1 && st.slot[0].origin == e.origin) continue;
            const std::uint32_t k = st.settled++;
            st.slot[k] = Slot{e.d, e.origin, e.pred_edge, e.pred_state, e.pred_slot};
            if (meetings && k == 0) {
                const auto ins = node_index.insert(e.node);
                if (ins.second) node_mask.push_back(0);
                const std::uint64_t mask = node_mask[ins.first] |= std::uint64_t{1} << e.group;
                if ((mask & (mask - 1)) != 0) {
                    meeting_ceg(e.node, mask);
                    if (cegs_.size() >= max_cegs_) return;
                }
            }
            if (e.d > in_.max_path_cost) continue;
            for (std::uint32_t a = off[e.node]; a < off[e.node + 1]; ++a) {
                const std::uint32_t u = adj_node[a];
                if (u == e.node || in_.allowed[u] == 0) continue;
                const std::uint32_t eid = adj_edge[a];
                const double c = in_.edge_cost[eid];
                if (c == kInf) continue;
                const double nd = e.d + c;
                if (nd > in_.max_path_cost) continue;
                offer(u, e.group, e.origin, nd, eid, sid, k);
            }
        }
    }

    /// Appends the nodes and edges of the settled path (state, slot) back to its seed.
    void walk(std::uint32_t sid, std::uint32_t k, std::vector<std::uint32_t>& nodes,
              std::vector<std::uint32_t>& edges) const {
        while (true) {
            const State& st = states_[sid];
            const Slot& s = st.slot[k];
            nodes.push_back(st.node);
            if (s.pred_edge < 0) {
                add_anchor(seeds_[static_cast<std::size_t>(s.origin)], nodes, edges);
                return;
            }
            edges.push_back(static_cast<std::uint32_t>(s.pred_edge));
            sid = s.pred_state;
            k = s.pred_slot;
        }
    }

    void add_anchor(const Seed& seed, std::vector<std::uint32_t>& nodes, std::vector<std::uint32_t>& edges) const {
        nodes.push_back(seed.node);
        if (seed.edge < 0) return;
        const auto e = static_cast<std::size_t>(seed.edge);
        edges.push_back(static_cast<std::uint32_t>(e));
        nodes.push_back(g_.head_[e]);
        nodes.push_back(g_.tail_[e]);
    }

    void meeting_ceg(std::uint32_t node, std::uint64_t mask) {
        Ceg c;
        c.path_cost = 0.0;
        c.meeting = node;
        c.groups = mask;
        c.kind = kMeeting;
        for (std::uint32_t g = 0; g < num_groups_; ++g) {
            if (((mask >> g) & 1U) == 0) continue;
            const std::uint32_t sid = index_.find(key(node, g));
            c.path_cost += states_[sid].slot[0].dist;
            walk(sid, 0, c.nodes, c.edges);
        }
        add(std::move(c));
    }

    void within_group_cegs() {
        struct Candidate {
            double cost;
            std::uint32_t group, node, sid;
        };
        // The cheapest joining node for each (group, pair of origins).
        std::unordered_map<std::uint64_t, Candidate> best;
        for (std::uint32_t sid = 0; sid < states_.size(); ++sid) {
            const State& st = states_[sid];
            if (st.settled < 2) continue;
            const auto o0 = static_cast<std::uint64_t>(st.slot[0].origin);
            const auto o1 = static_cast<std::uint64_t>(st.slot[1].origin);
            const std::uint64_t pair = (std::min(o0, o1) << 32) | std::max(o0, o1);
            const Candidate cand{st.slot[0].dist + st.slot[1].dist, st.group, st.node, sid};
            auto it = best.find(pair);
            if (it == best.end()) {
                best.emplace(pair, cand);
            } else if (std::tie(cand.cost, cand.node) < std::tie(it->second.cost, it->second.node)) {
                it->second = cand;
            }
        }
        std::vector<Candidate> order;
        order.reserve(best.size());
        for (const auto& kv : best) order.push_back(kv.second);
        std::sort(order.begin(), order.end(), [](const Candidate& a, const Candidate& b) {
            return std::tie(a.cost, a.group, a.node) < std::tie(b.cost, b.group, b.node);
        });
        for (const Candidate& cand : order) {
            if (cegs_.size() >= max_cegs_) return;
            Ceg c;
            c.path_cost = cand.cost;
            c.meeting = cand.node;
            c.groups = std::uint64_t{1} << cand.group;
            c.kind = kWithinGroup;
            walk(cand.sid, 0, c.nodes, c.edges);
            walk(cand.sid, 1, c.nodes, c.edges);
            add(std::move(c));
        }
    }

    void fallback_cegs() {
        for (const Seed& s : seeds_) {
            Ceg c;
            c.path_cost = s.cost;
            c.meeting = s.node;
            c.groups = std::uint64_t{1} << s.group;
            c.kind = kFallback;
            add_anchor(s, c.nodes, c.edges);
            add(std::move(c));
        }
    }

    /// Adds a CEG, or merges it into an existing one with the same node and edge set (the
    /// contributing groups are united; the cheapest path of the earliest kind is kept).
    void add(Ceg&& c) {
        std::sort(c.nodes.begin(), c.nodes.end());
        c.nodes.erase(std::unique(c.nodes.begin(), c.nodes.end()), c.nodes.end());
        std::sort(c.edges.begin(), c.edges.end());
        c.edges.erase(std::unique(c.edges.begin(), c.edges.end()), c.edges.end());
        const std::uint64_t h = hash_bytes(c.nodes.data(), c.nodes.size() * 4, c.edges.size()) ^
                                mix64(hash_bytes(c.edges.data(), c.edges.size() * 4, 0x6564676573ULL));
        auto& bucket = by_hash_[h];
        for (const std::size_t i : bucket) {
            Ceg& old = cegs_[i];
            if (old.nodes != c.nodes || old.edges != c.edges) continue;
            // CEGs form phase by phase (meetings, within-group, fallback), so the existing
            // one is of the same kind or an earlier one, which keeps its path and kind.
            old.groups |= c.groups;
            if (c.kind == old.kind && c.path_cost < old.path_cost) {
                old.path_cost = c.path_cost;
                old.meeting = c.meeting;
            }
            return;
        }
        bucket.push_back(cegs_.size());
        cegs_.push_back(std::move(c));
    }

    /// Groups with a seed inside `c` (its node, and its anchor edge if it has one).
    std::uint64_t seeds_inside(const Ceg& c) const {
        std::uint64_t mask = 0;
        for (const Seed& s : seeds_) {
            if (!std::binary_search(c.nodes.begin(), c.nodes.end(), s.node)) continue;
            if (s.edge >= 0 &&
                !std::binary_search(c.edges.begin(), c.edges.end(), static_cast<std::uint32_t>(s.edge)))
                continue;
            mask |= std::uint64_t{1} << s.group;
        }
        return mask;
    }

    BubbleResult finish() const {
        struct Ranked {
            float score;
            std::size_t i;
        };
        std::vector<Ranked> order(cegs_.size());
        std::vector<double> means(cegs_.size());
        std::vector<std::uint64_t> covered(cegs_.size());
        for (std::size_t i = 0; i < cegs_.size(); ++i) {
            const Ceg& c = cegs_[i];
            double sum = 0.0;
            for (const std::uint32_t v : c.nodes) sum += in_.node_cost[v];
            for (const std::uint32_t e : c.edges) sum += in_.edge_cost[e];
            means[i] = sum / static_cast<double>(c.nodes.size() + c.edges.size());
            covered[i] = c.groups | seeds_inside(c);
            double uncovered = 0.0;
            for (std::size_t g = 0; g < num_groups_; ++g)
                if (((covered[i] >> g) & 1U) == 0) uncovered += in_.group_weights[g];
            double score = means[i] + (total_weight_ > 0.0 ? in_.alpha * uncovered / total_weight_ : 0.0);
            if (c.kind == kWithinGroup) score *= 1.0 + in_.within_group_penalty;
            order[i] = Ranked{static_cast<float>(score), i};
        }
        std::sort(order.begin(), order.end(), [&](const Ranked& a, const Ranked& b) {
            if (a.score != b.score) return a.score < b.score;
            const Ceg& ca = cegs_[a.i];
            const Ceg& cb = cegs_[b.i];
            if (ca.nodes != cb.nodes) return ca.nodes < cb.nodes;
            return ca.edges < cb.edges;
        });
        if (order.size() > max_cegs_) order.resize(max_cegs_);
        BubbleResult r;
        for (const Ranked& rk : order) {
            const Ceg& c = cegs_[rk.i];
            r.nodes.insert(r.nodes.end(), c.nodes.begin(), c.nodes.end());
            r.edges.insert(r.edges.end(), c.edges.begin(), c.edges.end());
            r.node_offsets.push_back(static_cast<std::int64_t>(r.nodes.size()));
            r.edge_offsets.push_back(static_cast<std::int64_t>(r.edges.size()));
            r.score.push_back(rk.score);
            r.mean_cost.push_back(static_cast<float>(means[rk.i]));
            r.path_cost.push_back(static_cast<float>(c.path_cost));
            r.covered.push_back(covered[rk.i]);
            r.kind.push_back(c.kind);
            r.meeting_node.push_back(c.meeting);
        }
        return r;
    }

    const Graph& g_;
    const BubbleInput& in_;
    std::size_t num_groups_ = 0;
    std::size_t max_cegs_ = 1;
    double total_weight_ = 0.0;
    std::vector<Seed> seeds_;
    std::vector<std::size_t> group_begin_, group_end_;
    std::uint32_t slots_ = 1;
    std::vector<State> states_;
    graph_detail::FlatIndex index_;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_;
    std::vector<Ceg> cegs_;
    std::unordered_map<std::uint64_t, std::vector<std::size_t>> by_hash_;
};

inline BubbleResult Graph::bubble(const BubbleInput& in) const { return BubbleSearch(*this, in).run(); }

}  // namespace bridge
