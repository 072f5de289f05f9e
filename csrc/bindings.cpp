// The one pybind11 file: exposes the header-only structures as core._native.
// Shared conversion helpers come first (numpy in and out without copies, the one 2-D float32
// matrix check, the one bytes idiom); then one bind_*() per structure or kernel, each a flat
// table of .def(...) over the functions above it; the module body only calls them. Every loop
// runs with the GIL released. No retrieval policy lives here, and the headers know nothing of Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bridge/common.hpp"
#include "bridge/cuckoo_filter.hpp"
#include "bridge/forest.hpp"
#include "bridge/fusion.hpp"
#include "bridge/graph.hpp"
#include "bridge/intervals.hpp"
#include "bridge/scoring.hpp"

namespace py = pybind11;
using namespace pybind11::literals;
using bridge::AbstractForest;
using bridge::CuckooFilter;
using bridge::Graph;

namespace {

// ====================================================================== conversion helpers

/// A C-contiguous numpy array of T; converting to it copies only when the dtype or layout differs.
template <class T>
using Contiguous = py::array_t<T, py::array::c_style | py::array::forcecast>;

// ---------------------------------------------------------------------- numpy out

/// Moves a vector into a 1-D numpy array that owns it through a capsule (no copy).
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v) {
    auto* heap = new std::vector<T>(std::move(v));
    py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>({static_cast<py::ssize_t>(heap->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                          heap->data(), owner);
}

/// A vector of uint32 ids as an int64 numpy array.
py::array_t<std::int64_t> ids_to_numpy(const std::vector<std::uint32_t>& ids) {
    return to_numpy(std::vector<std::int64_t>(ids.begin(), ids.end()));
}

/// Ranked (id, score) pairs as two numpy arrays: (int64 ids, float32 scores), typed as such in the
/// signature unless the caller returns a plain py::tuple.
template <class Id>
auto ranked_to_numpy(const std::vector<std::pair<Id, float>>& ranked) {
    std::vector<std::int64_t> ids(ranked.size());
    std::vector<float> scores(ranked.size());
    for (std::size_t i = 0; i < ranked.size(); ++i) {
        ids[i] = ranked[i].first;
        scores[i] = ranked[i].second;
    }
    return py::make_tuple(to_numpy(std::move(ids)), to_numpy(std::move(scores)));
}

// ---------------------------------------------------------------------- numpy in: 1-D arrays

/// `obj` through numpy.asarray, checked like every 1-D input: its dtype kind is one of `kinds`
/// (else TypeError "<what> must be <expected>, got dtype ...") and it is one-dimensional (else
/// ValueError). An empty input passes whatever its dtype or shape.
py::array checked_1d(const py::handle& obj, const char* what, std::string_view kinds, const char* expected) {
    py::array arr = py::module_::import("numpy").attr("asarray")(obj);
    if (arr.size() == 0) return arr;
    if (kinds.find(arr.dtype().kind()) == std::string_view::npos)
        throw py::type_error(std::string(what) + " must be " + expected + ", got dtype " +
                             py::str(arr.dtype()).cast<std::string>());
    if (arr.ndim() != 1) throw py::value_error(std::string(what) + " must be one-dimensional");
    return arr;
}

/// A checked 1-D array as a C-contiguous T array (read in place when it already is one).
template <class T>
Contiguous<T> contiguous_1d(const py::array& arr) {
    if (arr.size() == 0) return Contiguous<T>(0);
    return Contiguous<T>::ensure(arr);
}

/// An integer array-like as int64, rejecting floats, bools and other non-integer dtypes.
Contiguous<std::int64_t> int_array(const py::handle& obj, const char* what) {
    return contiguous_1d<std::int64_t>(checked_1d(obj, what, "iu", "integers"));
}

/// CSR offsets as int64 with at least one entry ([0] for no `parts`); the kernels check the rest.
Contiguous<std::int64_t> offsets_array(const py::handle& obj, const char* name, const char* parts) {
    auto off = int_array(obj, name);
    if (off.size() == 0)
        throw py::value_error(std::string(name) + " must have len(" + parts + ") + 1 entries, starting at 0 ([0] for no " +
                              parts + ")");
    return off;
}

/// A real-valued array-like as float32, rejecting bools, complex numbers, strings and objects.
Contiguous<float> float_array(const py::handle& obj, const char* what) {
    return contiguous_1d<float>(checked_1d(obj, what, "fiu", "real numbers"));
}

/// A node mask as uint8 (nonzero = set) from a bool or integer array-like of any values.
Contiguous<std::uint8_t> mask_array(const py::handle& obj, const char* what) {
    py::array arr = checked_1d(obj, what, "biu", "a bool or integer array");
    if (arr.size() != 0 && arr.dtype().kind() != 'b' && arr.itemsize() != 1)
        arr = py::module_::import("numpy").attr("not_equal")(arr, 0);
    return contiguous_1d<std::uint8_t>(arr);
}

/// Ids as uint32, each checked to lie in [0, 2^32 - 2].
std::vector<std::uint32_t> id_vector(const py::handle& obj, const char* what) {
    auto arr = int_array(obj, what);
    auto r = arr.unchecked<1>();
    std::vector<std::uint32_t> out(static_cast<std::size_t>(arr.size()));
    for (py::ssize_t i = 0; i < arr.size(); ++i) {
        if (r(i) < 0 || r(i) > 0xfffffffeLL)
            throw py::value_error(std::string(what) + " must be in [0, 2^32 - 2], got " + std::to_string(r(i)));
        out[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(r(i));
    }
    return out;
}

/// Points a (pointer, length) pair of a kernel's input struct at a contiguous array.
template <class T, class Array>
void view(const T*& data, std::size_t& len, const Array& arr) {
    data = arr.data();
    len = static_cast<std::size_t>(arr.size());
}

// ---------------------------------------------------------------------- numpy in: matrices

/// A matrix read in place, never copied.
struct FloatMatrix {
    const float* data;
    std::size_t rows;
    std::size_t dim;
};

/// The one check of a matrix that is read in place: a numpy array (else TypeError), 2-D (else
/// ValueError), float32 and C-contiguous (else TypeError; `hint` ends its message). The caller's
/// argument keeps the array alive.
FloatMatrix float_matrix(const py::handle& matrix, const char* hint) {
    if (!py::isinstance<py::array>(matrix)) throw py::type_error("matrix must be a numpy array");
    auto mat = py::reinterpret_borrow<py::array>(matrix);
    if (mat.ndim() != 2) throw py::value_error("matrix must be two-dimensional (rows x dim)");
    if (!mat.dtype().is(py::dtype::of<float>()) || !(mat.flags() & py::array::c_style))
        throw py::type_error(std::string("matrix must be a C-contiguous float32 array") + hint);
    return {static_cast<const float*>(mat.data()), static_cast<std::size_t>(mat.shape(0)),
            static_cast<std::size_t>(mat.shape(1))};
}

// ---------------------------------------------------------------------- scalars and strings

/// Checks `value >= 0` and converts it; `note` goes after ">= 0" in the message.
std::size_t non_negative(long long value, const char* name, const char* note = "") {
    if (value < 0)
        throw py::value_error(std::string(name) + " must be >= 0" + note + ", got " + std::to_string(value));
    return static_cast<std::size_t>(value);
}

/// Borrowed UTF-8 views of a sequence of str; `keep` holds the sequence alive.
std::vector<std::string_view> string_views(const py::handle& keys, py::object& keep) {
    if (py::isinstance<py::str>(keys) || py::isinstance<py::bytes>(keys))
        throw py::type_error("expected a sequence of str, got a single string; wrap it in a list");
    keep = py::reinterpret_borrow<py::object>(keys);
    if (!PyList_Check(keep.ptr()) && !PyTuple_Check(keep.ptr())) keep = py::list(keep);
    PyObject* seq = keep.ptr();
    const bool is_list = PyList_Check(seq);
    const Py_ssize_t n = is_list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
    std::vector<std::string_view> out(static_cast<std::size_t>(n));
    PyObject** items = is_list ? reinterpret_cast<PyListObject*>(seq)->ob_item
                               : reinterpret_cast<PyTupleObject*>(seq)->ob_item;
    constexpr Py_ssize_t ahead = 32;  // str objects may be scattered in memory: prefetch them
    for (Py_ssize_t i = 0; i < n; ++i) {
#if defined(__GNUC__) || defined(__clang__)
        if (i + ahead < n) {
            __builtin_prefetch(items[i + ahead]);
            __builtin_prefetch(reinterpret_cast<const char*>(items[i + ahead]) + 64);
        }
#endif
        PyObject* item = items[i];
        if (!PyUnicode_Check(item))
            throw py::type_error("item " + std::to_string(i) + " is " + std::string(Py_TYPE(item)->tp_name) +
                                 ", expected str");
        Py_ssize_t len = 0;
        const char* p = PyUnicode_AsUTF8AndSize(item, &len);
        if (p == nullptr) throw py::error_already_set();
        out[static_cast<std::size_t>(i)] = std::string_view(p, static_cast<std::size_t>(len));
    }
    return out;
}

// ---------------------------------------------------------------------- bytes in and out

/// Bytes out: serialises a structure with the GIL released and returns the buffer as bytes.
template <class T>
py::bytes to_bytes(const T& obj) {
    std::string s;
    {
        py::gil_scoped_release nogil;
        s = obj.to_bytes();
    }
    return py::bytes(s);
}

/// Bytes in: `parse(data, size)` over the buffer of `data`, read in place with the GIL released.
template <class Parse>
auto from_bytes(const py::bytes& data, Parse&& parse) {
    std::string_view v = data;
    py::gil_scoped_release nogil;
    return parse(v.data(), v.size());
}

/// Replaces a structure's contents with a serialised one (its `_restore`).
template <class T>
void restore(T& obj, const py::bytes& data) {
    from_bytes(data, [&obj](const char* p, std::size_t n) { obj.load_bytes(p, n); });
}

// ====================================================================== errors and hashing

void bind_errors(py::module_&) {
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const bridge::FormatError& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const std::length_error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        }
    });
}

