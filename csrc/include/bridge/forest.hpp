// A forest of abstract nodes in flat arrays: parent index, level, a contiguous chunk range
// per node, and CSR children derived from the parents. A parent's level is strictly above
// its children's, which rules out cycles. An upper node owns its descendants' chunk ranges.
//
// Header-only C++17; no Python here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common.hpp"

namespace bridge {

class AbstractForest {
public:
    static constexpr std::uint32_t kFormatVersion = 1;
    static constexpr std::int32_t kNoParent = -1;

    AbstractForest() { rebuild_children(); }
    AbstractForest(const AbstractForest&) = delete;
    AbstractForest& operator=(const AbstractForest&) = delete;

    /// Appends `n` nodes. `parents[i]` is -1, an existing node, or one of the new nodes
    /// (ids continue from size()). Returns the id of the first new node. Validates
    /// everything before changing anything.
    std::uint32_t add_nodes(const std::int32_t* levels, const std::uint32_t* begins, const std::uint32_t* ends,
                            const std::int64_t* parents, std::size_t n) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        const std::size_t first = s_.parent.size();
        if (first + n > static_cast<std::size_t>(INT32_MAX))
            throw std::length_error("a forest holds at most 2^31 - 1 nodes");
        const std::size_t total = first + n;
        auto level_of = [&](std::size_t id) { return id < first ? s_.level[id] : levels[id - first]; };
        for (std::size_t i = 0; i < n; ++i) {
            if (levels[i] < 0) throw std::invalid_argument("node " + std::to_string(first + i) + ": level must be >= 0");
            if (begins[i] > ends[i])
                throw std::invalid_argument("node " + std::to_string(first + i) + ": chunk range begin > end");
            const std::int64_t p = parents[i];
            if (p == kNoParent) continue;
            if (p < 0 || static_cast<std::size_t>(p) >= total)
                throw std::invalid_argument("node " + std::to_string(first + i) + ": parent " + std::to_string(p) +
                                            " does not exist");
            if (level_of(static_cast<std::size_t>(p)) <= levels[i])
                throw std::invalid_argument("node " + std::to_string(first + i) +
                                            ": a parent's level must be above its child's");
        }
        for (std::size_t i = 0; i < n; ++i) {
            s_.level.push_back(levels[i]);
            s_.begin.push_back(begins[i]);
            s_.end.push_back(ends[i]);
            s_.parent.push_back(static_cast<std::int32_t>(parents[i]));
        }
        rebuild_children();
        return static_cast<std::uint32_t>(first);
    }

