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
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common.hpp"

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

using Ranked = std::vector<std::pair<std::uint32_t, float>>;

/// The cosine of a query with each of a set of matrix rows, each row read once and in
/// ascending order (one pass over the matrix). A set that covers much of the matrix keeps
/// its scores in a table by row; a small one keeps them beside its sorted rows.
class RowScores {
public:
    RowScores(const float* query, const float* matrix, std::size_t n_rows, std::size_t dim,
              const std::int64_t* rows, std::size_t m)
        : dense_(m * 8 >= n_rows) {
        for (std::size_t i = 0; i < m; ++i)
            if (rows[i] < 0 || static_cast<std::uint64_t>(rows[i]) >= n_rows)
                throw std::out_of_range("candidate id " + std::to_string(rows[i]) + " is outside the matrix (" +
                                        std::to_string(n_rows) + " rows)");
        if (dense_) {
            std::vector<std::uint8_t> wanted(n_rows, 0);
            for (std::size_t i = 0; i < m; ++i) wanted[static_cast<std::size_t>(rows[i])] = 1;
            for (std::size_t row = 0; row < n_rows; ++row)
                if (wanted[row]) rows_.push_back(static_cast<std::int64_t>(row));
        } else {
            rows_.assign(rows, rows + m);
            std::sort(rows_.begin(), rows_.end());
            rows_.erase(std::unique(rows_.begin(), rows_.end()), rows_.end());
        }
        const float qn = std::sqrt(dot(query, query, dim));
        const float inv = qn > 0 ? 1.0f / qn : 0.0f;
        scores_.resize(dense_ ? n_rows : rows_.size());
        auto score_slice = [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) {
                const auto row = static_cast<std::size_t>(rows_[i]);
                const float s = dot(query, matrix + row * dim, dim) * inv;
                scores_[dense_ ? row : i] = std::isnan(s) ? -std::numeric_limits<float>::infinity() : s;
            }
        };
        // A large set is read by a few threads, each a contiguous slice (a row's score does
        // not depend on the split, so the result is the same on any machine).
        const std::size_t n = rows_.size();
        const std::size_t work = n * dim;
        const std::size_t threads =
            std::min<std::size_t>({std::max(1u, std::thread::hardware_concurrency()), kMaxThreads,
                                   std::max<std::size_t>(1, work / kValuesPerThread)});
        std::vector<std::thread> pool;
        std::size_t started = 1;  // slice 0 is this thread's
        try {
            for (; started < threads; ++started)
                pool.emplace_back(score_slice, n * started / threads, n * (started + 1) / threads);
        } catch (const std::system_error&) {  // no thread to be had: this thread reads the rest
        }
        score_slice(0, n / threads);
        for (std::size_t t = started; t < threads; ++t) score_slice(n * t / threads, n * (t + 1) / threads);
        for (auto& th : pool) th.join();
    }

    /// The score of `row`, one of the rows given.
    float at(std::int64_t row) const {
        if (dense_) return scores_[static_cast<std::size_t>(row)];
        return scores_[static_cast<std::size_t>(std::lower_bound(rows_.begin(), rows_.end(), row) - rows_.begin())];
    }

private:
    static constexpr std::size_t kMaxThreads = 4;
    static constexpr std::size_t kValuesPerThread = std::size_t{1} << 22;  // 16 MiB of float32 rows
    bool dense_;
    std::vector<std::int64_t> rows_;
    std::vector<float> scores_;
};

/// Scores several groups of candidate rows against one query and returns each group's top
/// k as (row id, cosine), sorted by score descending, ties by row id ascending. Group g's
/// candidates are `candidates[offsets[g] .. offsets[g + 1])` (row ids, duplicates ignored);
/// the offsets end at `m`, the number of candidates (:func:`check_offsets`).
/// A row named by several groups is scored once (:class:`RowScores`), so groups that share
/// rows cost what their union costs. The query is normalised here; rows are assumed
/// normalised. NaN scores rank last.
inline std::vector<Ranked> top_k_cosine_groups(const float* query, const float* matrix, std::size_t n_rows,
                                               std::size_t dim, const std::int64_t* offsets, std::size_t n_groups,
                                               const std::int64_t* candidates, std::size_t m, std::size_t k) {
    check_offsets(offsets, n_groups, m, "offsets", "len(candidate_ids)");
    const RowScores scores(query, matrix, n_rows, dim, candidates, m);
    auto better = [](const std::pair<std::uint32_t, float>& a, const std::pair<std::uint32_t, float>& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    std::vector<Ranked> out(n_groups);
    for (std::size_t g = 0; g < n_groups; ++g) {
        std::vector<std::int64_t> ids(candidates + offsets[g], candidates + offsets[g + 1]);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        Ranked& scored = out[g];
        scored.resize(ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) scored[i] = {static_cast<std::uint32_t>(ids[i]), scores.at(ids[i])};
        const std::size_t top = std::min(k, scored.size());
        std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(top), scored.end(), better);
        scored.resize(top);
    }
    return out;
}

/// Scores `candidates` (row ids, duplicates ignored) against `query` and returns the top k,
/// as one group of :func:`top_k_cosine_groups`.
inline Ranked top_k_cosine(const float* query, const float* matrix, std::size_t n_rows, std::size_t dim,
                           const std::int64_t* candidates, std::size_t m, std::size_t k) {
    const std::int64_t offsets[2] = {0, static_cast<std::int64_t>(m)};
    return std::move(top_k_cosine_groups(query, matrix, n_rows, dim, offsets, 1, candidates, m, k).front());
}

}  // namespace bridge