std::uint64_t hash_bytes(const py::bytes& data, std::uint64_t seed) {
    return from_bytes(data, [seed](const char* p, std::size_t n) { return bridge::hash_bytes(p, n, seed); });
}

std::uint64_t hash_string(std::string_view s, std::uint64_t seed) { return bridge::hash_string(s, seed); }

void bind_hashing(py::module_& m) {
    m.def("hash_bytes", &hash_bytes, py::arg("data"), py::arg("seed") = 0,
          "Seeded 64-bit hash of bytes (the checksum function of the formats).");
    m.def("hash_string", &hash_string, py::arg("text"), py::arg("seed") = 0,
          "Seeded 64-bit hash used by the filter (deterministic across runs).");
}

// ====================================================================== CuckooFilter

std::unique_ptr<CuckooFilter> make_cuckoo(unsigned fingerprint_bits, std::size_t capacity, unsigned max_kicks,
                                          std::uint64_t reorder_every, std::uint64_t seed) {
    bridge::CuckooOptions o;
    o.fingerprint_bits = fingerprint_bits;
    o.capacity = capacity;
    o.max_kicks = max_kicks;
    o.reorder_every = reorder_every;
    o.seed = seed;
    return std::make_unique<CuckooFilter>(o);
}

bool cuckoo_insert(CuckooFilter& f, std::string_view key, const py::handle& ids) {
    auto v = id_vector(ids, "ids");
    py::gil_scoped_release nogil;
    return f.insert(key, v.data(), v.size());
}

