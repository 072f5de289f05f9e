// Cuckoo filter mapping an entity string to a sorted list of abstract ids (CFT-RAG style),
// made exact, growable, thread-safe and serialisable.
//
// Layout. The bucket table holds, per slot, a fingerprint (uint16, 8-16 significant bits,
// 0 = empty) and the index of an entry record. Entry records live in a dense array that
// never moves while lookups run: the key's full 64-bit hash (every fingerprint hit is
// verified against it, so a lookup never returns another entity's list), an atomic
// temperature counter, and the (offset, length) of the entry's id list in an arena.
// Because entries hold the full hash, the table is derivable from them: growth rebuilds
// a table twice the size instead of failing, and nothing is ever lost.
//
// Concurrency. A shared mutex: lookups take it shared (temperatures are atomics, so the
// counts stay exact under concurrent lookups); inserts, removals and reordering take it
// exclusively.
//
// Header-only C++17; no Python here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common.hpp"

namespace bridge {

struct CuckooOptions {
    unsigned fingerprint_bits = 12;    ///< 8..16
    std::size_t capacity = 1024;       ///< expected entities; sizes the first table
    unsigned max_kicks = 500;          ///< bounded eviction before the table grows
    std::uint64_t reorder_every = 1000000;  ///< automatic reorder after this many lookups; 0 = never
    std::uint64_t seed = 0x62726964676572ULL;  ///< hash and eviction seed
};

struct CuckooMemory {
    std::size_t fingerprint_table = 0;  ///< fingerprints, one uint16 per slot
    std::size_t slot_refs = 0;          ///< entry index, one uint32 per slot
    std::size_t entry_records = 0;      ///< hash, temperature, list offset/length per entry
    std::size_t id_lists = 0;           ///< the id arena (including slack capacity)
    std::size_t total() const { return fingerprint_table + slot_refs + entry_records + id_lists; }
};

struct CuckooStats {
    std::uint64_t lookups = 0;                     ///< keys looked up
    std::uint64_t hits = 0;                        ///< keys found
    std::uint64_t fingerprint_false_positives = 0; ///< fingerprint matched, full hash did not
};

class CuckooFilter {
public:
    static constexpr std::uint32_t kEmpty = 0xffffffffU;
    static constexpr std::size_t kSlots = 4;
    static constexpr std::uint32_t kFormatVersion = 1;

    explicit CuckooFilter(const CuckooOptions& opt = CuckooOptions()) { init(opt); }
    CuckooFilter(const CuckooFilter&) = delete;
    CuckooFilter& operator=(const CuckooFilter&) = delete;

    // ---------------------------------------------------------------- mutation
    /// Inserts `key` with `ids`, or merges `ids` into its existing list (sorted, unique).
    /// Returns true when the key was new.
    bool insert(std::string_view key, const std::uint32_t* ids, std::size_t n) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        const std::uint64_t h = hash_string(key, s_.seed);
        const std::uint32_t e = find_entry(h);
        if (e != kEmpty) {
            merge_ids(e, ids, n);
            return false;
        }
        const std::uint32_t idx = alloc_entry(h);
        merge_ids(idx, ids, n);
        place_or_grow(idx);
        ++s_.live;
        return true;
    }

