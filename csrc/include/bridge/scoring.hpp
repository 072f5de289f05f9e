// Candidate scoring: cosine similarity of a query against selected rows of a row-major
// float32 matrix whose rows are L2-normalised, keeping the top k.
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

namespace bridge {

/// Dot product with eight independent accumulators, so the compiler can vectorise it
/// without -ffast-math.
inline float dot(const float* a, const float* b, std::size_t d) noexcept {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::size_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (std::size_t j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    float tail = 0;
    for (; i < d; ++i) tail += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

/// Scores `candidates` (row ids, duplicates ignored) against `query` and returns the top k
/// as (row id, cosine) sorted by score descending, ties by row id ascending. The query is
/// normalised here; rows are assumed normalised. NaN scores rank last.
inline std::vector<std::pair<std::uint32_t, float>> top_k_cosine(const float* query, const float* matrix,
                                                                   std::size_t n_rows, std::size_t dim,
                                                                   const std::int64_t* candidates, std::size_t m,
                                                                   std::size_t k) {
    for (std::size_t i = 0; i < m; ++i)
        if (candidates[i] < 0 || static_cast<std::uint64_t>(candidates[i]) >= n_rows)
            throw std::out_of_range("candidate id " + std::to_string(candidates[i]) + " is outside the matrix (" +
                                    std::to_string(n_rows) + " rows)");
    std::vector<std::int64_t> ids(candidates, candidates + m);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const float qn = std::sqrt(dot(query, query, dim));
    const float inv = qn > 0 ? 1.0f / qn : 0.0f;
    std::vector<std::pair<std::uint32_t, float>> scored(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto row = static_cast<std::size_t>(ids[i]);
        float s = dot(query, matrix + row * dim, dim) * inv;
        if (std::isnan(s)) s = -std::numeric_limits<float>::infinity();
        scored[i] = {static_cast<std::uint32_t>(row), s};
    }
    auto better = [](const std::pair<std::uint32_t, float>& a, const std::pair<std::uint32_t, float>& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    k = std::min(k, scored.size());
    std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(), better);
    scored.resize(k);
    return scored;
}

}  // namespace bridge