std::size_t cuckoo_insert_many(CuckooFilter& f, const py::handle& keys, const py::handle& offsets,
                               const py::handle& ids) {
    py::object keep;
    auto views = string_views(keys, keep);
    auto off = int_array(offsets, "offsets");
    auto v = id_vector(ids, "ids");
    if (static_cast<std::size_t>(off.size()) != views.size() + 1)
        throw py::value_error("offsets must have len(entities) + 1 items");
    auto o = off.unchecked<1>();
    for (py::ssize_t i = 0; i < off.size(); ++i)
        if (o(i) < 0 || o(i) > static_cast<std::int64_t>(v.size()) || (i > 0 && o(i) < o(i - 1)))
            throw py::value_error("offsets must be non-decreasing and within ids");
    std::size_t added = 0;
    py::gil_scoped_release nogil;
    for (std::size_t i = 0; i < views.size(); ++i) {
        const auto at = static_cast<py::ssize_t>(i);
        added += f.insert(views[i], v.data() + o(at), static_cast<std::size_t>(o(at + 1) - o(at)));
    }
    return added;
}

bool cuckoo_remove(CuckooFilter& f, std::string_view key) {
    py::gil_scoped_release nogil;
    return f.remove(key);
}

std::size_t cuckoo_remove_ids(CuckooFilter& f, std::string_view key, const py::handle& ids) {
    auto v = id_vector(ids, "ids");
    py::gil_scoped_release nogil;
    return f.remove_ids(key, v.data(), v.size());
}

py::object cuckoo_lookup(CuckooFilter& f, std::string_view key, bool touch) {
    std::vector<std::uint32_t> out;
    if (!f.lookup(key, out, touch)) return py::none();
    py::list l(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) l[i] = py::int_(out[i]);
    return std::move(l);
}

auto cuckoo_lookup_many(CuckooFilter& f, const py::handle& keys, bool touch) {
    py::object keep;
    auto views = string_views(keys, keep);
    std::vector<std::int64_t> offsets;
    std::vector<std::uint32_t> ids;
    {
        py::gil_scoped_release nogil;
        f.lookup_many(views.data(), views.size(), offsets, ids, touch);
    }
    return py::make_tuple(to_numpy(std::move(offsets)), to_numpy(std::move(ids)));
}

