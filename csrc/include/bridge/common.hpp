// Shared pieces of the bridge-rag C++ core: the check of CSR offsets, a seeded 64-bit hash
// and a little-endian byte writer/reader used by every serialised structure.
//
// Header-only C++17; no Python here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace bridge {

/// Checks CSR offsets (`n + 1` entries) over `m` items: they start at 0, never decrease and
/// end at `m`. `name` names the offsets and `end` what they must end at in the messages.
/// Throws std::invalid_argument otherwise.
inline void check_offsets(const std::int64_t* offsets, std::size_t n, std::size_t m, const char* name,
                          const char* end) {
    if (offsets[0] != 0)
        throw std::invalid_argument(std::string(name) + " must start at 0, got " + std::to_string(offsets[0]));
    for (std::size_t i = 0; i < n; ++i)
        if (offsets[i + 1] < offsets[i])
            throw std::invalid_argument(std::string(name) + " must be non-decreasing, but entry " +
                                        std::to_string(i + 1) + " (" + std::to_string(offsets[i + 1]) +
                                        ") < entry " + std::to_string(i) + " (" + std::to_string(offsets[i]) + ")");
    if (offsets[n] != static_cast<std::int64_t>(m))
        throw std::invalid_argument(std::string(name) + " must end at " + end + " (" + std::to_string(m) +
                                    "), got " + std::to_string(offsets[n]));
}

/// Allocator for large, randomly accessed tables: blocks of 2 MiB or more are 2 MiB-aligned
/// and, on Linux, marked for transparent huge pages, which cuts TLB misses on random probes.
/// Smaller blocks use the standard allocator.
template <class T>
struct HugePageAllocator {
    using value_type = T;
    static constexpr std::size_t kHuge = std::size_t{1} << 21;

    HugePageAllocator() noexcept = default;
    template <class U>
    HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        const std::size_t bytes = n * sizeof(T);
        if (bytes < kHuge) return std::allocator<T>().allocate(n);
        const std::size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
        void* p = std::aligned_alloc(kHuge, rounded);
        if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        madvise(p, rounded, MADV_HUGEPAGE);
#endif
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n * sizeof(T) < kHuge) {
            std::allocator<T>().deallocate(p, n);
        } else {
            std::free(p);
        }
    }
    template <class U>
    bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const HugePageAllocator<U>&) const noexcept { return false; }
};

template <class T>
using huge_vector = std::vector<T, HugePageAllocator<T>>;

/// Thrown for any malformed, truncated or corrupted serialised buffer.
class FormatError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// splitmix64 finaliser: a bijective 64-bit mixer with good avalanche.
inline std::uint64_t mix64(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

inline std::uint64_t load_le64(const unsigned char* p) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

/// Seeded 64-bit hash of a byte string. Deterministic across platforms
/// (reads bytes as little-endian words), so serialised tables stay portable.
inline std::uint64_t hash_bytes(const void* data, std::size_t len, std::uint64_t seed) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h = mix64(seed ^ (0x9e3779b97f4a7c15ULL * (len + 1)));
    std::size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        h = (h ^ mix64(load_le64(p + i))) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    std::uint64_t tail = 0;
    for (std::size_t j = len; j > i; --j) tail = (tail << 8) | p[j - 1];
    h = (h ^ mix64(tail ^ 0xc4ceb9fe1a85ec53ULL)) * 0xff51afd7ed558ccdULL;
    return mix64(h);
}

inline std::uint64_t hash_string(std::string_view s, std::uint64_t seed) noexcept {
    return hash_bytes(s.data(), s.size(), seed);
}

/// Appends little-endian values to a byte buffer.
class ByteWriter {
public:
    void u8(std::uint8_t v) { buf_.push_back(static_cast<char>(v)); }
    void u16(std::uint16_t v) { put(v, 2); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    void i32(std::int32_t v) { put(static_cast<std::uint32_t>(v), 4); }
    void f32(float v) {
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        put(bits, 4);
    }
    void raw(const char* p, std::size_t n) { buf_.append(p, n); }
    /// Appends a checksum of everything written so far and returns the buffer.
    std::string finish(std::uint64_t checksum_seed) {
        u64(hash_bytes(buf_.data(), buf_.size(), checksum_seed));
        return std::move(buf_);
    }
    std::size_t size() const noexcept { return buf_.size(); }

private:
    void put(std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xffU));
    }
    std::string buf_;
};

/// Reads little-endian values with bounds checks; every failure is a FormatError.
class ByteReader {
public:
    ByteReader(const char* data, std::size_t len) : p_(reinterpret_cast<const unsigned char*>(data)), len_(len) {}

    /// Verifies the trailing checksum and the magic/version header.
    void check_envelope(const char magic[4], std::uint32_t version, std::uint64_t checksum_seed, const char* what) {
        if (len_ < 16) throw FormatError(std::string(what) + ": buffer too short (" + std::to_string(len_) + " bytes)");
        const std::size_t body = len_ - 8;
        const std::uint64_t stored = load_le64(p_ + body);
        if (hash_bytes(p_, body, checksum_seed) != stored)
            throw FormatError(std::string(what) + ": checksum mismatch (truncated or corrupted data)");
        len_ = body;
        if (std::memcmp(p_, magic, 4) != 0) throw FormatError(std::string(what) + ": bad magic bytes (not a " + what + " buffer)");
        pos_ = 4;
        const std::uint32_t v = u32();
        if (v != version)
            throw FormatError(std::string(what) + ": unsupported format version " + std::to_string(v) +
                              " (this build reads version " + std::to_string(version) + ")");
    }
    std::uint8_t u8() { need(1); return p_[pos_++]; }
    std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
    std::uint64_t u64() { return get(8); }
    std::int32_t i32() { return static_cast<std::int32_t>(static_cast<std::uint32_t>(get(4))); }
    float f32() {
        const auto bits = static_cast<std::uint32_t>(get(4));
        float v;
        std::memcpy(&v, &bits, 4);
        return v;
    }
    /// Checks that `count` items of `item_size` bytes remain, before allocating for them.
    void need_items(std::uint64_t count, std::size_t item_size) const {
        if (item_size != 0 && count > (len_ - pos_) / item_size)
            throw FormatError("declared element count exceeds the buffer (truncated or corrupted data)");
    }
    void expect_end() const {
        if (pos_ != len_) throw FormatError("trailing bytes after the declared content");
    }

private:
    void need(std::size_t n) const {
        if (n > len_ - pos_) throw FormatError("unexpected end of data (truncated buffer)");
    }
    std::uint64_t get(int n) {
        need(static_cast<std::size_t>(n));
        std::uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i) v = (v << 8) | p_[pos_ + static_cast<std::size_t>(i)];
        pos_ += static_cast<std::size_t>(n);
        return v;
    }
    const unsigned char* p_;
    std::size_t len_;
    std::size_t pos_ = 0;
};

}  // namespace bridge