    /// Sets the parent of existing nodes (-1 detaches). Validates before changing anything.
    void set_parents(const std::uint32_t* nodes, const std::int64_t* parents, std::size_t n) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        const std::size_t total = s_.parent.size();
        for (std::size_t i = 0; i < n; ++i) {
            if (nodes[i] >= total) throw std::out_of_range("node " + std::to_string(nodes[i]) + " does not exist");
            const std::int64_t p = parents[i];
            if (p == kNoParent) continue;
            if (p < 0 || static_cast<std::size_t>(p) >= total)
                throw std::invalid_argument("parent " + std::to_string(p) + " does not exist");
            if (s_.level[static_cast<std::size_t>(p)] <= s_.level[nodes[i]])
                throw std::invalid_argument("a parent's level must be above its child's");
        }
        for (std::size_t i = 0; i < n; ++i) s_.parent[nodes[i]] = static_cast<std::int32_t>(parents[i]);
        rebuild_children();
    }

    /// Nodes reachable from `seeds` going up to `depth` ancestors and down `depth` levels
    /// of descendants (seeds included, at distance 0). Output sorted by node id, with the
    /// smallest hop distance from any seed.
    void expand(const std::uint32_t* seeds, std::size_t n, int depth, std::vector<std::uint32_t>& nodes,
                std::vector<std::int32_t>& dist) const {
        if (depth < 0) throw std::invalid_argument("depth must be >= 0");
        std::shared_lock<std::shared_mutex> lock(mu_);
        check_ids(seeds, n);
        std::unordered_map<std::uint32_t, std::int32_t> best;
        best.reserve(n * 4 + 16);
        auto visit = [&](std::uint32_t v, std::int32_t d) {
            auto it = best.find(v);
            if (it == best.end()) {
                best.emplace(v, d);
                return true;
            }
            if (d < it->second) {
                it->second = d;
                return true;
            }
            return false;
        };
        // Down-expansion is tracked apart from `best`: a node first reached by an up-walk
        // still has its subtree explored when a down-walk reaches it.
        std::unordered_set<std::uint32_t> expanded;
        std::vector<std::pair<std::uint32_t, std::int32_t>> frontier, next;
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t s = seeds[i];
            visit(s, 0);
            std::int32_t p = s_.parent[s];
            for (int d = 1; d <= depth && p != kNoParent; ++d) {
                visit(static_cast<std::uint32_t>(p), d);
                p = s_.parent[static_cast<std::size_t>(p)];
            }
            if (expanded.insert(s).second) frontier.emplace_back(s, 0);
        }
        for (int d = 1; d <= depth && !frontier.empty(); ++d) {
            next.clear();
            for (const auto& f : frontier)
                for (std::int64_t c = s_.child_off[f.first]; c < s_.child_off[f.first + 1]; ++c) {
                    const std::uint32_t ch = s_.child_ids[static_cast<std::size_t>(c)];
                    visit(ch, d);
                    if (expanded.insert(ch).second) next.emplace_back(ch, d);
                }
            frontier.swap(next);
        }
        std::vector<std::pair<std::uint32_t, std::int32_t>> out(best.begin(), best.end());
        std::sort(out.begin(), out.end());
        nodes.resize(out.size());
        dist.resize(out.size());
        for (std::size_t i = 0; i < out.size(); ++i) {
            nodes[i] = out[i].first;
            dist[i] = out[i].second;
        }
    }

    /// Sorted union of the chunk ids owned by `node_ids` and all their descendants.
    void chunk_ids(const std::uint32_t* node_ids, std::size_t n, std::vector<std::uint32_t>& out) const {
        std::shared_lock<std::shared_mutex> lock(mu_);
        check_ids(node_ids, n);
        std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
        std::vector<std::uint8_t> seen;
        std::unordered_set<std::uint32_t> seen_small;
        const bool small = n * 64 < s_.parent.size();
        if (!small) seen.assign(s_.parent.size(), 0);
        auto mark = [&](std::uint32_t v) {
            if (small) return seen_small.insert(v).second;
            if (seen[v]) return false;
            seen[v] = 1;
            return true;
        };
        std::vector<std::uint32_t> stack(node_ids, node_ids + n);
        while (!stack.empty()) {
            const std::uint32_t v = stack.back();
            stack.pop_back();
            if (!mark(v)) continue;
            if (s_.begin[v] < s_.end[v]) ranges.emplace_back(s_.begin[v], s_.end[v]);
            for (std::int64_t c = s_.child_off[v]; c < s_.child_off[v + 1]; ++c)
                stack.push_back(s_.child_ids[static_cast<std::size_t>(c)]);
        }
        std::sort(ranges.begin(), ranges.end());
        out.clear();
        std::uint32_t covered = 0;
        bool any = false;
        for (const auto& r : ranges) {
            std::uint32_t b = r.first;
            if (any && b < covered) b = covered;
            for (std::uint32_t c = b; c < r.second; ++c) out.push_back(c);
            if (!any || r.second > covered) covered = r.second;
            any = true;
        }
    }

    std::size_t size() const { std::shared_lock<std::shared_mutex> l(mu_); return s_.parent.size(); }
    std::int32_t parent(std::uint32_t v) const { std::shared_lock<std::shared_mutex> l(mu_); check_id(v); return s_.parent[v]; }
    std::int32_t level(std::uint32_t v) const { std::shared_lock<std::shared_mutex> l(mu_); check_id(v); return s_.level[v]; }
    std::pair<std::uint32_t, std::uint32_t> chunk_range(std::uint32_t v) const {
        std::shared_lock<std::shared_mutex> l(mu_);
        check_id(v);
        return {s_.begin[v], s_.end[v]};
    }
    std::vector<std::uint32_t> children(std::uint32_t v) const {
        std::shared_lock<std::shared_mutex> l(mu_);
        check_id(v);
        return {s_.child_ids.begin() + s_.child_off[v], s_.child_ids.begin() + s_.child_off[v + 1]};
    }
    /// Copies of the flat arrays: parent, level, begin, end.
    void arrays(std::vector<std::int32_t>& parent, std::vector<std::int32_t>& level, std::vector<std::uint32_t>& begin,
                std::vector<std::uint32_t>& end) const {
        std::shared_lock<std::shared_mutex> l(mu_);
        parent = s_.parent;
        level = s_.level;
        begin = s_.begin;
        end = s_.end;
    }
    std::size_t memory_bytes() const {
        std::shared_lock<std::shared_mutex> l(mu_);
        return (s_.parent.capacity() + s_.level.capacity() + s_.begin.capacity() + s_.end.capacity() +
                s_.child_ids.capacity()) * 4 + s_.child_off.capacity() * 8;
    }

    std::string to_bytes() const {
        std::shared_lock<std::shared_mutex> l(mu_);
        ByteWriter w;
        w.raw(kMagic, 4);
        w.u32(kFormatVersion);
        w.u64(s_.parent.size());
        for (std::size_t i = 0; i < s_.parent.size(); ++i) {
            w.i32(s_.level[i]);
            w.i32(s_.parent[i]);
            w.u32(s_.begin[i]);
            w.u32(s_.end[i]);
        }
        return w.finish(kChecksumSeed);
    }

    /// Replaces the contents with a serialised forest; throws FormatError and leaves this
    /// forest unchanged for any malformed buffer.
    void load_bytes(const char* data, std::size_t len) {
        ByteReader r(data, len);
        r.check_envelope(kMagic, kFormatVersion, kChecksumSeed, "abstract forest");
        const std::uint64_t n = r.u64();
        r.need_items(n, 16);
        if (n > static_cast<std::uint64_t>(INT32_MAX)) throw FormatError("abstract forest: too many nodes");
        State t;
        t.level.resize(n);
        t.parent.resize(n);
        t.begin.resize(n);
        t.end.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            t.level[i] = r.i32();
            t.parent[i] = r.i32();
            t.begin[i] = r.u32();
            t.end[i] = r.u32();
            if (t.level[i] < 0 || t.begin[i] > t.end[i]) throw FormatError("abstract forest: invalid node record");
        }
        r.expect_end();
        for (std::size_t i = 0; i < n; ++i) {
            const std::int32_t p = t.parent[i];
            if (p == kNoParent) continue;
            if (p < 0 || static_cast<std::uint64_t>(p) >= n || t.level[static_cast<std::size_t>(p)] <= t.level[i])
                throw FormatError("abstract forest: invalid parent link");
        }
        std::unique_lock<std::shared_mutex> lock(mu_);
        s_ = std::move(t);
        rebuild_children();
    }