bool cuckoo_contains_object(const CuckooFilter& f, const py::handle& key) {
    return py::isinstance<py::str>(key) && f.contains(key.cast<std::string>());
}

py::dict cuckoo_memory_breakdown(const CuckooFilter& f) {
    auto mem = f.memory();
    return py::dict("fingerprint_table"_a = mem.fingerprint_table,
                    "slot_refs"_a = mem.slot_refs,
                    "entry_records"_a = mem.entry_records,
                    "id_lists"_a = mem.id_lists,
                    "total"_a = mem.total());
}

py::dict cuckoo_stats(const CuckooFilter& f) {
    auto st = f.stats();
    return py::dict("lookups"_a = st.lookups,
                    "hits"_a = st.hits,
                    "fingerprint_false_positives"_a = st.fingerprint_false_positives,
                    "reorders"_a = f.reorders());
}

py::list cuckoo_entries(const CuckooFilter& f) {
    py::list out;
    f.for_each_entry([&](std::uint64_t h, std::uint64_t t, const std::uint32_t* p, std::uint32_t n) {
        out.append(py::make_tuple(h, t, std::vector<std::uint32_t>(p, p + n)));
    });
    return out;
}

void bind_cuckoo(py::module_& m) {
    py::class_<CuckooFilter>(m, "CuckooFilter")
        .def(py::init(&make_cuckoo), py::kw_only(), py::arg("fingerprint_bits") = 12, py::arg("capacity") = 1024,
             py::arg("max_kicks") = 500, py::arg("reorder_every") = 1000000,
             py::arg("seed") = bridge::CuckooOptions().seed)
        .def("insert", &cuckoo_insert, py::arg("entity"), py::arg("ids"))
        .def("insert_many", &cuckoo_insert_many, py::arg("entities"), py::arg("offsets"), py::arg("ids"))
        .def("remove", &cuckoo_remove, py::arg("entity"))
        .def("remove_ids", &cuckoo_remove_ids, py::arg("entity"), py::arg("ids"))
        .def("lookup", &cuckoo_lookup, py::arg("entity"), py::arg("touch") = true)
        .def("lookup_many", &cuckoo_lookup_many, py::arg("entities"), py::arg("touch") = true)
        .def("contains", &CuckooFilter::contains, py::arg("entity"))
        .def("__contains__", &cuckoo_contains_object)
        .def("fingerprint_match", &CuckooFilter::fingerprint_match, py::arg("entity"))
        .def("temperature", &CuckooFilter::temperature, py::arg("entity"))
        .def("reorder", &CuckooFilter::reorder, py::call_guard<py::gil_scoped_release>())
        .def("__len__", &CuckooFilter::size)
        .def("load_factor", &CuckooFilter::load_factor)
        .def("memory_bytes", [](const CuckooFilter& f) { return f.memory().total(); })
        .def("memory_breakdown", &cuckoo_memory_breakdown)
        .def("stats", &cuckoo_stats)
        .def("entries", &cuckoo_entries)
        .def_property_readonly("num_buckets", &CuckooFilter::num_buckets)
        .def_property_readonly("fingerprint_bits", &CuckooFilter::fingerprint_bits)
        .def_property_readonly("max_kicks", &CuckooFilter::max_kicks)
        .def_property_readonly("reorder_every", &CuckooFilter::reorder_every)
        .def_property_readonly("seed", &CuckooFilter::seed)
        .def("to_bytes", &to_bytes<CuckooFilter>)
        .def("_restore", &restore<CuckooFilter>, py::arg("data"));
}

// ====================================================================== AbstractForest

std::uint32_t forest_add_nodes(AbstractForest& f, const py::handle& levels, const py::handle& begins,
                               const py::handle& ends, const py::handle& parents) {
    auto lv = int_array(levels, "levels");
    auto b = id_vector(begins, "chunk_begin");
    auto e = id_vector(ends, "chunk_end");
    auto p = int_array(parents, "parents");
    const auto n = static_cast<std::size_t>(lv.size());
    if (b.size() != n || e.size() != n || static_cast<std::size_t>(p.size()) != n)
        throw py::value_error("levels, chunk_begin, chunk_end and parents must have the same length");
    std::vector<std::int32_t> l32(n);
    auto lr = lv.unchecked<1>();
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t level = lr(static_cast<py::ssize_t>(i));
        if (level < 0 || level > INT32_MAX) throw py::value_error("levels must be in [0, 2^31)");
        l32[i] = static_cast<std::int32_t>(level);
    }
    const std::int64_t* pp = p.data();
    py::gil_scoped_release nogil;
    return f.add_nodes(l32.data(), b.data(), e.data(), pp, n);
}

