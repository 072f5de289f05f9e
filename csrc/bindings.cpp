// The one pybind11 file: exposes the header-only structures as core._native.
// Converts arguments, releases the GIL around every loop, and hands results to numpy
// without copying. No retrieval policy lives here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bridge/clusters.hpp"
#include "bridge/common.hpp"
#include "bridge/cuckoo_filter.hpp"
#include "bridge/forest.hpp"
#include "bridge/fusion.hpp"
#include "bridge/graph.hpp"
#include "bridge/intervals.hpp"
#include "bridge/scoring.hpp"

namespace py = pybind11;
using bridge::AbstractForest;
using bridge::CuckooFilter;

namespace {

/// Moves a vector into a 1-D numpy array that owns it through a capsule (no copy).
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v) {
    auto* heap = new std::vector<T>(std::move(v));
    py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>({static_cast<py::ssize_t>(heap->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                          heap->data(), owner);
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

/// An integer array-like as int64, rejecting floats, bools and other non-integer dtypes.
py::array_t<std::int64_t> int_array(const py::handle& obj, const char* what) {
    py::module_ np = py::module_::import("numpy");
    py::array arr = np.attr("asarray")(obj);
    const char kind = arr.dtype().kind();
    if (arr.size() == 0) return py::array_t<std::int64_t>(0);
    if (kind != 'i' && kind != 'u')
        throw py::type_error(std::string(what) + " must be integers, got dtype " +
                             py::str(arr.dtype()).cast<std::string>());
    if (arr.ndim() != 1) throw py::value_error(std::string(what) + " must be one-dimensional");
    return py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
}

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

}  // namespace

// ---------------------------------------------------------------------- fusion helpers
namespace {

/// A real-valued array-like as float32 (copied only when the dtype or layout differs),
/// rejecting bools, complex numbers, strings and objects.
py::array_t<float> float_array(const py::handle& obj, const char* what) {
    py::module_ np = py::module_::import("numpy");
    py::array arr = np.attr("asarray")(obj);
    if (arr.size() == 0) return py::array_t<float>(0);
    const char kind = arr.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u')
        throw py::type_error(std::string(what) + " must be real numbers, got dtype " +
                             py::str(arr.dtype()).cast<std::string>());
    if (arr.ndim() != 1) throw py::value_error(std::string(what) + " must be one-dimensional");
    return py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(arr);
}

/// Checks k >= 0 and converts it (0 means "all").
std::size_t top_k_arg(long long k) {
    if (k < 0) throw py::value_error("k must be >= 0 (0 returns all units), got " + std::to_string(k));
    return static_cast<std::size_t>(k);
}

/// Validated CSR list offsets: at least one entry ([0] for no lists).
py::array_t<std::int64_t> list_offsets_array(const py::handle& obj) {
    auto off = int_array(obj, "list_offsets");
    if (off.size() == 0)
        throw py::value_error("list_offsets must have len(lists) + 1 entries, starting at 0 ([0] for no lists)");
    return off;
}

/// (unit ids, fused scores) as two numpy arrays.
py::tuple fused_to_numpy(const std::vector<bridge::FusedUnit>& fused) {
    std::vector<std::int64_t> ids(fused.size());
    std::vector<float> scores(fused.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
        ids[i] = fused[i].first;
        scores[i] = fused[i].second;
    }
    return py::make_tuple(to_numpy(std::move(ids)), to_numpy(std::move(scores)));
}

}  // namespace

// ---------------------------------------------------------------------- graph helpers (BubbleRAG)
namespace {

/// A node mask as uint8 (nonzero = set) from a bool or integer array-like of any values.
py::array_t<std::uint8_t> mask_array(const py::handle& obj, const char* what) {
    py::module_ np = py::module_::import("numpy");
    py::array arr = np.attr("asarray")(obj);
    if (arr.size() == 0) return py::array_t<std::uint8_t>(0);
    const char kind = arr.dtype().kind();
    if (kind != 'b' && kind != 'i' && kind != 'u')
        throw py::type_error(std::string(what) + " must be a bool or integer array, got dtype " +
                             py::str(arr.dtype()).cast<std::string>());
    if (arr.ndim() != 1) throw py::value_error(std::string(what) + " must be one-dimensional");
    if (kind != 'b' && arr.itemsize() != 1) arr = np.attr("not_equal")(arr, 0);
    return py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>::ensure(arr);
}

/// A vector of uint32 ids as an int64 numpy array.
py::array_t<std::int64_t> ids_to_numpy(const std::vector<std::uint32_t>& ids) {
    std::vector<std::int64_t> out(ids.begin(), ids.end());
    return to_numpy(std::move(out));
}

/// The CEG columns of a bubble expansion as a dict of numpy arrays.
py::dict bubble_to_numpy(bridge::BubbleResult&& r) {
    py::dict d;
    d["node_offsets"] = to_numpy(std::move(r.node_offsets));
    d["nodes"] = to_numpy(std::move(r.nodes));
    d["edge_offsets"] = to_numpy(std::move(r.edge_offsets));
    d["edges"] = to_numpy(std::move(r.edges));
    d["score"] = to_numpy(std::move(r.score));
    d["mean_cost"] = to_numpy(std::move(r.mean_cost));
    d["path_cost"] = to_numpy(std::move(r.path_cost));
    d["covered"] = to_numpy(std::move(r.covered));
    d["kind"] = to_numpy(std::move(r.kind));
    d["meeting_node"] = to_numpy(std::move(r.meeting_node));
    return d;
}

}  // namespace
// ---------------------------------------------------------------------- end graph helpers

PYBIND11_MODULE(_native, m) {
    m.doc() = "C++ core of bridge-rag: cuckoo filter, abstract forest, candidate scoring, rank fusion, interval merging, knowledge graph.";
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const bridge::FormatError& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const std::length_error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        }
    });

    m.def(
        "hash_bytes",
        [](const py::bytes& data, std::uint64_t seed) {
            std::string_view v = data;
            return bridge::hash_bytes(v.data(), v.size(), seed);
        },
        py::arg("data"), py::arg("seed") = 0, "Seeded 64-bit hash of bytes (the checksum function of the formats).");
    m.def("hash_string", [](std::string_view s, std::uint64_t seed) { return bridge::hash_string(s, seed); },
          py::arg("text"), py::arg("seed") = 0, "Seeded 64-bit hash used by the filter (deterministic across runs).");

    // ------------------------------------------------------------------ CuckooFilter
    py::class_<CuckooFilter>(m, "CuckooFilter")
        .def(py::init([](unsigned fingerprint_bits, std::size_t capacity, unsigned max_kicks,
                         std::uint64_t reorder_every, std::uint64_t seed) {
                 bridge::CuckooOptions o;
                 o.fingerprint_bits = fingerprint_bits;
                 o.capacity = capacity;
                 o.max_kicks = max_kicks;
                 o.reorder_every = reorder_every;
                 o.seed = seed;
                 return std::make_unique<CuckooFilter>(o);
             }),
             py::kw_only(), py::arg("fingerprint_bits") = 12, py::arg("capacity") = 1024, py::arg("max_kicks") = 500,
             py::arg("reorder_every") = 1000000, py::arg("seed") = bridge::CuckooOptions().seed)
        .def(
            "insert",
            [](CuckooFilter& f, std::string_view key, const py::handle& ids) {
                auto v = id_vector(ids, "ids");
                py::gil_scoped_release nogil;
                return f.insert(key, v.data(), v.size());
            },
            py::arg("entity"), py::arg("ids"))
        .def(
            "insert_many",
            [](CuckooFilter& f, const py::handle& keys, const py::handle& offsets, const py::handle& ids) {
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
                for (std::size_t i = 0; i < views.size(); ++i)
                    added += f.insert(views[i], v.data() + o(static_cast<py::ssize_t>(i)),
                                      static_cast<std::size_t>(o(static_cast<py::ssize_t>(i) + 1) -
                                                               o(static_cast<py::ssize_t>(i))));
                return added;
            },
            py::arg("entities"), py::arg("offsets"), py::arg("ids"))
        .def(
            "remove",
            [](CuckooFilter& f, std::string_view key) {
                py::gil_scoped_release nogil;
                return f.remove(key);
            },
            py::arg("entity"))
        .def(
            "remove_ids",
            [](CuckooFilter& f, std::string_view key, const py::handle& ids) {
                auto v = id_vector(ids, "ids");
                py::gil_scoped_release nogil;
                return f.remove_ids(key, v.data(), v.size());
            },
            py::arg("entity"), py::arg("ids"))
        .def(
            "lookup",
            [](CuckooFilter& f, std::string_view key, bool touch) -> py::object {
                std::vector<std::uint32_t> out;
                if (!f.lookup(key, out, touch)) return py::none();
                py::list l(out.size());
                for (std::size_t i = 0; i < out.size(); ++i) l[i] = py::int_(out[i]);
                return std::move(l);
            },
            py::arg("entity"), py::arg("touch") = true)
        .def(
            "lookup_many",
            [](CuckooFilter& f, const py::handle& keys, bool touch) {
                py::object keep;
                auto views = string_views(keys, keep);
                std::vector<std::int64_t> offsets;
                std::vector<std::uint32_t> ids;
                {
                    py::gil_scoped_release nogil;
                    f.lookup_many(views.data(), views.size(), offsets, ids, touch);
                }
                return py::make_tuple(to_numpy(std::move(offsets)), to_numpy(std::move(ids)));
            },
            py::arg("entities"), py::arg("touch") = true)
        .def("contains", &CuckooFilter::contains, py::arg("entity"))
        .def("__contains__",
             [](const CuckooFilter& f, const py::handle& key) {
                 return py::isinstance<py::str>(key) && f.contains(key.cast<std::string>());
             })
        .def("fingerprint_match", &CuckooFilter::fingerprint_match, py::arg("entity"))
        .def("temperature", &CuckooFilter::temperature, py::arg("entity"))
        .def("reorder", &CuckooFilter::reorder, py::call_guard<py::gil_scoped_release>())
        .def("__len__", &CuckooFilter::size)
        .def("load_factor", &CuckooFilter::load_factor)
        .def("memory_bytes", [](const CuckooFilter& f) { return f.memory().total(); })
        .def("memory_breakdown",
             [](const CuckooFilter& f) {
                 auto mem = f.memory();
                 py::dict d;
                 d["fingerprint_table"] = mem.fingerprint_table;
                 d["slot_refs"] = mem.slot_refs;
                 d["entry_records"] = mem.entry_records;
                 d["id_lists"] = mem.id_lists;
                 d["total"] = mem.total();
                 return d;
             })
        .def("stats",
             [](const CuckooFilter& f) {
                 auto st = f.stats();
                 py::dict d;
                 d["lookups"] = st.lookups;
                 d["hits"] = st.hits;
                 d["fingerprint_false_positives"] = st.fingerprint_false_positives;
                 d["reorders"] = f.reorders();
                 return d;
             })
        .def("entries",
             [](const CuckooFilter& f) {
                 py::list out;
                 f.for_each_entry([&](std::uint64_t h, std::uint64_t t, const std::uint32_t* p, std::uint32_t n) {
                     out.append(py::make_tuple(h, t, std::vector<std::uint32_t>(p, p + n)));
                 });
                 return out;
             })
        .def_property_readonly("num_buckets", &CuckooFilter::num_buckets)
        .def_property_readonly("fingerprint_bits", &CuckooFilter::fingerprint_bits)
        .def_property_readonly("max_kicks", &CuckooFilter::max_kicks)
        .def_property_readonly("reorder_every", &CuckooFilter::reorder_every)
        .def_property_readonly("seed", &CuckooFilter::seed)
        .def("to_bytes",
             [](const CuckooFilter& f) {
                 std::string s;
                 {
                     py::gil_scoped_release nogil;
                     s = f.to_bytes();
                 }
                 return py::bytes(s);
             })
        .def(
            "_restore",
            [](CuckooFilter& f, const py::bytes& data) {
                std::string_view v = data;
                py::gil_scoped_release nogil;
                f.load_bytes(v.data(), v.size());
            },
            py::arg("data"));

    // ------------------------------------------------------------------ AbstractForest
    py::class_<AbstractForest>(m, "AbstractForest")
        .def(py::init<>())
        .def(
            "add_nodes",
            [](AbstractForest& f, const py::handle& levels, const py::handle& begins, const py::handle& ends,
               const py::handle& parents) {
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
                    if (lr(static_cast<py::ssize_t>(i)) < 0 || lr(static_cast<py::ssize_t>(i)) > INT32_MAX)
                        throw py::value_error("levels must be in [0, 2^31)");
                    l32[i] = static_cast<std::int32_t>(lr(static_cast<py::ssize_t>(i)));
                }
                const std::int64_t* pp = p.data();
                py::gil_scoped_release nogil;
                return f.add_nodes(l32.data(), b.data(), e.data(), pp, n);
            },
            py::arg("levels"), py::arg("chunk_begin"), py::arg("chunk_end"), py::arg("parents"))
        .def(
            "set_parents",
            [](AbstractForest& f, const py::handle& nodes, const py::handle& parents) {
                auto nv = id_vector(nodes, "nodes");
                auto p = int_array(parents, "parents");
                if (static_cast<std::size_t>(p.size()) != nv.size())
                    throw py::value_error("nodes and parents must have the same length");
                const std::int64_t* pp = p.data();
                py::gil_scoped_release nogil;
                f.set_parents(nv.data(), pp, nv.size());
            },
            py::arg("nodes"), py::arg("parents"))
        .def(
            "expand",
            [](const AbstractForest& f, const py::handle& seeds, int depth) {
                auto s = id_vector(seeds, "node_ids");
                std::vector<std::uint32_t> nodes;
                std::vector<std::int32_t> dist;
                {
                    py::gil_scoped_release nogil;
                    f.expand(s.data(), s.size(), depth, nodes, dist);
                }
                return py::make_tuple(to_numpy(std::move(nodes)), to_numpy(std::move(dist)));
            },
            py::arg("node_ids"), py::arg("depth"))
        .def(
            "chunk_ids",
            [](const AbstractForest& f, const py::handle& nodes) {
                auto s = id_vector(nodes, "node_ids");
                std::vector<std::uint32_t> out;
                {
                    py::gil_scoped_release nogil;
                    f.chunk_ids(s.data(), s.size(), out);
                }
                return to_numpy(std::move(out));
            },
            py::arg("node_ids"))
        .def("__len__", &AbstractForest::size)
        .def("parent", &AbstractForest::parent, py::arg("node"))
        .def("level", &AbstractForest::level, py::arg("node"))
        .def("chunk_range", &AbstractForest::chunk_range, py::arg("node"))
        .def("children", [](const AbstractForest& f, std::uint32_t v) { return to_numpy(f.children(v)); },
             py::arg("node"))
        .def("arrays",
             [](const AbstractForest& f) {
                 std::vector<std::int32_t> parent, level;
                 std::vector<std::uint32_t> begin, end;
                 f.arrays(parent, level, begin, end);
                 py::dict d;
                 d["parent"] = to_numpy(std::move(parent));
                 d["level"] = to_numpy(std::move(level));
                 d["chunk_begin"] = to_numpy(std::move(begin));
                 d["chunk_end"] = to_numpy(std::move(end));
                 return d;
             })
        .def("memory_bytes", &AbstractForest::memory_bytes)
        .def("to_bytes",
             [](const AbstractForest& f) {
                 std::string s;
                 {
                     py::gil_scoped_release nogil;
                     s = f.to_bytes();
                 }
                 return py::bytes(s);
             })
        .def(
            "_restore",
            [](AbstractForest& f, const py::bytes& data) {
                std::string_view v = data;
                py::gil_scoped_release nogil;
                f.load_bytes(v.data(), v.size());
            },
            py::arg("data"));

    // ------------------------------------------------------------------ scoring
    m.def(
        "top_k_cosine",
        [](const py::handle& query, const py::handle& matrix, const py::handle& candidate_ids, long long k) {
            if (!py::isinstance<py::array>(matrix)) throw py::type_error("matrix must be a numpy array");
            py::array mat = py::reinterpret_borrow<py::array>(matrix);
            if (mat.ndim() != 2) throw py::value_error("matrix must be two-dimensional (rows x dim)");
            if (!mat.dtype().is(py::dtype::of<float>()) || !(mat.flags() & py::array::c_style))
                throw py::type_error(
                    "matrix must be a C-contiguous float32 array (np.ascontiguousarray(m, dtype=np.float32)); "
                    "it is read in place, never copied");
            if (k < 0) throw py::value_error("k must be >= 0, got " + std::to_string(k));
            const auto n_rows = static_cast<std::size_t>(mat.shape(0));
            const auto dim = static_cast<std::size_t>(mat.shape(1));
            auto q = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(query);
            if (!q) throw py::type_error("query must be a float array");
            if (q.ndim() != 1 || static_cast<std::size_t>(q.size()) != dim)
                throw py::value_error("query must be one-dimensional with " + std::to_string(dim) +
                                      " values (the matrix width), got shape of size " + std::to_string(q.size()));
            auto cand = int_array(candidate_ids, "candidate_ids");
            const float* mp = static_cast<const float*>(mat.data());
            const float* qp = q.data();
            const std::int64_t* cp = cand.data();
            const auto m_cand = static_cast<std::size_t>(cand.size());
            std::vector<std::pair<std::uint32_t, float>> top;
            {
                py::gil_scoped_release nogil;
                top = bridge::top_k_cosine(qp, mp, n_rows, dim, cp, m_cand, static_cast<std::size_t>(k));
            }
            std::vector<std::int64_t> ids(top.size());
            std::vector<float> scores(top.size());
            for (std::size_t i = 0; i < top.size(); ++i) {
                ids[i] = top[i].first;
                scores[i] = top[i].second;
            }
            return py::make_tuple(to_numpy(std::move(ids)), to_numpy(std::move(scores)));
        },
        py::arg("query"), py::arg("matrix"), py::arg("candidate_ids"), py::arg("k"),
        "Top-k cosine of `query` against `matrix[candidate_ids]` (rows L2-normalised). Returns (ids, scores).");

    py::class_<bridge::ClusterIndex>(m, "ClusterIndex")
        .def(py::init([](const py::handle& centroids, const py::handle& offsets, const py::handle& rows) {
                 auto c = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(centroids);
                 if (!c || c.ndim() != 2) throw py::value_error("centroids must be a two-dimensional float array");
                 auto off = int_array(offsets, "offsets");
                 auto r = int_array(rows, "rows");
                 const auto lists = static_cast<std::size_t>(c.shape(0));
                 const auto dim = static_cast<std::size_t>(c.shape(1));
                 const float* cp = c.data();
                 const std::int64_t* op = off.data();
                 const std::int64_t* rp = r.data();
                 const auto n_off = static_cast<std::size_t>(off.size());
                 const auto n_rows = static_cast<std::size_t>(r.size());
                 if (n_off == 0) throw py::value_error("offsets must not be empty");
                 py::gil_scoped_release nogil;
                 return std::make_unique<bridge::ClusterIndex>(cp, lists, dim, op, n_off, rp, n_rows);
             }),
             py::arg("centroids"), py::arg("offsets"), py::arg("rows"))
        .def_property_readonly("dim", &bridge::ClusterIndex::dim)
        .def_property_readonly("num_lists", &bridge::ClusterIndex::num_lists)
        .def("__len__", &bridge::ClusterIndex::size)
        .def("memory_bytes", &bridge::ClusterIndex::memory_bytes)
        .def(
            "search",
            [](const bridge::ClusterIndex& index, const py::handle& queries, const py::handle& matrix, long long k,
               long long probe_rows) {
                if (!py::isinstance<py::array>(matrix)) throw py::type_error("matrix must be a numpy array");
                py::array mat = py::reinterpret_borrow<py::array>(matrix);
                if (mat.ndim() != 2) throw py::value_error("matrix must be two-dimensional (rows x dim)");
                if (!mat.dtype().is(py::dtype::of<float>()) || !(mat.flags() & py::array::c_style))
                    throw py::type_error("matrix must be a C-contiguous float32 array; it is read in place");
                if (k < 0) throw py::value_error("k must be >= 0, got " + std::to_string(k));
                if (probe_rows < 0) throw py::value_error("probe_rows must be >= 0, got " + std::to_string(probe_rows));
                auto q = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(queries);
                if (!q || q.ndim() != 2 || static_cast<std::size_t>(q.shape(1)) != index.dim())
                    throw py::value_error("queries must be a two-dimensional float array with " +
                                          std::to_string(index.dim()) + " columns");
                const auto nq = static_cast<std::size_t>(q.shape(0));
                const auto kk = static_cast<std::size_t>(k);
                py::array_t<std::int64_t> ids({static_cast<py::ssize_t>(nq), static_cast<py::ssize_t>(kk)});
                py::array_t<float> scores({static_cast<py::ssize_t>(nq), static_cast<py::ssize_t>(kk)});
                const float* qp = q.data();
                const float* mp = static_cast<const float*>(mat.data());
                const auto n_rows = static_cast<std::size_t>(mat.shape(0));
                const auto dim = static_cast<std::size_t>(mat.shape(1));
                std::int64_t* ip = ids.mutable_data();
                float* sp = scores.mutable_data();
                {
                    py::gil_scoped_release nogil;
                    index.search(qp, nq, mp, n_rows, dim, kk, static_cast<std::size_t>(probe_rows), ip, sp);
                }
                return py::make_tuple(ids, scores);
            },
            py::arg("queries"), py::arg("matrix"), py::arg("k"), py::arg("probe_rows"),
            "Top-k rows of `matrix` per query row (cosine), scanning the best lists until `probe_rows` "
            "rows were scored. Returns (ids, scores), each queries x k; id -1 pads.");

    // ------------------------------------------------------------------ fusion (UMG-RAG)
    m.def(
        "fuse_weighted",
        [](const py::handle& list_offsets, const py::handle& unit_ids, const py::handle& scores,
           const py::handle& weights, long long k) {
            const std::size_t top = top_k_arg(k);
            auto off = list_offsets_array(list_offsets);
            auto ids = int_array(unit_ids, "unit_ids");
            auto sc = float_array(scores, "scores");
            auto w = float_array(weights, "weights");
            if (sc.size() != ids.size())
                throw py::value_error("scores must have one entry per unit id (" + std::to_string(ids.size()) +
                                      "), got " + std::to_string(sc.size()));
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
            return fused_to_numpy(fused);
        },
        py::arg("list_offsets"), py::arg("unit_ids"), py::arg("scores"), py::arg("weights"), py::arg("k") = 0,
        "Weighted score fusion of CSR-packed ranked lists. Returns (unit_ids, fused) of the top k (0: all).");
    m.def(
        "rrf_fuse",
        [](const py::handle& list_offsets, const py::handle& unit_ids, double k_rrf, long long k) {
            const std::size_t top = top_k_arg(k);
            auto off = list_offsets_array(list_offsets);
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
            return fused_to_numpy(fused);
        },
        py::arg("list_offsets"), py::arg("unit_ids"), py::arg("k_rrf") = 60.0, py::arg("k") = 0,
        "Reciprocal rank fusion of CSR-packed ranked lists. Returns (unit_ids, scores) of the top k (0: all).");
    m.def(
        "merge_intervals",
        [](const py::handle& groups, const py::handle& starts, const py::handle& ends, const py::handle& scores,
           const std::string& mode) {
            bridge::MergeMode mm;
            if (mode == "union") {
                mm = bridge::MergeMode::kUnion;
            } else if (mode == "keep_best") {
                mm = bridge::MergeMode::kKeepBest;
            } else {
                throw py::value_error("mode must be 'union' or 'keep_best', got '" + mode + "'");
            }
            auto g = int_array(groups, "groups");
            auto s = int_array(starts, "starts");
            auto e = int_array(ends, "ends");
            auto sc = float_array(scores, "scores");
            const auto n = static_cast<std::size_t>(g.size());
            if (static_cast<std::size_t>(s.size()) != n || static_cast<std::size_t>(e.size()) != n ||
                static_cast<std::size_t>(sc.size()) != n)
                throw py::value_error("groups, starts, ends and scores must have the same length, got " +
                                      std::to_string(n) + ", " + std::to_string(s.size()) + ", " +
                                      std::to_string(e.size()) + " and " + std::to_string(sc.size()));
            const std::int64_t* gp = g.data();
            const std::int64_t* sp = s.data();
            const std::int64_t* ep = e.data();
            const float* scp = sc.data();
            std::vector<std::int64_t> o_group, o_start, o_end, o_best, o_members;
            std::vector<float> o_score;
            {
                py::gil_scoped_release nogil;
                const auto merged = bridge::merge_intervals(gp, sp, ep, scp, n, mm);
                const std::size_t r = merged.size();
                o_group.resize(r);
                o_start.resize(r);
                o_end.resize(r);
                o_score.resize(r);
                o_best.resize(r);
                o_members.resize(r);
                for (std::size_t i = 0; i < r; ++i) {
                    o_group[i] = merged[i].group;
                    o_start[i] = merged[i].start;
                    o_end[i] = merged[i].end;
                    o_score[i] = merged[i].score;
                    o_best[i] = merged[i].best_index;
                    o_members[i] = merged[i].members;
                }
            }
            py::dict d;
            d["group"] = to_numpy(std::move(o_group));
            d["start"] = to_numpy(std::move(o_start));
            d["end"] = to_numpy(std::move(o_end));
            d["score"] = to_numpy(std::move(o_score));
            d["best_index"] = to_numpy(std::move(o_best));
            d["members"] = to_numpy(std::move(o_members));
            return d;
        },
        py::arg("groups"), py::arg("starts"), py::arg("ends"), py::arg("scores"), py::arg("mode") = "union",
        "Merges scored half-open intervals within groups ('union' or 'keep_best'). Returns a dict of arrays.");
    // ------------------------------------------------------------------ end fusion (UMG-RAG)

    // ------------------------------------------------------------------ Graph (BubbleRAG)
    py::class_<bridge::Graph>(m, "Graph")
        .def(py::init([](long long num_nodes, const py::handle& heads, const py::handle& tails) {
                 auto h = int_array(heads, "heads");
                 auto t = int_array(tails, "tails");
                 if (h.size() != t.size())
                     throw py::value_error("heads and tails must have the same length, got " +
                                           std::to_string(h.size()) + " and " + std::to_string(t.size()));
                 const std::int64_t* hp = h.data();
                 const std::int64_t* tp = t.data();
                 const auto n = static_cast<std::size_t>(h.size());
                 py::gil_scoped_release nogil;
                 return std::make_unique<bridge::Graph>(num_nodes, hp, tp, n);
             }),
             py::arg("num_nodes"), py::arg("heads"), py::arg("tails"))
        .def_property_readonly("num_nodes", &bridge::Graph::num_nodes)
        .def_property_readonly("num_edges", &bridge::Graph::num_edges)
        .def("heads", [](const bridge::Graph& g) { return ids_to_numpy(g.heads()); })
        .def("tails", [](const bridge::Graph& g) { return ids_to_numpy(g.tails()); })
        .def("degree",
             [](const bridge::Graph& g) {
                 std::vector<std::int64_t> deg(g.num_nodes());
                 for (std::size_t v = 0; v < deg.size(); ++v) deg[v] = g.degree(v);
                 return to_numpy(std::move(deg));
             })
        .def(
            "neighbors",
            [](const bridge::Graph& g, long long node) {
                std::vector<std::int64_t> nodes, edges;
                g.neighbors(node, nodes, edges);
                return py::make_tuple(to_numpy(std::move(nodes)), to_numpy(std::move(edges)));
            },
            py::arg("node"))
        .def(
            "localize",
            [](const bridge::Graph& g, const py::handle& seeds, long long hops, long long max_nodes) {
                auto s = int_array(seeds, "seeds");
                const std::int64_t* sp = s.data();
                const auto n = static_cast<std::size_t>(s.size());
                std::vector<std::int64_t> out;
                {
                    py::gil_scoped_release nogil;
                    out = g.localize(sp, n, hops, max_nodes);
                }
                return to_numpy(std::move(out));
            },
            py::arg("seeds"), py::arg("hops"), py::arg("max_nodes") = 0)
        .def(
            "bubble",
            [](const bridge::Graph& g, const py::handle& group_offsets, const py::handle& seed_nodes,
               const py::handle& seed_edges, const py::handle& seed_costs, const py::handle& node_cost,
               const py::handle& edge_cost, const py::handle& allowed, const py::handle& group_weights, double alpha,
               long long max_cegs, double max_path_cost, double within_group_penalty) {
                auto go = int_array(group_offsets, "group_offsets");
                auto sn = int_array(seed_nodes, "seed_nodes");
                auto se = int_array(seed_edges, "seed_edges");
                auto sc = float_array(seed_costs, "seed_costs");
                auto nc = float_array(node_cost, "node_cost");
                auto ec = float_array(edge_cost, "edge_cost");
                auto al = mask_array(allowed, "allowed");
                auto gw = float_array(group_weights, "group_weights");
                bridge::BubbleInput in;
                in.group_offsets = go.data();
                in.group_offsets_len = static_cast<std::size_t>(go.size());
                in.seed_nodes = sn.data();
                in.num_seeds = static_cast<std::size_t>(sn.size());
                in.seed_edges = se.data();
                in.seed_edges_len = static_cast<std::size_t>(se.size());
                in.seed_costs = sc.data();
                in.seed_costs_len = static_cast<std::size_t>(sc.size());
                in.node_cost = nc.data();
                in.node_cost_len = static_cast<std::size_t>(nc.size());
                in.edge_cost = ec.data();
                in.edge_cost_len = static_cast<std::size_t>(ec.size());
                in.allowed = al.data();
                in.allowed_len = static_cast<std::size_t>(al.size());
                in.group_weights = gw.data();
                in.group_weights_len = static_cast<std::size_t>(gw.size());
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
            },
            py::arg("group_offsets"), py::arg("seed_nodes"), py::arg("seed_edges"), py::arg("seed_costs"),
            py::arg("node_cost"), py::arg("edge_cost"), py::arg("allowed"), py::arg("group_weights"),
            py::arg("alpha"), py::arg("max_cegs"), py::arg("max_path_cost"), py::arg("within_group_penalty"),
            "Bubble expansion from seed groups into candidate evidence graphs (see graph.hpp). Returns a dict.")
        .def("memory_bytes", &bridge::Graph::memory_bytes)
        .def("to_bytes",
             [](const bridge::Graph& g) {
                 std::string s;
                 {
                     py::gil_scoped_release nogil;
                     s = g.to_bytes();
                 }
                 return py::bytes(s);
             })
        .def_static(
            "from_bytes",
            [](const py::bytes& data) {
                std::string_view v = data;
                py::gil_scoped_release nogil;
                return std::make_unique<bridge::Graph>(bridge::Graph::from_bytes(v.data(), v.size()));
            },
            py::arg("data"));
    // ------------------------------------------------------------------ end Graph (BubbleRAG)
}