    /// Removes `key` and its list. Returns true when it was present.
    bool remove(std::string_view key) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        const std::size_t slot = find_slot(hash_string(key, s_.seed));
        if (slot == npos) return false;
        drop_slot(slot);
        return true;
    }

    /// Removes `ids` from `key`'s list; an entry whose list becomes empty is removed.
    /// Returns how many ids were removed.
    std::size_t remove_ids(std::string_view key, const std::uint32_t* ids, std::size_t n) {
        std::unique_lock<std::shared_mutex> lock(mu_);
        const std::size_t slot = find_slot(hash_string(key, s_.seed));
        if (slot == npos) return 0;
        const std::uint32_t e = entry_at(slot);
        std::vector<std::uint32_t> drop(ids, ids + n);
        std::sort(drop.begin(), drop.end());
        std::vector<std::uint32_t> kept;
        const std::uint32_t* list = ids_of(s_.ent[e]);
        for (std::uint32_t i = 0; i < s_.ent[e].len; ++i)
            if (!std::binary_search(drop.begin(), drop.end(), list[i])) kept.push_back(list[i]);
        const std::size_t removed = s_.ent[e].len - kept.size();
        if (kept.empty()) {
            drop_slot(slot);
        } else if (removed > 0) {
            set_ids(e, kept);
        }
        return removed;
    }

    /// Sorts every bucket's occupied slots by temperature (hottest first) so hot entities
    /// are found with fewer comparisons.
    void reorder() {
        std::unique_lock<std::shared_mutex> lock(mu_);
        reorder_locked();
    }

    // ---------------------------------------------------------------- queries
    /// Appends `key`'s ids to `out` and returns true when present. `touch` bumps the
    /// entry's temperature (the default for lookups).
    bool lookup(std::string_view key, std::vector<std::uint32_t>& out, bool touch = true) {
        bool found;
        std::uint64_t fps = 0, every = 0;
        {
            std::shared_lock<std::shared_mutex> lock(mu_);
            const std::size_t slot = probe(hash_string(key, s_.seed), fps);
            found = slot != npos;
            if (found) emit(entry_at(slot), out, touch);
            record(1, found ? 1 : 0, fps);
            every = s_.reorder_every;
        }
        if (touch) count_lookups(1, every);
        return found;
    }

    /// Looks up `n` keys; writes CSR output (offsets has n + 1 items). Keys are processed
    /// in blocks whose bucket and entry reads are prefetched, so cache misses overlap.
    void lookup_many(const std::string_view* keys, std::size_t n, std::vector<std::int64_t>& offsets,
                     std::vector<std::uint32_t>& ids, bool touch = true) {
        offsets.assign(n + 1, 0);
        ids.reserve(2 * n);
        std::uint64_t hits = 0, fps = 0, every = 0;
        {
            std::shared_lock<std::shared_mutex> lock(mu_);
            constexpr std::size_t B = 32;
            std::uint64_t hs[B];
            std::size_t b1s[B], b2s[B];
            std::uint32_t cand[B];
            for (std::size_t base = 0; base < n; base += B) {
                const std::size_t m = std::min(B, n - base);
                for (std::size_t j = 0; j < m; ++j) {  // stage 1: hash, prefetch both buckets
                    hs[j] = hash_string(keys[base + j], s_.seed);
                    const std::uint16_t fp = fingerprint(hs[j]);
                    b1s[j] = bucket1(hs[j]);
                    b2s[j] = alt_bucket(b1s[j], fp);
                    prefetch(&s_.buckets[b1s[j]]);
                    prefetch(&s_.buckets[b2s[j]]);
                }
                for (std::size_t j = 0; j < m; ++j) {  // stage 2: first fingerprint match, prefetch entry
                    cand[j] = first_fp_match(hs[j], b1s[j], b2s[j]);
                    if (cand[j] != kEmpty) prefetch(&s_.ent[cand[j]]);
                }
                for (std::size_t j = 0; j < m; ++j) {  // stage 3: verify the full hash, prefetch id lists
                    std::uint32_t e = cand[j];
                    if (e != kEmpty && s_.ent[e].hash != hs[j]) {
                        const std::size_t slot = probe(hs[j], fps);  // rare: fingerprint collision
                        e = slot == npos ? kEmpty : entry_at(slot);
                    }
                    if (e != kEmpty && s_.ent[e].len > 1) prefetch(s_.arena.data() + s_.ent[e].off);
                    cand[j] = e;
                }
                for (std::size_t j = 0; j < m; ++j) {  // stage 4: emit ids
                    if (cand[j] != kEmpty) {
                        emit(cand[j], ids, false);
                        ++hits;
                    }
                    offsets[base + j + 1] = static_cast<std::int64_t>(ids.size());
                }
                // stage 5: temperatures. The locked increments come after the block's loads,
                // so they do not stall the prefetched reads above.
                if (touch)
                    for (std::size_t j = 0; j < m; ++j)
                        if (cand[j] != kEmpty) s_.ent[cand[j]].temp.fetch_add(1, std::memory_order_relaxed);
            }
            record(n, hits, fps);
            every = s_.reorder_every;
        }
        if (touch) count_lookups(n, every);
    }

    bool contains(std::string_view key) const {
        std::shared_lock<std::shared_mutex> lock(mu_);
        std::uint64_t fps = 0;
        return probe(hash_string(key, s_.seed), fps) != npos;
    }

    /// True when a plain cuckoo filter (fingerprints only, no verification) would report
    /// `key` present: used to measure the fingerprint-stage false-positive rate.
    bool fingerprint_match(std::string_view key) const {
        std::shared_lock<std::shared_mutex> lock(mu_);
        const std::uint64_t h = hash_string(key, s_.seed);
        const std::size_t b1 = bucket1(h);
        return first_fp_match(h, b1, alt_bucket(b1, fingerprint(h))) != kEmpty;
    }

    /// The key's temperature (successful lookups so far), or -1 when absent.
    std::int64_t temperature(std::string_view key) const {
        std::shared_lock<std::shared_mutex> lock(mu_);
        std::uint64_t fps = 0;
        const std::size_t slot = probe(hash_string(key, s_.seed), fps);
        if (slot == npos) return -1;
        return static_cast<std::int64_t>(s_.ent[entry_at(slot)].temp.load(std::memory_order_relaxed));
    }

    std::size_t size() const { std::shared_lock<std::shared_mutex> l(mu_); return s_.live; }
    std::size_t num_buckets() const { std::shared_lock<std::shared_mutex> l(mu_); return s_.nb; }
    unsigned fingerprint_bits() const { std::shared_lock<std::shared_mutex> l(mu_); return s_.fp_bits; }
    unsigned max_kicks() const { std::shared_lock<std::shared_mutex> l(mu_); return s_.max_kicks; }
    std::uint64_t reorder_every() const { std::shared_lock<std::shared_mutex> l(mu_); return s_.reorder_every; }
    std::uint64_t seed() const { std::shared_lock<std::shared_mutex> l(mu_); return s_.seed; }
    std::uint64_t reorders() const { return reorders_.load(std::memory_order_relaxed); }
    double load_factor() const {
        std::shared_lock<std::shared_mutex> l(mu_);
        return static_cast<double>(s_.live) / static_cast<double>(s_.nb * kSlots);
    }
    CuckooMemory memory() const {
        std::shared_lock<std::shared_mutex> l(mu_);
        CuckooMemory m;
        m.fingerprint_table = s_.nb * kSlots * sizeof(std::uint16_t);
        m.slot_refs = s_.nb * kSlots * sizeof(std::uint32_t);
        m.entry_records = s_.ent.capacity() * sizeof(Entry) + s_.alive.capacity() + s_.free.capacity() * 4;
        m.id_lists = s_.arena.capacity() * sizeof(std::uint32_t);
        return m;
    }
    CuckooStats stats() const {
        CuckooStats st;
        st.lookups = n_lookups_.load(std::memory_order_relaxed);
        st.hits = n_hits_.load(std::memory_order_relaxed);
        st.fingerprint_false_positives = n_fp_.load(std::memory_order_relaxed);
        return st;
    }
    /// All live (key hash, temperature, ids) records in entry order, for tests and export.
    template <class F>
    void for_each_entry(F&& f) const {
        std::shared_lock<std::shared_mutex> l(mu_);
        for (std::uint32_t e = 0; e < s_.n_ent; ++e) {
            if (!s_.alive[e]) continue;
            const Entry& r = s_.ent[e];
            f(r.hash, r.temp.load(std::memory_order_relaxed), ids_of(r), r.len);
        }
    }

    // ---------------------------------------------------------------- persistence
    /// Versioned little-endian serialisation with a trailing checksum. Dead entries and
    /// arena holes are compacted away, so equal contents give equal bytes.
    std::string to_bytes() const {
        std::shared_lock<std::shared_mutex> l(mu_);
        ByteWriter w;
        w.raw(kMagic, 4);
        w.u32(kFormatVersion);
        w.u32(s_.fp_bits);
        w.u32(s_.max_kicks);
        w.u64(s_.seed);
        w.u64(s_.rng);
        w.u64(s_.reorder_every);
        w.u64(s_.nb);
        std::vector<std::uint32_t> remap(s_.n_ent, kEmpty);
        std::uint32_t next = 0;
        for (std::uint32_t e = 0; e < s_.n_ent; ++e)
            if (s_.alive[e]) remap[e] = next++;
        w.u64(next);
        for (std::size_t b = 0; b < s_.nb; ++b)
            for (std::size_t i = 0; i < kSlots; ++i) {
                const std::uint32_t e = s_.buckets[b].entry[i];
                w.u16(s_.buckets[b].fp[i]);
                w.u32(e == kEmpty ? kEmpty : remap[e]);
            }
        for (std::uint32_t e = 0; e < s_.n_ent; ++e) {
            if (!s_.alive[e]) continue;
            const Entry& r = s_.ent[e];
            w.u64(r.hash);
            w.u64(r.temp.load(std::memory_order_relaxed));
            w.u32(r.len);
            const std::uint32_t* p = ids_of(r);
            for (std::uint32_t i = 0; i < r.len; ++i) w.u32(p[i]);
        }
        return w.finish(kChecksumSeed);
    }

    /// Replaces this filter's contents with a serialised one. Throws FormatError (and
    /// leaves this filter unchanged) for any truncated, corrupted or inconsistent buffer.
    void load_bytes(const char* data, std::size_t len) {
        State t = parse(data, len);
        std::unique_lock<std::shared_mutex> lock(mu_);
        s_ = std::move(t);
        n_lookups_ = 0;
        n_hits_ = 0;
        n_fp_ = 0;
        since_reorder_ = 0;
    }