void forest_set_parents(AbstractForest& f, const py::handle& nodes, const py::handle& parents) {
    auto nv = id_vector(nodes, "nodes");
    auto p = int_array(parents, "parents");
    if (static_cast<std::size_t>(p.size()) != nv.size())
        throw py::value_error("nodes and parents must have the same length");
    const std::int64_t* pp = p.data();
    py::gil_scoped_release nogil;
    f.set_parents(nv.data(), pp, nv.size());
}

auto forest_expand(const AbstractForest& f, const py::handle& seeds, int depth) {
    auto s = id_vector(seeds, "node_ids");
    std::vector<std::uint32_t> nodes;
    std::vector<std::int32_t> dist;
    {
        py::gil_scoped_release nogil;
        f.expand(s.data(), s.size(), depth, nodes, dist);
    }
    return py::make_tuple(to_numpy(std::move(nodes)), to_numpy(std::move(dist)));
}

py::array_t<std::uint32_t> forest_chunk_ids(const AbstractForest& f, const py::handle& nodes) {
    auto s = id_vector(nodes, "node_ids");
    std::vector<std::uint32_t> out;
    {
        py::gil_scoped_release nogil;
        f.chunk_ids(s.data(), s.size(), out);
    }
    return to_numpy(std::move(out));
}

py::dict forest_arrays(const AbstractForest& f) {
    std::vector<std::int32_t> parent, level;
    std::vector<std::uint32_t> begin, end;
    f.arrays(parent, level, begin, end);
    return py::dict("parent"_a = to_numpy(std::move(parent)),
                    "level"_a = to_numpy(std::move(level)),
                    "chunk_begin"_a = to_numpy(std::move(begin)),
                    "chunk_end"_a = to_numpy(std::move(end)));
}

void bind_forest(py::module_& m) {
    py::class_<AbstractForest>(m, "AbstractForest")
        .def(py::init<>())
        .def("add_nodes", &forest_add_nodes, py::arg("levels"), py::arg("chunk_begin"), py::arg("chunk_end"),
             py::arg("parents"))
        .def("set_parents", &forest_set_parents, py::arg("nodes"), py::arg("parents"))
        .def("expand", &forest_expand, py::arg("node_ids"), py::arg("depth"))
        .def("chunk_ids", &forest_chunk_ids, py::arg("node_ids"))
        .def("__len__", &AbstractForest::size)
        .def("parent", &AbstractForest::parent, py::arg("node"))
        .def("level", &AbstractForest::level, py::arg("node"))
        .def("chunk_range", &AbstractForest::chunk_range, py::arg("node"))
        .def("children", [](const AbstractForest& f, std::uint32_t v) { return to_numpy(f.children(v)); },
             py::arg("node"))
        .def("arrays", &forest_arrays)
        .def("memory_bytes", &AbstractForest::memory_bytes)
        .def("to_bytes", &to_bytes<AbstractForest>)
        .def("_restore", &restore<AbstractForest>, py::arg("data"));
}

// ====================================================================== scoring

/// The matrix a scoring call reads in place (float32, C-contiguous, two-dimensional).
FloatMatrix scoring_matrix(const py::handle& matrix) {
    return float_matrix(matrix, " (np.ascontiguousarray(m, dtype=np.float32)); it is read in place, never copied");
}

/// The query of a scoring call: a one-dimensional float array as wide as the matrix.
Contiguous<float> scoring_query(const py::handle& query, const FloatMatrix& mat) {
    auto q = Contiguous<float>::ensure(query);
    if (!q) throw py::type_error("query must be a float array");
    if (q.ndim() != 1 || static_cast<std::size_t>(q.size()) != mat.dim)
        throw py::value_error("query must be one-dimensional with " + std::to_string(mat.dim) +
                              " values (the matrix width), got shape of size " + std::to_string(q.size()));
    return q;
}

auto top_k_cosine(const py::handle& query, const py::handle& matrix, const py::handle& candidate_ids, long long k) {
    const FloatMatrix mat = scoring_matrix(matrix);
    const std::size_t top = non_negative(k, "k");
    auto q = scoring_query(query, mat);
    auto cand = int_array(candidate_ids, "candidate_ids");
    const float* qp = q.data();
    const std::int64_t* cp = cand.data();
    const auto m_cand = static_cast<std::size_t>(cand.size());
    std::vector<std::pair<std::uint32_t, float>> ranked;
    {
        py::gil_scoped_release nogil;
        ranked = bridge::top_k_cosine(qp, mat.data, mat.rows, mat.dim, cp, m_cand, top);
    }
    return ranked_to_numpy(ranked);
}

