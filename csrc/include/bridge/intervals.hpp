// Merging of scored, half-open intervals [start, end) within groups (sentence windows
// within documents): either the union of overlapping intervals, or an overlap-aware
// de-duplication that keeps the best intervals and drops those overlapping them.
//
// Two intervals overlap when a.start < b.end && b.start < a.end (so nested intervals
// overlap, and adjacent ones such as [0, 3) and [3, 5) do not). Empty intervals
// (start == end) are allowed but never overlap anything: each stays on its own.
//
// Scores rank larger first with NaN after every number (including -inf); ties between
// input intervals go to the lowest index. Output order is fully determined: score
// descending (NaN last), then group, start, end and best_index ascending.
//
// Header-only C++17; no Python here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace bridge {

/// How merge_intervals combines overlapping intervals.
enum class MergeMode {
    /// Overlapping intervals of a group merge transitively into one spanning their union.
    kUnion,
    /// Intervals are visited best first; one is kept only when it overlaps no interval
    /// already kept in its group, so spans stay as short as the inputs.
    kKeepBest,
};

/// One output interval of merge_intervals.
struct MergedInterval {
    std::int64_t group = 0;       ///< group (document) id
    std::int64_t start = 0;       ///< inclusive start
    std::int64_t end = 0;         ///< exclusive end
    float score = 0;              ///< the best member score (the kept interval's own score in kKeepBest)
    std::int64_t best_index = 0;  ///< input index of the best member (ties: lowest index)
    std::int64_t members = 0;     ///< input intervals represented (see merge_intervals)
};

namespace detail {

/// True when score a ranks strictly before b: larger first, NaN after every number.
inline bool ranks_before(float a, float b) noexcept { return !std::isnan(a) && (std::isnan(b) || a > b); }

}  // namespace detail

/// Merges `n` intervals [starts[i], ends[i]) with `scores[i]` within their `groups[i]`.
///
/// kUnion: every maximal set of transitively overlapping intervals of a group becomes one
/// interval spanning their union; `members` counts them, `score` and `best_index` are
/// those of the best member.
///
/// kKeepBest: intervals are visited best first (score descending, NaN last, ties by lowest
/// index); one is kept unless it overlaps an interval already kept in its group. A
/// dropped interval is counted in the `members` of the earliest-kept interval it
/// overlaps, so `members` is 1 + the number of intervals the kept one suppressed and the
/// members of all outputs add up to n.
///
/// In both modes an empty interval is output on its own with members = 1. The result is
/// sorted by score descending (NaN last), then group, start, end and best_index.
/// Throws std::invalid_argument when some start > end.
inline std::vector<MergedInterval> merge_intervals(const std::int64_t* groups, const std::int64_t* starts,
                                                   const std::int64_t* ends, const float* scores, std::size_t n,
                                                   MergeMode mode = MergeMode::kUnion) {
    for (std::size_t i = 0; i < n; ++i)
        if (starts[i] > ends[i])
            throw std::invalid_argument("interval " + std::to_string(i) + " has start " + std::to_string(starts[i]) +
                                        " > end " + std::to_string(ends[i]));
    // i is a better member than j.
    auto better = [&](std::size_t i, std::size_t j) {
        if (detail::ranks_before(scores[i], scores[j])) return true;
        if (detail::ranks_before(scores[j], scores[i])) return false;
        return i < j;
    };
    auto single = [&](std::size_t i) {
        return MergedInterval{groups[i], starts[i], ends[i], scores[i], static_cast<std::int64_t>(i), 1};
    };
    std::vector<MergedInterval> out;
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;

    if (mode == MergeMode::kUnion) {
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return std::tie(groups[a], starts[a], a) < std::tie(groups[b], starts[b], b);
        });
        bool open = false;
        MergedInterval cur;
        std::size_t best = 0;
        auto flush = [&]() {
            if (!open) return;
            cur.score = scores[best];
            cur.best_index = static_cast<std::int64_t>(best);
            out.push_back(cur);
            open = false;
        };
        for (const std::size_t i : order) {
            if (starts[i] == ends[i]) {
                out.push_back(single(i));
                continue;
            }
            // Sorted by start, so cur.start <= starts[i] < ends[i]: overlap iff starts[i] < cur.end.
            if (open && cur.group == groups[i] && starts[i] < cur.end) {
                cur.end = std::max(cur.end, ends[i]);
                ++cur.members;
                if (better(i, best)) best = i;
                continue;
            }
            flush();
            cur = single(i);
            best = i;
            open = true;
        }
        flush();
    } else {
        // Groups are independent: visit by group, then best first within the group.
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return groups[a] != groups[b] ? groups[a] < groups[b] : better(a, b);
        });
        std::map<std::int64_t, std::size_t> kept;  // start -> index in `out`, non-empty kept intervals of the group
        for (std::size_t g = 0; g < n;) {
            const std::int64_t group = groups[order[g]];
            kept.clear();
            for (; g < n && groups[order[g]] == group; ++g) {
                const std::size_t i = order[g];
                if (starts[i] == ends[i]) {
                    out.push_back(single(i));
                    continue;
                }
                // Kept intervals are disjoint, so the ones overlapping [s, e) are contiguous in
                // start order: possibly the last one starting at or before s, then all starting
                // in (s, e). The earliest kept has the smallest index in `out`.
                std::size_t absorb = out.size();
                auto it = kept.upper_bound(starts[i]);
                if (it != kept.begin()) {
                    const auto prev = std::prev(it);
                    if (out[prev->second].end > starts[i]) absorb = prev->second;
                }
                for (; it != kept.end() && it->first < ends[i]; ++it) absorb = std::min(absorb, it->second);
                if (absorb < out.size()) {
                    ++out[absorb].members;
                } else {
                    kept.emplace(starts[i], out.size());
                    out.push_back(single(i));
                }
            }
        }
    }

    std::sort(out.begin(), out.end(), [](const MergedInterval& a, const MergedInterval& b) {
        if (detail::ranks_before(a.score, b.score)) return true;
        if (detail::ranks_before(b.score, a.score)) return false;
        return std::tie(a.group, a.start, a.end, a.best_index) < std::tie(b.group, b.start, b.end, b.best_index);
    });
    return out;
}

}  // namespace bridge