private:
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    static constexpr char kMagic[5] = "BRCF";
    static constexpr std::uint64_t kChecksumSeed = 0x43554b4f4f2d3031ULL;

    /// Four slots: fingerprints first (one 8-byte scan), then entry references.
    struct Bucket {
        std::uint16_t fp[kSlots];
        std::uint32_t entry[kSlots];
    };
    /// An entity's record. A one-id list is stored inline in `off` (no arena access).
    struct Entry {
        std::uint64_t hash = 0;
        mutable std::atomic<std::uint64_t> temp{0};  // bumped by lookups under the shared lock
        std::uint32_t off = 0;
        std::uint32_t len = 0;

        Entry() = default;
        // Copies happen only while the table is held exclusively (growth, loading).
        Entry(const Entry& o) : hash(o.hash), temp(o.temp.load(std::memory_order_relaxed)), off(o.off), len(o.len) {}
        Entry& operator=(const Entry& o) {
            hash = o.hash;
            temp.store(o.temp.load(std::memory_order_relaxed), std::memory_order_relaxed);
            off = o.off;
            len = o.len;
            return *this;
        }
    };

    struct State {
        unsigned fp_bits = 12;
        std::uint16_t fp_mask = 0xfff;
        unsigned max_kicks = 500;
        std::uint64_t reorder_every = 1000000;
        std::uint64_t seed = 0;
        std::uint64_t rng = 1;
        std::size_t nb = 1;  // buckets, a power of two
        std::size_t live = 0;
        huge_vector<Bucket> buckets;
        huge_vector<Entry> ent;
        std::size_t n_ent = 0;
        std::vector<std::uint8_t> alive;
        std::vector<std::uint32_t> free;
        huge_vector<std::uint32_t> arena;
        std::size_t garbage = 0;  // arena words no longer referenced
    };

    static std::size_t cap_for(std::uint32_t n) {
        if (n <= 1) return 0;
        std::size_t c = 2;
        while (c < n) c <<= 1;
        return c;
    }
    static void prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
        __builtin_prefetch(p);