py::list top_k_cosine_groups(const py::handle& query, const py::handle& matrix, const py::handle& offsets,
                             const py::handle& candidate_ids, long long k) {
    const FloatMatrix mat = scoring_matrix(matrix);
    const std::size_t top = non_negative(k, "k");
    auto q = scoring_query(query, mat);
    auto off = offsets_array(offsets, "offsets", "groups");
    auto cand = int_array(candidate_ids, "candidate_ids");
    const auto n_groups = static_cast<std::size_t>(off.size() - 1);
    const std::int64_t* op = off.data();
    const float* qp = q.data();
    const std::int64_t* cp = cand.data();
    const auto m_cand = static_cast<std::size_t>(cand.size());
    std::vector<bridge::Ranked> ranked;
    {
        py::gil_scoped_release nogil;
        ranked = bridge::top_k_cosine_groups(qp, mat.data, mat.rows, mat.dim, op, n_groups, cp, m_cand, top);
    }
    py::list out;
    for (const auto& r : ranked) out.append(ranked_to_numpy(r));
    return out;
}

void bind_scoring(py::module_& m) {
    m.def("top_k_cosine", &top_k_cosine, py::arg("query"), py::arg("matrix"), py::arg("candidate_ids"),
          py::arg("k"),
          "Top-k cosine of `query` against `matrix[candidate_ids]` (rows L2-normalised). Returns (ids, scores).");
    m.def("top_k_cosine_groups", &top_k_cosine_groups, py::arg("query"), py::arg("matrix"), py::arg("offsets"),
          py::arg("candidate_ids"), py::arg("k"),
          "Top-k cosine per group of candidate rows (group g: candidate_ids[offsets[g]:offsets[g + 1]]), each "
          "row scored once. Returns a list of (ids, scores), one per group.");
}

// ====================================================================== fusion (UMG-RAG)

/// Checks the top-k argument of the fusion kernels (0 means "all").
std::size_t fusion_top_k(long long k) { return non_negative(k, "k", " (0 returns all units)"); }

py::tuple fuse_weighted(const py::handle& list_offsets, const py::handle& unit_ids, const py::handle& scores,
                        const py::handle& weights, long long k) {
    const std::size_t top = fusion_top_k(k);
    auto off = offsets_array(list_offsets, "list_offsets", "lists");
    auto ids = int_array(unit_ids, "unit_ids");
    auto sc = float_array(scores, "scores");
    auto w = float_array(weights, "weights");
    if (sc.size() != ids.size())
        throw py::value_error("scores must have one entry per unit id (" + std::to_string(ids.size()) + "), got " +
                              std::to_string(sc.size()));
    const auto n_lists = static_cast<std::size_t>(off.size() - 1);
    if (static_cast<std::size_t>(w.size()) != n_lists)
        throw py::value_error("weights must have one entry per list (len(list_offsets) - 1 = " +
                              std::to_string(n_lists) + "), got " + std::to_string(w.size()));
    const std::int64_t* op = off.data();
    const std::int64_t* ip = ids.data();
    const float* sp = sc.data();
    const float* wp = w.data();
    const auto n_items = static_cast<std::size_t>(ids.size());
    std::vector<bridge::FusedUnit> fused;
    {
        py::gil_scoped_release nogil;
        fused = bridge::fuse_weighted(op, n_lists, ip, sp, n_items, wp, top);
    }
    return ranked_to_numpy(fused);
}

py::tuple rrf_fuse(const py::handle& list_offsets, const py::handle& unit_ids, double k_rrf, long long k) {
    const std::size_t top = fusion_top_k(k);
    auto off = offsets_array(list_offsets, "list_offsets", "lists");
    auto ids = int_array(unit_ids, "unit_ids");
    const auto n_lists = static_cast<std::size_t>(off.size() - 1);
    const std::int64_t* op = off.data();
    const std::int64_t* ip = ids.data();
    const auto n_items = static_cast<std::size_t>(ids.size());
    std::vector<bridge::FusedUnit> fused;
    {
        py::gil_scoped_release nogil;
        fused = bridge::rrf(op, n_lists, ip, n_items, k_rrf, top);
    }
    return ranked_to_numpy(fused);
}

void bind_fusion(py::module_& m) {
    m.def("fuse_weighted", &fuse_weighted, py::arg("list_offsets"), py::arg("unit_ids"), py::arg("scores"),
          py::arg("weights"), py::arg("k") = 0,
          "Weighted score fusion of CSR-packed ranked lists. Returns (unit_ids, fused) of the top k (0: all).");
    m.def("rrf_fuse", &rrf_fuse, py::arg("list_offsets"), py::arg("unit_ids"), py::arg("k_rrf") = 60.0,
          py::arg("k") = 0,
          "Reciprocal rank fusion of CSR-packed ranked lists. Returns (unit_ids, scores) of the top k (0: all).");
}

