// Cluster index (an inverted file) for top-k cosine search over rows of a float32 matrix.
//
// The rows of interest are split into C lists, each with a centroid (the lists and centroids
// come from a k-means run in Python; C == 1 makes the search exact). A search scores the
// query against every centroid, then scans the lists of the best centroids, best first, until
// at least `probe_rows` rows have been scanned (always at least one list), and returns the top
// k rows by cosine. Cost per query: C + about probe_rows dot products, so with C ~ sqrt(N)
// it grows with the square root of N, not with N.
//
// The index holds the centroids and the list layout only; the vectors stay in the caller's
// matrix, passed to every search (rows must be L2-normalised; the query is normalised here).
// Construction validates the layout (monotone offsets, row ids >= 0, no row listed twice), and
// a search checks that the matrix has every listed row, so a bad layout or the wrong matrix
// gives std::invalid_argument instead of an out-of-bounds read.
// Determinism: ties are broken by row id and lists by (centroid score, list id), so the same
// inputs give the same output.
//
// Header-only C++17; no Python here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "scoring.hpp"

namespace bridge {

class ClusterIndex {
public:
    /// `centroids` is C x dim (row-major), `offsets` has C + 1 entries (list c holds
    /// rows[offsets[c] .. offsets[c + 1])), `rows` the listed row ids.
    ClusterIndex(const float* centroids, std::size_t num_lists, std::size_t dim, const std::int64_t* offsets,
                 std::size_t num_offsets, const std::int64_t* rows, std::size_t num_rows)
        : dim_(dim), num_lists_(num_lists) {
        if (dim == 0) throw std::invalid_argument("cluster index: dim must be >= 1");
        if (num_lists == 0) throw std::invalid_argument("cluster index: needs at least one list");
        if (num_offsets != num_lists + 1)
            throw std::invalid_argument("cluster index: " + std::to_string(num_offsets) + " offsets for " +
                                        std::to_string(num_lists) + " lists (need lists + 1)");
        if (offsets[0] != 0 || offsets[num_lists] != static_cast<std::int64_t>(num_rows))
            throw std::invalid_argument("cluster index: offsets must start at 0 and end at the number of rows (" +
                                        std::to_string(num_rows) + ")");
        for (std::size_t c = 0; c < num_lists; ++c)
            if (offsets[c + 1] < offsets[c])
                throw std::invalid_argument("cluster index: offsets must not decrease (at list " + std::to_string(c) +
                                            ")");
        for (std::size_t i = 0; i < num_lists * dim; ++i)
            if (!std::isfinite(centroids[i])) throw std::invalid_argument("cluster index: a centroid is not finite");
        centroids_.assign(centroids, centroids + num_lists * dim);
        offsets_.assign(offsets, offsets + num_offsets);
        rows_.assign(rows, rows + num_rows);
        std::vector<std::int64_t> sorted(rows_);
        std::sort(sorted.begin(), sorted.end());
        if (!sorted.empty() && sorted.front() < 0)
            throw std::invalid_argument("cluster index: row ids must be >= 0, got " + std::to_string(sorted.front()));
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
            throw std::invalid_argument("cluster index: a row is listed twice");
        max_row_ = sorted.empty() ? -1 : sorted.back();
    }

    std::size_t dim() const noexcept { return dim_; }
    std::size_t num_lists() const noexcept { return num_lists_; }
    std::size_t size() const noexcept { return rows_.size(); }
    /// Rows the matrix passed to search() must have at least.
    std::size_t min_matrix_rows() const noexcept { return static_cast<std::size_t>(max_row_ + 1); }
    std::size_t memory_bytes() const noexcept {
        return centroids_.capacity() * sizeof(float) + (offsets_.capacity() + rows_.capacity()) * sizeof(std::int64_t);
    }

    /// Top k rows for each of `num_queries` queries (row-major, dim wide). Writes
    /// num_queries x k ids (-1 where fewer rows exist) and cosines (-inf there), best first.
    void search(const float* queries, std::size_t num_queries, const float* matrix, std::size_t matrix_rows,
                std::size_t matrix_dim, std::size_t k, std::size_t probe_rows, std::int64_t* out_ids,
                float* out_scores) const {
        if (matrix_dim != dim_)
            throw std::invalid_argument("cluster index: the matrix has " + std::to_string(matrix_dim) +
                                        " columns, the index " + std::to_string(dim_));
        if (matrix_rows < min_matrix_rows())
            throw std::invalid_argument("cluster index: the matrix has " + std::to_string(matrix_rows) +
                                        " rows but the index lists row " + std::to_string(max_row_) +
                                        "; rebuild the index for this matrix");
        std::vector<std::pair<float, std::uint32_t>> lists(num_lists_);
        std::vector<std::pair<std::int64_t, float>> scored;
        for (std::size_t q = 0; q < num_queries; ++q) {
            const float* query = queries + q * dim_;
            const float qn = std::sqrt(dot(query, query, dim_));
            const float inv = qn > 0 ? 1.0f / qn : 0.0f;
            for (std::size_t c = 0; c < num_lists_; ++c) {
                float s = dot(query, centroids_.data() + c * dim_, dim_);
                if (std::isnan(s)) s = -std::numeric_limits<float>::infinity();
                lists[c] = {s, static_cast<std::uint32_t>(c)};
            }
            std::sort(lists.begin(), lists.end(), [](const auto& a, const auto& b) {
                return a.first != b.first ? a.first > b.first : a.second < b.second;
            });
            scored.clear();
            for (std::size_t li = 0; li < num_lists_ && (li == 0 || scored.size() < probe_rows); ++li) {
                const std::uint32_t c = lists[li].second;
                for (auto i = offsets_[c]; i < offsets_[c + 1]; ++i) {
                    const std::int64_t row = rows_[static_cast<std::size_t>(i)];
                    float s = dot(query, matrix + static_cast<std::size_t>(row) * dim_, dim_) * inv;
                    if (std::isnan(s)) s = -std::numeric_limits<float>::infinity();
                    scored.emplace_back(row, s);
                }
            }
            const std::size_t kk = std::min(k, scored.size());
            std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(kk), scored.end(),
                              [](const auto& a, const auto& b) {
                                  return a.second != b.second ? a.second > b.second : a.first < b.first;
                              });
            for (std::size_t j = 0; j < k; ++j) {
                out_ids[q * k + j] = j < kk ? scored[j].first : -1;
                out_scores[q * k + j] = j < kk ? scored[j].second : -std::numeric_limits<float>::infinity();
            }
        }
    }

private:
    std::size_t dim_;
    std::size_t num_lists_;
    std::int64_t max_row_ = -1;
    std::vector<float> centroids_;
    std::vector<std::int64_t> offsets_;
    std::vector<std::int64_t> rows_;
};

}  // namespace bridge
