// Rank fusion: combines several ranked lists of unit ids (one per retriever, or per
// granularity mapped onto a common unit such as a chunk) into one ranking, either by a
// weighted sum of scores or by reciprocal rank fusion (RRF).
//
// Lists arrive flattened, CSR style: list l is items [offsets[l], offsets[l + 1]) of the
// unit-id (and score) arrays, in that list's rank order. A unit repeated within one list
// counts once for that list. Accumulation is sort-based: (unit, position) pairs are sorted,
// so each unit's items are contiguous and, within a unit, ordered by list. Sums run in
// double precision in ascending list order and are rounded to float once at the end, so
// results are deterministic and independent of thread count or hash seeds.
//
// Header-only C++17; no Python here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace bridge {

/// A fused result: (unit id, fused score).
using FusedUnit = std::pair<std::int64_t, float>;

namespace detail {

/// The list index of every item position (offsets already checked).
inline std::vector<std::size_t> list_of_items(const std::int64_t* offsets, std::size_t n_lists, std::size_t m) {
    std::vector<std::size_t> list(m);
    for (std::size_t l = 0; l < n_lists; ++l)
        std::fill(list.begin() + static_cast<std::ptrdiff_t>(offsets[l]),
                  list.begin() + static_cast<std::ptrdiff_t>(offsets[l + 1]), l);
    return list;
}

/// (unit id, item position) for every item, sorted: each unit's items are contiguous and,
/// since positions grow with the list index, ordered by list and then by rank in the list.
inline std::vector<std::pair<std::int64_t, std::size_t>> items_by_unit(const std::int64_t* unit_ids,
                                                                        std::size_t m) {
    std::vector<std::pair<std::int64_t, std::size_t>> items(m);
    for (std::size_t i = 0; i < m; ++i) items[i] = {unit_ids[i], i};
    std::sort(items.begin(), items.end());
    return items;
}

/// Keeps the best k (all when k is 0 or exceeds the size), by score descending, ties by
/// unit id ascending. Scores must not be NaN.
inline void keep_top_k(std::vector<FusedUnit>& v, std::size_t k) {
    auto better = [](const FusedUnit& a, const FusedUnit& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    if (k == 0 || k > v.size()) k = v.size();
    std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end(), better);
    v.resize(k);
}

}  // namespace detail

/// Weighted score fusion. List l (items [list_offsets[l], list_offsets[l + 1]) of `unit_ids`
/// and `scores`, `n_lists + 1` offsets in all) adds `weights[l] * s` to each of its units,
/// where s is the unit's best score in that list (a unit repeated within one list counts
/// once). Returns the top k units (k = 0: all) by fused score descending, ties by unit id
/// ascending.
///
/// Non-finite values: NaN scores count as 0; infinite scores are kept; a list of weight 0
/// contributes exactly nothing (even an infinite score), though its units still appear; a
/// fused score left undefined (+inf from one list, -inf from another) becomes -inf and
/// ranks last. Throws std::invalid_argument for malformed offsets or a non-finite weight.
inline std::vector<FusedUnit> fuse_weighted(const std::int64_t* list_offsets, std::size_t n_lists,
                                            const std::int64_t* unit_ids, const float* scores, std::size_t m,
                                            const float* weights, std::size_t k = 0) {
    check_offsets(list_offsets, n_lists, m, "list_offsets", "the number of items");
    for (std::size_t l = 0; l < n_lists; ++l)
        if (!std::isfinite(weights[l]))
            throw std::invalid_argument("weights must be finite, but weight " + std::to_string(l) + " is " +
                                        std::to_string(weights[l]));
    const auto list = detail::list_of_items(list_offsets, n_lists, m);
    const auto items = detail::items_by_unit(unit_ids, m);
    auto score_of = [&](std::size_t pos) {
        const float s = scores[pos];
        return std::isnan(s) ? 0.0f : s;
    };
    std::vector<FusedUnit> fused;
    for (std::size_t i = 0; i < m;) {
        const std::int64_t unit = items[i].first;
        double acc = 0.0;
        while (i < m && items[i].first == unit) {
            const std::size_t l = list[items[i].second];
            float best = score_of(items[i].second);
            for (++i; i < m && items[i].first == unit && list[items[i].second] == l; ++i)
                best = std::max(best, score_of(items[i].second));
            if (weights[l] != 0.0f) acc += static_cast<double>(weights[l]) * static_cast<double>(best);
        }
        const float f = std::isnan(acc) ? -std::numeric_limits<float>::infinity() : static_cast<float>(acc);
        fused.emplace_back(unit, f);
    }
    detail::keep_top_k(fused, k);
    return fused;
}

/// Reciprocal rank fusion: each list adds 1 / (k_rrf + rank) to each of its units, rank
/// being 1-based. Only a unit's first occurrence in a list counts, and later duplicates do
/// not take a rank: the rank is the unit's place among the list's distinct units, so a
/// fine-grained list mapped onto coarser units (several sentences of one chunk) ranks
/// those units 1, 2, 3, ... Returns the top k units (k = 0: all) by fused score
/// descending, ties by unit id ascending. Throws std::invalid_argument for malformed
/// offsets or a k_rrf that is negative or not finite.
inline std::vector<FusedUnit> rrf(const std::int64_t* list_offsets, std::size_t n_lists,
                                  const std::int64_t* unit_ids, std::size_t m, double k_rrf = 60.0,
                                  std::size_t k = 0) {
    check_offsets(list_offsets, n_lists, m, "list_offsets", "the number of items");
    if (!std::isfinite(k_rrf) || k_rrf < 0)
        throw std::invalid_argument("k_rrf must be finite and >= 0, got " + std::to_string(k_rrf));
    const auto list = detail::list_of_items(list_offsets, n_lists, m);
    const auto items = detail::items_by_unit(unit_ids, m);
    // first[pos]: the item is its unit's first occurrence in its list.
    std::vector<char> first(m, 0);
    for (std::size_t i = 0; i < m; ++i)
        first[items[i].second] = i == 0 || items[i - 1].first != items[i].first ||
                                 list[items[i - 1].second] != list[items[i].second];
    // rank[pos]: 1-based place among the list's distinct units (first occurrences only).
    std::vector<std::size_t> rank(m, 0);
    for (std::size_t l = 0; l < n_lists; ++l) {
        std::size_t r = 0;
        for (auto pos = static_cast<std::size_t>(list_offsets[l]); pos < static_cast<std::size_t>(list_offsets[l + 1]);
             ++pos)
            if (first[pos]) rank[pos] = ++r;
    }
    std::vector<FusedUnit> fused;
    for (std::size_t i = 0; i < m;) {
        const std::int64_t unit = items[i].first;
        double acc = 0.0;
        for (; i < m && items[i].first == unit; ++i)
            if (first[items[i].second]) acc += 1.0 / (k_rrf + static_cast<double>(rank[items[i].second]));
        fused.emplace_back(unit, static_cast<float>(acc));
    }
    detail::keep_top_k(fused, k);
    return fused;
}

}  // namespace bridge