// ====================================================================== interval merging

bridge::MergeMode merge_mode(const std::string& mode) {
    if (mode == "union") return bridge::MergeMode::kUnion;
    if (mode == "keep_best") return bridge::MergeMode::kKeepBest;
    throw py::value_error("mode must be 'union' or 'keep_best', got '" + mode + "'");
}

py::dict merge_intervals(const py::handle& groups, const py::handle& starts, const py::handle& ends,
                         const py::handle& scores, const std::string& mode) {
    const bridge::MergeMode mm = merge_mode(mode);
    auto g = int_array(groups, "groups");
    auto s = int_array(starts, "starts");
    auto e = int_array(ends, "ends");
    auto sc = float_array(scores, "scores");
    const auto n = static_cast<std::size_t>(g.size());
    if (static_cast<std::size_t>(s.size()) != n || static_cast<std::size_t>(e.size()) != n ||
        static_cast<std::size_t>(sc.size()) != n)
        throw py::value_error("groups, starts, ends and scores must have the same length, got " + std::to_string(n) +
                              ", " + std::to_string(s.size()) + ", " + std::to_string(e.size()) + " and " +
                              std::to_string(sc.size()));
    const std::int64_t* gp = g.data();
    const std::int64_t* sp = s.data();
    const std::int64_t* ep = e.data();
    const float* scp = sc.data();
    std::vector<std::int64_t> o_group, o_start, o_end, o_best, o_members;
    std::vector<float> o_score;
    {
        py::gil_scoped_release nogil;
        const auto merged = bridge::merge_intervals(gp, sp, ep, scp, n, mm);
        for (auto* col : {&o_group, &o_start, &o_end, &o_best, &o_members}) col->resize(merged.size());
        o_score.resize(merged.size());
        for (std::size_t i = 0; i < merged.size(); ++i) {
            o_group[i] = merged[i].group;
            o_start[i] = merged[i].start;
            o_end[i] = merged[i].end;
            o_score[i] = merged[i].score;
            o_best[i] = merged[i].best_index;
            o_members[i] = merged[i].members;
        }
    }
    return py::dict("group"_a = to_numpy(std::move(o_group)),
                    "start"_a = to_numpy(std::move(o_start)),
                    "end"_a = to_numpy(std::move(o_end)),
                    "score"_a = to_numpy(std::move(o_score)),
                    "best_index"_a = to_numpy(std::move(o_best)),
                    "members"_a = to_numpy(std::move(o_members)));
}

void bind_intervals(py::module_& m) {
    m.def("merge_intervals", &merge_intervals, py::arg("groups"), py::arg("starts"), py::arg("ends"),
          py::arg("scores"), py::arg("mode") = "union",
          "Merges scored half-open intervals within groups ('union' or 'keep_best'). Returns a dict of arrays.");
}

// ====================================================================== Graph (BubbleRAG)

std::unique_ptr<Graph> make_graph(long long num_nodes, const py::handle& heads, const py::handle& tails) {
    auto h = int_array(heads, "heads");
    auto t = int_array(tails, "tails");
    if (h.size() != t.size())
        throw py::value_error("heads and tails must have the same length, got " + std::to_string(h.size()) +
                              " and " + std::to_string(t.size()));
    const std::int64_t* hp = h.data();
    const std::int64_t* tp = t.data();
    const auto n = static_cast<std::size_t>(h.size());
    py::gil_scoped_release nogil;
    return std::make_unique<Graph>(num_nodes, hp, tp, n);
}

std::unique_ptr<Graph> graph_from_bytes(const py::bytes& data) {
    return from_bytes(data,
                      [](const char* p, std::size_t n) { return std::make_unique<Graph>(Graph::from_bytes(p, n)); });
}

py::array_t<std::int64_t> graph_degree(const Graph& g) {
    std::vector<std::int64_t> deg(g.num_nodes());
    for (std::size_t v = 0; v < deg.size(); ++v) deg[v] = g.degree(v);
    return to_numpy(std::move(deg));
}

auto graph_neighbors(const Graph& g, long long node) {
    std::vector<std::int64_t> nodes, edges;
    g.neighbors(node, nodes, edges);
    return py::make_tuple(to_numpy(std::move(nodes)), to_numpy(std::move(edges)));
}