private:
    static constexpr char kMagic[5] = "BRFO";
    static constexpr std::uint64_t kChecksumSeed = 0x464f524553543031ULL;

    struct State {
        std::vector<std::int32_t> parent, level;
        std::vector<std::uint32_t> begin, end;
        std::vector<std::int64_t> child_off;
        std::vector<std::uint32_t> child_ids;
    };

    void check_id(std::uint32_t v) const {
        if (v >= s_.parent.size())
            throw std::out_of_range("node " + std::to_string(v) + " does not exist (forest has " +
                                    std::to_string(s_.parent.size()) + " nodes)");
    }
    void check_ids(const std::uint32_t* ids, std::size_t n) const {
        for (std::size_t i = 0; i < n; ++i) check_id(ids[i]);
    }
    /// CSR children from the parent array; children listed in id order.
    void rebuild_children() {
        const std::size_t n = s_.parent.size();
        s_.child_off.assign(n + 1, 0);
        for (std::size_t i = 0; i < n; ++i)
            if (s_.parent[i] != kNoParent) ++s_.child_off[static_cast<std::size_t>(s_.parent[i]) + 1];
        for (std::size_t i = 0; i < n; ++i) s_.child_off[i + 1] += s_.child_off[i];
        s_.child_ids.assign(static_cast<std::size_t>(s_.child_off[n]), 0);
        std::vector<std::int64_t> fill(s_.child_off.begin(), s_.child_off.end() - 1);
        for (std::size_t i = 0; i < n; ++i)
            if (s_.parent[i] != kNoParent)
                s_.child_ids[static_cast<std::size_t>(fill[static_cast<std::size_t>(s_.parent[i])]++)] =
                    static_cast<std::uint32_t>(i);
    }

    mutable std::shared_mutex mu_;
    State s_;
};

}  // namespace bridge