#else
        (void)p;
#endif
    }
    const std::uint32_t* ids_of(const Entry& r) const { return r.len <= 1 ? &r.off : s_.arena.data() + r.off; }
    std::uint32_t entry_at(std::size_t slot) const { return s_.buckets[slot / kSlots].entry[slot % kSlots]; }

    void init(const CuckooOptions& opt) {
        if (opt.fingerprint_bits < 8 || opt.fingerprint_bits > 16)
            throw std::invalid_argument("fingerprint_bits must be between 8 and 16, got " +
                                        std::to_string(opt.fingerprint_bits));
        if (opt.max_kicks < 1 || opt.max_kicks > 100000)
            throw std::invalid_argument("max_kicks must be between 1 and 100000");
        if (opt.capacity > (std::size_t{1} << 34)) throw std::invalid_argument("capacity must be <= 2^34");
        s_.fp_bits = opt.fingerprint_bits;
        s_.fp_mask = static_cast<std::uint16_t>((1U << opt.fingerprint_bits) - 1U);
        s_.max_kicks = opt.max_kicks;
        s_.reorder_every = opt.reorder_every;
        s_.seed = opt.seed;
        s_.rng = mix64(opt.seed ^ 0x5eedULL) | 1ULL;
        // Aim at a 96% load for `capacity` entities; a failed eviction grows the table anyway.
        const auto want = static_cast<std::size_t>(static_cast<double>(std::max<std::size_t>(opt.capacity, 1)) /
                                                   (kSlots * 0.96)) + 1;
        std::size_t nb = 1;
        while (nb < want) nb <<= 1;
        reset_buckets(s_, nb);
    }
    static void reset_buckets(State& t, std::size_t nb) {
        t.nb = nb;
        Bucket empty;
        for (std::size_t i = 0; i < kSlots; ++i) {
            empty.fp[i] = 0;
            empty.entry[i] = kEmpty;
        }
        t.buckets.assign(nb, empty);
    }

    std::uint16_t fingerprint(std::uint64_t h) const { return fingerprint_of(h, s_.fp_mask); }
    static std::uint16_t fingerprint_of(std::uint64_t h, std::uint16_t mask) {
        auto fp = static_cast<std::uint16_t>((h >> 40) & mask);
        return fp == 0 ? std::uint16_t{1} : fp;
    }
    std::size_t bucket1(std::uint64_t h) const { return static_cast<std::size_t>(h) & (s_.nb - 1); }
    static std::size_t alt_of(std::size_t b, std::uint16_t fp, std::size_t nb) {
        return (b ^ static_cast<std::size_t>(mix64(fp * 0x9e3779b97f4a7c15ULL))) & (nb - 1);
    }
    std::size_t alt_bucket(std::size_t b, std::uint16_t fp) const { return alt_of(b, fp, s_.nb); }

    /// Entry of the first slot whose fingerprint matches (unverified), or kEmpty.
    std::uint32_t first_fp_match(std::uint64_t h, std::size_t b1, std::size_t b2) const {
        const std::uint16_t fp = fingerprint(h);
        for (std::size_t b : {b1, b2}) {
            const Bucket& bk = s_.buckets[b];
            for (std::size_t i = 0; i < kSlots; ++i)
                if (bk.fp[i] == fp) return bk.entry[i];
        }
        return kEmpty;
    }
    /// Slot holding the entry of hash `h`, or npos; counts fingerprint-stage false positives.
    std::size_t probe(std::uint64_t h, std::uint64_t& fps) const {
        const std::uint16_t fp = fingerprint(h);
        const std::size_t b1 = bucket1(h);
        const std::size_t b2 = alt_bucket(b1, fp);
        for (std::size_t b : {b1, b2}) {
            const Bucket& bk = s_.buckets[b];
            for (std::size_t i = 0; i < kSlots; ++i) {
                if (bk.fp[i] != fp) continue;
                if (s_.ent[bk.entry[i]].hash == h) return b * kSlots + i;
                ++fps;
            }
            if (b1 == b2) break;
        }
        return npos;
    }
    std::size_t find_slot(std::uint64_t h) const {
        std::uint64_t fps = 0;
        return probe(h, fps);
    }
    std::uint32_t find_entry(std::uint64_t h) const {
        const std::size_t slot = find_slot(h);
        return slot == npos ? kEmpty : entry_at(slot);
    }
    void emit(std::uint32_t e, std::vector<std::uint32_t>& out, bool touch) const {
        const Entry& r = s_.ent[e];
        if (touch) r.temp.fetch_add(1, std::memory_order_relaxed);
        const std::uint32_t* p = ids_of(r);
        for (std::uint32_t i = 0; i < r.len; ++i) out.push_back(p[i]);  // lists are short: no memmove call
    }

    void record(std::uint64_t n, std::uint64_t hits, std::uint64_t fps) {
        n_lookups_.fetch_add(n, std::memory_order_relaxed);
        n_hits_.fetch_add(hits, std::memory_order_relaxed);
        if (fps) n_fp_.fetch_add(fps, std::memory_order_relaxed);
    }
    /// Counts lookups towards the automatic reorder; the thread that crosses the
    /// threshold reorders (after releasing its shared lock).
    void count_lookups(std::uint64_t n, std::uint64_t every) {
        if (every == 0) return;
        const std::uint64_t after = since_reorder_.fetch_add(n, std::memory_order_relaxed) + n;
        if (after < every) return;
        std::uint64_t expected = after;
        if (since_reorder_.compare_exchange_strong(expected, 0, std::memory_order_relaxed)) reorder();
    }

    void reorder_locked() {
        std::uint32_t order[kSlots];
        constexpr std::size_t ahead = 8;  // prefetch the entries of bucket b + ahead
        for (std::size_t b = 0; b < s_.nb; ++b) {
            if (b + ahead < s_.nb)
                for (std::size_t i = 0; i < kSlots; ++i)
                    if (s_.buckets[b + ahead].entry[i] != kEmpty) prefetch(&s_.ent[s_.buckets[b + ahead].entry[i]]);
            Bucket& bk = s_.buckets[b];
            std::size_t m = 0;
            for (std::size_t i = 0; i < kSlots; ++i)
                if (bk.entry[i] != kEmpty) order[m++] = bk.entry[i];
            if (m < 2) continue;
            std::sort(order, order + m, [&](std::uint32_t a, std::uint32_t c) {
                const auto ta = s_.ent[a].temp.load(std::memory_order_relaxed);
                const auto tc = s_.ent[c].temp.load(std::memory_order_relaxed);
                return ta != tc ? ta > tc : a < c;
            });
            for (std::size_t i = 0; i < kSlots; ++i) {
                bk.entry[i] = i < m ? order[i] : kEmpty;
                bk.fp[i] = i < m ? fingerprint(s_.ent[order[i]].hash) : std::uint16_t{0};
            }
        }
        reorders_.fetch_add(1, std::memory_order_relaxed);
    }

    static void grow_entries(State& t, std::size_t need) {
        if (need > t.ent.size()) t.ent.resize(std::max<std::size_t>(16, std::max(need, t.ent.size() * 2)));
    }
    std::uint32_t alloc_entry(std::uint64_t h) {
        std::uint32_t idx;
        if (!s_.free.empty()) {
            idx = s_.free.back();
            s_.free.pop_back();
        } else {
            if (s_.n_ent >= kEmpty - 1) throw std::length_error("cuckoo filter is limited to 2^32 - 2 entries");
            grow_entries(s_, s_.n_ent + 1);
            idx = static_cast<std::uint32_t>(s_.n_ent++);
            s_.alive.push_back(0);
        }
        Entry& r = s_.ent[idx];
        r.hash = h;
        r.temp.store(0, std::memory_order_relaxed);
        r.off = 0;
        r.len = 0;
        s_.alive[idx] = 1;
        return idx;
    }

    /// Merges ids into entry e's list, keeping it sorted and unique.
    void merge_ids(std::uint32_t e, const std::uint32_t* ids, std::size_t n) {
        if (n == 0) return;
        const Entry& r = s_.ent[e];
        std::vector<std::uint32_t> merged(ids_of(r), ids_of(r) + r.len);
        merged.insert(merged.end(), ids, ids + n);
        std::sort(merged.begin(), merged.end());
        merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
        set_ids(e, merged);
    }
    /// Replaces entry e's list with `list` (sorted, unique), reusing its arena block when it fits.
    void set_ids(std::uint32_t e, const std::vector<std::uint32_t>& list) {
        if (list.size() > std::numeric_limits<std::uint32_t>::max() / 2) throw std::length_error("id list too long");
        Entry& r = s_.ent[e];
        const std::size_t old_cap = cap_for(r.len);
        const auto n = static_cast<std::uint32_t>(list.size());
        if (n <= 1) {
            s_.garbage += old_cap;
            r.off = n == 1 ? list[0] : 0;
        } else {
            if (n > old_cap) {
                s_.garbage += old_cap;
                r.off = static_cast<std::uint32_t>(arena_alloc(cap_for(n)));
            }
            std::copy(list.begin(), list.end(), s_.arena.begin() + r.off);
        }
        r.len = n;
        maybe_compact();
    }
    std::size_t arena_alloc(std::size_t words) {
        if (s_.arena.size() + words > std::numeric_limits<std::uint32_t>::max()) {
            compact();
            if (s_.arena.size() + words > std::numeric_limits<std::uint32_t>::max())
                throw std::length_error("id arena exceeds 2^32 ids");
        }
        const std::size_t at = s_.arena.size();
        s_.arena.resize(at + words, 0);
        return at;
    }
    void maybe_compact() {
        if (s_.garbage > 4096 && s_.garbage * 2 > s_.arena.size()) compact();
    }
    void compact() {
        huge_vector<std::uint32_t> fresh;
        fresh.reserve(s_.arena.size() - s_.garbage);
        for (std::uint32_t e = 0; e < s_.n_ent; ++e) {
            Entry& r = s_.ent[e];
            if (!s_.alive[e] || r.len <= 1) continue;
            const std::size_t at = fresh.size();
            fresh.insert(fresh.end(), s_.arena.begin() + r.off, s_.arena.begin() + r.off + r.len);
            fresh.resize(at + cap_for(r.len), 0);
            r.off = static_cast<std::uint32_t>(at);
        }
        s_.arena.swap(fresh);
        s_.garbage = 0;
    }

    void drop_slot(std::size_t slot) {
        Bucket& bk = s_.buckets[slot / kSlots];
        const std::uint32_t e = bk.entry[slot % kSlots];
        bk.fp[slot % kSlots] = 0;
        bk.entry[slot % kSlots] = kEmpty;
        Entry& r = s_.ent[e];
        s_.garbage += cap_for(r.len);
        r.len = 0;
        r.off = 0;
        r.hash = 0;
        r.temp.store(0, std::memory_order_relaxed);
        s_.alive[e] = 0;
        s_.free.push_back(e);
        --s_.live;
        maybe_compact();
    }

    std::uint64_t next_rand() {
        s_.rng ^= s_.rng >> 12;
        s_.rng ^= s_.rng << 25;
        s_.rng ^= s_.rng >> 27;
        return s_.rng * 0x2545f4914f6cdd1dULL;
    }

    bool try_empty(std::size_t b, std::uint32_t e, std::uint16_t fp) {
        Bucket& bk = s_.buckets[b];
        for (std::size_t i = 0; i < kSlots; ++i) {
            if (bk.entry[i] == kEmpty) {
                bk.entry[i] = e;
                bk.fp[i] = fp;
                return true;
            }
        }
        return false;
    }
    /// Bounded cuckoo eviction. On failure the displaced entry is still recorded in
    /// the entry array, so a rebuild re-places everything.
    bool place(std::uint32_t e) {
        std::uint16_t fp = fingerprint(s_.ent[e].hash);
        std::size_t b = bucket1(s_.ent[e].hash);
        if (try_empty(b, e, fp)) return true;
        b = alt_bucket(b, fp);
        if (try_empty(b, e, fp)) return true;
        for (unsigned k = 0; k < s_.max_kicks; ++k) {
            const std::size_t i = next_rand() % kSlots;
            std::swap(e, s_.buckets[b].entry[i]);
            std::swap(fp, s_.buckets[b].fp[i]);
            b = alt_bucket(b, fp);
            if (try_empty(b, e, fp)) return true;
        }
        return false;
    }
    void place_or_grow(std::uint32_t e) {
        if (place(e)) return;
        std::size_t nb = s_.nb * 2;
        while (!rebuild(nb)) nb *= 2;
    }
    /// Rebuilds the table with `nb` buckets from the entry records (in entry order).
    bool rebuild(std::size_t nb) {
        reset_buckets(s_, nb);
        for (std::uint32_t e = 0; e < s_.n_ent; ++e)
            if (s_.alive[e] && !place(e)) return false;
        return true;
    }

    static State parse(const char* data, std::size_t len) {
        ByteReader r(data, len);
        r.check_envelope(kMagic, kFormatVersion, kChecksumSeed, "cuckoo filter");
        State t;
        t.fp_bits = r.u32();
        if (t.fp_bits < 8 || t.fp_bits > 16) throw FormatError("cuckoo filter: fingerprint bits out of range");
        t.fp_mask = static_cast<std::uint16_t>((1U << t.fp_bits) - 1U);
        t.max_kicks = r.u32();
        if (t.max_kicks < 1 || t.max_kicks > 100000) throw FormatError("cuckoo filter: max_kicks out of range");
        t.seed = r.u64();
        t.rng = r.u64();
        if (t.rng == 0) throw FormatError("cuckoo filter: invalid generator state");
        t.reorder_every = r.u64();
        const std::uint64_t nb = r.u64();
        if (nb == 0 || (nb & (nb - 1)) != 0 || nb > (1ULL << 40))
            throw FormatError("cuckoo filter: bucket count is not a power of two");
        const std::uint64_t n_entries = r.u64();
        r.need_items(nb * kSlots, 6);
        if (n_entries > nb * kSlots) throw FormatError("cuckoo filter: more entries than slots");
        reset_buckets(t, static_cast<std::size_t>(nb));
        for (std::size_t b = 0; b < t.nb; ++b)
            for (std::size_t i = 0; i < kSlots; ++i) {
                t.buckets[b].fp[i] = r.u16();
                t.buckets[b].entry[i] = r.u32();
            }
        r.need_items(n_entries, 20);
        const auto n = static_cast<std::size_t>(n_entries);
        grow_entries(t, std::max<std::size_t>(n, 1));
        t.n_ent = n;
        t.alive.assign(n, 1);
        std::vector<std::uint32_t> list;
        for (std::size_t e = 0; e < n; ++e) {
            Entry& rec = t.ent[e];
            rec.hash = r.u64();
            rec.temp.store(r.u64(), std::memory_order_relaxed);
            const std::uint32_t k = r.u32();
            r.need_items(k, 4);
            list.resize(k);
            for (std::uint32_t i = 0; i < k; ++i) {
                list[i] = r.u32();
                if (i > 0 && list[i] <= list[i - 1]) throw FormatError("cuckoo filter: id list not sorted and unique");
            }
            rec.len = k;
            if (k <= 1) {
                rec.off = k == 1 ? list[0] : 0;
            } else {
                rec.off = static_cast<std::uint32_t>(t.arena.size());
                t.arena.insert(t.arena.end(), list.begin(), list.end());
                t.arena.resize(t.arena.size() + cap_for(k) - k, 0);
            }
        }
        r.expect_end();
        t.live = n;
        // Structural checks: every entry sits in exactly one slot of one of its two buckets,
        // under its own fingerprint; empty slots carry no fingerprint; hashes are unique.
        std::vector<std::uint8_t> seen(n, 0);
        for (std::size_t b = 0; b < t.nb; ++b)
            for (std::size_t i = 0; i < kSlots; ++i) {
                const std::uint32_t e = t.buckets[b].entry[i];
                const std::uint16_t sfp = t.buckets[b].fp[i];
                if (e == kEmpty) {
                    if (sfp != 0) throw FormatError("cuckoo filter: fingerprint in an empty slot");
                    continue;
                }
                if (e >= n || seen[e]) throw FormatError("cuckoo filter: slot refers to an invalid or repeated entry");
                seen[e] = 1;
                const std::uint64_t h = t.ent[e].hash;
                const std::uint16_t fp = fingerprint_of(h, t.fp_mask);
                const std::size_t b1 = static_cast<std::size_t>(h) & (t.nb - 1);
                if (sfp != fp || (b != b1 && b != alt_of(b1, fp, t.nb)))
                    throw FormatError("cuckoo filter: entry stored under the wrong fingerprint or bucket");
            }
        for (std::size_t e = 0; e < n; ++e)
            if (!seen[e]) throw FormatError("cuckoo filter: entry not referenced by any slot");
        std::vector<std::uint64_t> hs(n);
        for (std::size_t e = 0; e < n; ++e) hs[e] = t.ent[e].hash;
        std::sort(hs.begin(), hs.end());
        if (std::adjacent_find(hs.begin(), hs.end()) != hs.end()) throw FormatError("cuckoo filter: duplicate key hash");
        return t;
    }

    mutable std::shared_mutex mu_;
    State s_;
    std::atomic<std::uint64_t> since_reorder_{0};
    std::atomic<std::uint64_t> reorders_{0};
    std::atomic<std::uint64_t> n_lookups_{0}, n_hits_{0}, n_fp_{0};
};

}  // namespace bridge