py::array_t<std::int64_t> graph_localize(const Graph& g, const py::handle& seeds, long long hops, long long max_nodes) {
    auto s = int_array(seeds, "seeds");
    const std::int64_t* sp = s.data();
    const auto n = static_cast<std::size_t>(s.size());
    std::vector<std::int64_t> out;
    {
        py::gil_scoped_release nogil;
        out = g.localize(sp, n, hops, max_nodes);
    }
    return to_numpy(std::move(out));
}

/// The CEG columns of a bubble expansion as a dict of numpy arrays.
py::dict bubble_to_numpy(bridge::BubbleResult&& r) {
    return py::dict("node_offsets"_a = to_numpy(std::move(r.node_offsets)),
                    "nodes"_a = to_numpy(std::move(r.nodes)),
                    "edge_offsets"_a = to_numpy(std::move(r.edge_offsets)),
                    "edges"_a = to_numpy(std::move(r.edges)),
                    "score"_a = to_numpy(std::move(r.score)),
                    "mean_cost"_a = to_numpy(std::move(r.mean_cost)),
                    "path_cost"_a = to_numpy(std::move(r.path_cost)),
                    "covered"_a = to_numpy(std::move(r.covered)),
                    "kind"_a = to_numpy(std::move(r.kind)),
                    "meeting_node"_a = to_numpy(std::move(r.meeting_node)));
}

py::dict graph_bubble(const Graph& g, const py::handle& group_offsets, const py::handle& seed_nodes,
                      const py::handle& seed_edges, const py::handle& seed_costs, const py::handle& node_cost,
                      const py::handle& edge_cost, const py::handle& allowed, const py::handle& group_weights,
                      double alpha, long long max_cegs, double max_path_cost, double within_group_penalty) {
    auto go = int_array(group_offsets, "group_offsets");
    auto sn = int_array(seed_nodes, "seed_nodes");
    auto se = int_array(seed_edges, "seed_edges");
    auto sc = float_array(seed_costs, "seed_costs");
    auto nc = float_array(node_cost, "node_cost");
    auto ec = float_array(edge_cost, "edge_cost");
    auto al = mask_array(allowed, "allowed");
    auto gw = float_array(group_weights, "group_weights");
    bridge::BubbleInput in;
    view(in.group_offsets, in.group_offsets_len, go);
    view(in.seed_nodes, in.num_seeds, sn);
    view(in.seed_edges, in.seed_edges_len, se);
    view(in.seed_costs, in.seed_costs_len, sc);
    view(in.node_cost, in.node_cost_len, nc);
    view(in.edge_cost, in.edge_cost_len, ec);
    view(in.allowed, in.allowed_len, al);
    view(in.group_weights, in.group_weights_len, gw);
    in.alpha = alpha;
    in.max_cegs = max_cegs;
    in.max_path_cost = max_path_cost;
    in.within_group_penalty = within_group_penalty;
    bridge::BubbleResult r;
    {
        py::gil_scoped_release nogil;
        r = g.bubble(in);
    }
    return bubble_to_numpy(std::move(r));
}

void bind_graph(py::module_& m) {
    py::class_<Graph>(m, "Graph")
        .def(py::init(&make_graph), py::arg("num_nodes"), py::arg("heads"), py::arg("tails"))
        .def_property_readonly("num_nodes", &Graph::num_nodes)
        .def_property_readonly("num_edges", &Graph::num_edges)
        .def("heads", [](const Graph& g) { return ids_to_numpy(g.heads()); })
        .def("tails", [](const Graph& g) { return ids_to_numpy(g.tails()); })
        .def("degree", &graph_degree)
        .def("neighbors", &graph_neighbors, py::arg("node"))
        .def("localize", &graph_localize, py::arg("seeds"), py::arg("hops"), py::arg("max_nodes") = 0)
        .def("bubble", &graph_bubble, py::arg("group_offsets"), py::arg("seed_nodes"), py::arg("seed_edges"),
             py::arg("seed_costs"), py::arg("node_cost"), py::arg("edge_cost"), py::arg("allowed"),
             py::arg("group_weights"), py::arg("alpha"), py::arg("max_cegs"), py::arg("max_path_cost"),
             py::arg("within_group_penalty"),
             "Bubble expansion from seed groups into candidate evidence graphs (see graph.hpp). Returns a dict.")
        .def("memory_bytes", &Graph::memory_bytes)
        .def("to_bytes", &to_bytes<Graph>)
        .def_static("from_bytes", &graph_from_bytes, py::arg("data"));
}

}  // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "C++ core of bridge-rag: cuckoo filter, abstract forest, candidate scoring, rank fusion, interval merging, knowledge graph.";
    bind_errors(m);
    bind_hashing(m);
    bind_cuckoo(m);
    bind_forest(m);
    bind_scoring(m);
    bind_fusion(m);
    bind_intervals(m);
    bind_graph(m);
}
