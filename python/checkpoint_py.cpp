#include "checkpoint_py.h"

#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "app/checkpoint_json.h"
#include "app/compare_document.h"
#include "app/diff_document.h"
#include "app/remote_checkpoint.h"
#include "checkpoint/openers/open_checkpoint.h"
#include "compute_args.h"
#include "core/name_suggestions.h"
#include "display/colormap.h"
#include "display/transform.h"
#include "render/tensors/view_params.h"
#include "documents.h"
#include "interrupt.h"
#include "json_to_python.h"
#include "lod/view.h"
#include "read_array.h"
#include "result_py.h"
#include "tensormorph/error.h"

namespace py = pybind11;

namespace tmorph::python {

namespace {

// An opened checkpoint: the path as given (what the documents name) and its mapped files. A remote one (http(s)://,
// hf://, s3://; docs/remote.md) holds its RemoteCheckpoint: `local` is the stand-in the files were opened from, each
// call fetches the bytes of the tensors it reads and releases them after, and documents show the URLs.
struct PyCheckpoint {
  std::string path;
  std::shared_ptr<const Checkpoint> c;
  std::shared_ptr<app::RemoteCheckpoint> remote;
  std::string local;  // the path the checkpoint was opened from (path itself when local)

  // A document with stand-in paths shown as the URLs they stand for.
  py::object shown(nlohmann::json doc) const {
    if (remote) {
      remote->show_urls(doc);
      replace_string(doc, local, path);
    }
    return to_python(doc);
  }
  static void replace_string(nlohmann::json& doc, const std::string& from, const std::string& to) {
    if (doc.is_string() && doc.get<std::string>() == from) doc = to;
    else if (doc.is_structured())
      for (auto& v : doc) replace_string(v, from, to);
  }

  const CheckpointTensor& tensor(const std::string& name) const { return c->tensors[c->position(name, path)]; }

  bool has(const std::string& name) const {
    for (const auto& t : c->tensors)
      if (t.name == name) return true;
    return false;
  }

  py::list names() const {
    py::list out;
    for (const auto& t : c->tensors) out.append(t.name);
    return out;
  }
};

// A read with no placement arguments (mapping access).
app::ComputeRequest default_request() { return compute_request(py::none(), py::none(), py::none(), py::none()); }

PyCheckpoint open_path(const std::string& path) {
  py::gil_scoped_release unlocked;
  std::shared_ptr<app::RemoteCheckpoint> remote = app::open_remote_if_url(path);
  const std::string local = remote ? remote->local_path() : path;
  return PyCheckpoint{path, std::make_shared<const Checkpoint>(open_checkpoint(local)), remote, local};
}

py::object stats_method(const PyCheckpoint& self, const py::object& name, const py::object& backend, const py::object& prefer,
                        const py::object& never, const py::object& allow_approx, const py::object& threads,
                        const py::object& memory_budget, const py::object& progress) {
  const std::vector<std::string> names = string_list(name, "name");
  const app::ComputeRequest request = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
  Interruptible call(progress);
  return self.shown(call.run_indexing(
      [&](const IndexingHook& hook) { return stats_document(self.local, names, request, hook, self.remote.get()); }));
}

py::object index_method(const PyCheckpoint& self, const py::object& backend, const py::object& prefer, const py::object& never,
                        const py::object& allow_approx, const py::object& threads, const py::object& memory_budget,
                        const py::object& progress) {
  const app::ComputeRequest request = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
  Interruptible call(progress);
  return self.shown(
      call.run_indexing([&](const IndexingHook& hook) { return index_document(self.local, request, hook, self.remote.get()); }));
}

py::array read_method(const PyCheckpoint& self, const std::string& name, bool raw, const py::object& rows,
                      const py::object& cols, const py::object& backend, const py::object& prefer, const py::object& never,
                      const py::object& allow_approx) {
  const CheckpointTensor& t = self.tensor(name);
  const View2D v = default_view(t.shape);
  const app::ComputeRequest request = compute_request(backend, prefer, never, allow_approx);
  const Region region{axis_range(rows, v.rows, "rows"), axis_range(cols, v.cols, "cols")};
  if (!self.remote) return read_tensor(self.c, t, raw, region, request);
  // Remote: the bytes fetched for this read, and the values copied out of the stand-in before they are released.
  std::optional<app::FetchedTensors> fetched;
  {
    py::gil_scoped_release unlocked;
    fetched.emplace(self.remote.get(), *self.c, std::vector<size_t>{self.c->position(name, self.path)});
  }
  py::array values = read_tensor(self.c, t, raw, region, request);
  return py::array(values.attr("copy")());
}

// A Python int for a declared count: its type checked here, its range by the declaration (the message every face
// gives: "level: expected an integer from 0 to 63, got '64'").
uint64_t declared_count(const ParamSpec& spec, const py::handle& value) {
  long long v = -1;
  try {
    v = integer_argument(value, "", 0, std::numeric_limits<long long>::max());
  } catch (const Error&) {
    refuse(spec, Face::Python, py::str(value).cast<std::string>());
  }
  return check_count(spec, Face::Python, static_cast<uint64_t>(v));
}

// Checkpoint.render: (RGBA uint8 [height, width, 4], report).
py::object render_method(const PyCheckpoint& self, const std::string& name, const py::object& level, const py::object& tile,
                         uint64_t slice, const std::string& view, const std::string& stat, const std::string& transform,
                         double log_floor, const std::string& colormap, const py::object& limits, const py::object& backend,
                         const py::object& prefer, const py::object& never, const py::object& allow_approx,
                         const py::object& threads, const py::object& progress) {
  const OperationSchema& op = tensor_render_params();
  TensorRenderRequest render;
  if (!level.is_none()) render.source.level = static_cast<int>(declared_count(op.at("level"), level));
  if (!tile.is_none()) {
    if (level.is_none()) throw Error(ErrorKind::InvalidArgument, "tile: give level= too (the tile is one of that level)");
    const auto xy = integer_pair_argument(tile, "tile", "(x, y)", 0, std::numeric_limits<long long>::max());
    render.source.tile = std::make_pair(static_cast<uint64_t>(xy[0]), static_cast<uint64_t>(xy[1]));
  }
  render.source.slice = slice;
  render.source.view = view;
  render.stat = parse_cell_stat(parse_choice(op.at("stat"), Face::Python, stat));
  render.display.transform = parse_transform(parse_choice(op.at("transform"), Face::Python, transform));
  render.display.log_floor = check_number(op.at("log_floor"), Face::Python, log_floor);
  if (!limits.is_none()) {
    const auto lh = number_pair_argument(limits, "limits", "(lo, hi)");
    if (!std::isfinite(lh[0]) || !std::isfinite(lh[1]))  // the pair as the other faces show it: "0,inf"
      refuse(op.at("limits"), Face::Python, number_text(lh[0]) + "," + number_text(lh[1]));
    std::tie(render.display.lo, render.display.hi) = check_limits(Face::Python, lh[0], lh[1]);
  }
  if (!colormap.empty()) tmorph::colormap(colormap);  // throws InvalidArgument naming the known maps
  render.colormap = colormap;
  const app::ComputeRequest request = compute_request(threads, py::none(), backend, prefer, never, allow_approx);
  Interruptible call(progress);
  const RenderDocument doc =
      call.run_indexing([&](const IndexingHook& hook) { return render_document(self.local, name, render, request, hook, self.remote.get()); });
  py::array_t<uint8_t> rgba({static_cast<py::ssize_t>(doc.image.height), static_cast<py::ssize_t>(doc.image.width),
                             py::ssize_t{4}});
  std::copy(doc.image.pixels.begin(), doc.image.pixels.end(), rgba.mutable_data());
  return named_result(rgba, self.shown(doc.report));
}

py::object tile_method(const PyCheckpoint& self, const std::string& name, unsigned level, uint64_t x, uint64_t y, uint64_t slice,
                       const py::object& backend, const py::object& prefer, const py::object& never,
                       const py::object& allow_approx, const py::object& progress) {
  check_count(tensor_tile_params().at("level"), Face::Python, level);
  const app::ComputeRequest request = compute_request(backend, prefer, never, allow_approx);
  Interruptible call(progress);
  return self.shown(call.run_indexing(
      [&](const IndexingHook& hook) { return tile_document(self.local, name, level, slice, x, y, request, hook, self.remote.get()); }));
}

py::list tensor_list(const PyCheckpoint& self) {
  py::list out;
  for (const auto& t : self.c->tensors) out.append(self.shown(app::tensor_listing_json(*self.c, t)));
  return out;
}

}  // namespace

void bind_checkpoint(py::module_& m) {
  py::class_<PyCheckpoint>(m, "Checkpoint", "A checkpoint opened for reading (safetensors, GGUF, torch.save; sharded or not).")
      .def_readonly("path", &PyCheckpoint::path, "the path as given to open()")
      .def_property_readonly("format", [](const PyCheckpoint& s) { return s.c->format; },
                             "\"safetensors\", \"gguf\" or \"torch\"")
      .def_property_readonly("files", [](const PyCheckpoint& s) {
            std::vector<std::string> out;
            for (const auto& f : s.c->files) out.push_back(s.remote ? s.remote->shown(f->path()) : f->path());
            return out;
          }, "the files the checkpoint's tensors live in")
      .def_property_readonly("metadata", [](const PyCheckpoint& s) { return s.c->metadata; }, "scalar metadata as text")
      .def_property_readonly("tensors", &tensor_list,
                             "one dict per tensor, in file order: name, stored_type, dtype (None when not dense), shape, "
                             "elements, bytes, file, offset, readable, and unavailable (the reason) when not readable")
      .def("stats", &stats_method, py::arg("name") = py::none(), py::kw_only(), py::arg("backend") = py::none(),
           py::arg("prefer") = py::none(), py::arg("never") = py::none(), py::arg("allow_approx") = py::none(),
           py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(), py::arg("progress") = py::none(),
           "Exact statistics, the document `tensormorph stats PATH [NAME] --json` prints: of every tensor, or of the "
           "one named (or a list of names). Without placement arguments they come from the index (built as needed, "
           "with progress= as index()'s; interruptible the same way). threads= and memory_budget= as the CLI's "
           "--threads and --memory-budget.")
      .def("index", &index_method, py::kw_only(), py::arg("backend") = py::none(), py::arg("prefer") = py::none(),
           py::arg("never") = py::none(), py::arg("allow_approx") = py::none(), py::arg("threads") = py::none(),
           py::arg("memory_budget") = py::none(), py::arg("progress") = py::none(),
           "Opens or builds the checkpoint's index and computes what it lacks; the document `tensormorph index PATH "
           "--json` prints. progress=True writes a line to sys.stderr; a callable gets a dict {bytes_done, "
           "bytes_total, tensors_done, tensors_total, seconds} about ten times a second. Ctrl-C (or an exception "
           "from the callable) stops it cleanly: the tensors in flight are committed, then the exception is raised; "
           "calling again resumes.")
      .def("read", &read_method, py::arg("name"), py::kw_only(), py::arg("raw") = false, py::arg("rows") = py::none(),
           py::arg("cols") = py::none(), py::arg("backend") = py::none(), py::arg("prefer") = py::none(),
           py::arg("never") = py::none(), py::arg("allow_approx") = py::none(),
           "The tensor's values as numpy: a read-only zero-copy view of the mapping for dense dtypes numpy has; "
           "bf16/f8 widened to float32 (raw=True: their bit patterns as uint16/uint8, zero-copy); quantized and "
           "packed tensors decoded to float32. rows= (the second-to-last axis) and cols= (the last) take a slice "
           "or a (start, stop) pair and read only that part: a strided view, or only those rows widened/decoded. "
           "backend=, prefer=, never=, allow_approx= place the decoding (dense reads run no op).")
      .def("render", &render_method, py::arg("name"), py::kw_only(), py::arg("level") = py::none(), py::arg("tile") = py::none(),
           py::arg("slice") = 0, py::arg("view") = "", py::arg("stat") = "mean", py::arg("transform") = "linear",
           py::arg("log_floor") = kDefaultLogFloor, py::arg("colormap") = "", py::arg("limits") = py::none(),
           py::arg("backend") = py::none(), py::arg("prefer") = py::none(), py::arg("never") = py::none(),
           py::arg("allow_approx") = py::none(), py::arg("threads") = py::none(), py::arg("progress") = py::none(),
           "The image `tensormorph render PATH NAME` draws, as (RGBA uint8 [height, width, 4], report): the overview, "
           "a pyramid level (level=), or one tile of it (level=, tile=(x, y)); stat mean, min, max, abs_max, std or "
           "envelope; transform linear, log or signed-log; colormap (default: RdBu_r for signed values, else "
           "viridis); limits (lo, hi) in data units. The report is render --json's (source, region, cells, limits, "
           "colour histogram, placement). The tensor is indexed first when it is not.")
      .def("tile", &tile_method, py::arg("name"), py::arg("level"), py::arg("x"), py::arg("y"), py::kw_only(),
           py::arg("slice") = 0, py::arg("backend") = py::none(), py::arg("prefer") = py::none(), py::arg("never") = py::none(),
           py::arg("allow_approx") = py::none(), py::arg("progress") = py::none(),
           "Exact statistics of one tile of the tensor's pyramid (column x, row y of `level`), with the elements it "
           "covers and its histogram: the document `tensormorph tile PATH NAME --json` prints (placement arguments "
           "place the indexing that builds the pyramid when the tensor is not indexed yet).")
      // The mapping protocol (like safetensors.safe_open): names in file order, ckpt[name] is read(name).
      .def("__len__", [](const PyCheckpoint& s) { return s.c->tensors.size(); })
      .def("__iter__", [](const PyCheckpoint& s) { return s.names().attr("__iter__")(); })
      .def("__contains__", [](const PyCheckpoint& s, const py::object& name) {
        return py::isinstance<py::str>(name) && s.has(name.cast<std::string>());
      })
      .def("__getitem__", [](const PyCheckpoint& s, const py::object& key) {
        if (!py::isinstance<py::str>(key))
          throw Error(ErrorKind::InvalidArgument, "a checkpoint is indexed by tensor name (str), not " +
                                                      py::str(py::type::of(key).attr("__name__")).cast<std::string>());
        const std::string name = key.cast<std::string>();
        if (!s.has(name)) {
          // KeyError, as a mapping must (so get() and `in` behave); the message suggests close names.
          std::vector<std::string> known;
          for (const auto& t : s.c->tensors) known.push_back(t.name);
          throw py::key_error(s.path + ": no tensor named '" + name + "'" + did_you_mean(name, known));
        }
        return read_tensor(s.c, s.tensor(name), false, Region{}, default_request());
      }, py::arg("name"), "read(name) with the defaults")
      .def("keys", &PyCheckpoint::names, "the tensor names in file order (as safetensors' keys())")
      .def("get", [](const PyCheckpoint& s, const std::string& name, const py::object& fallback) -> py::object {
        if (!s.has(name)) return fallback;
        return read_tensor(s.c, s.tensor(name), false, Region{}, default_request());
      }, py::arg("name"), py::arg("default") = py::none(), "read(name), or default when there is no such tensor")
      .def("__repr__", [](const PyCheckpoint& s) {
        return "<tensormorph.Checkpoint " + s.c->format + " '" + s.path + "', " + std::to_string(s.c->tensors.size()) +
               " tensors>";
      });
  m.def(
      "compare",
      [](const std::string& a, const std::string& b, const py::object& tensors, const py::object& backend,
         const py::object& prefer, const py::object& never, const py::object& allow_approx, const py::object& threads,
         const py::object& memory_budget) {
        const std::vector<std::string> names = string_list(tensors, "tensors");
        const app::ComputeRequest request = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
        nlohmann::json doc;
        {
          py::gil_scoped_release unlocked;
          const auto rt = make_runtime(request);
          app::RemotePair pair(a, b);  // URLs: each pair's tensors fetched while it is measured (docs/remote.md)
          doc = app::compare_document(pair.path_a(), pair.path_b(), names, rt->planner(), rt->threads, {}, pair.around_pair());
          pair.show_given(doc);
        }
        return to_python(doc);
      },
      py::arg("a"), py::arg("b"), py::arg("tensors") = py::none(), py::kw_only(), py::arg("backend") = py::none(),
      py::arg("prefer") = py::none(), py::arg("never") = py::none(), py::arg("allow_approx") = py::none(),
      py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(),
      "Checkpoint b (a quantized or lower-precision copy) measured against reference a, tensor by tensor: the "
      "document `tensormorph compare A B --json` prints (rmse, max_abs_diff, rel_error, cosine, snr_db, placement "
      "per tensor; only_in_a, only_in_b, skipped). tensors: a name or a list of names (default: every tensor in both).");
  m.def(
      "diff",
      [](const std::string& a, const std::string& b, const py::object& tensors, size_t top, const py::object& level,
         const py::object& index, const py::object& backend, const py::object& prefer, const py::object& never,
         const py::object& allow_approx, const py::object& threads, const py::object& memory_budget) {
        DiffOptions options;
        options.tensors = string_list(tensors, "tensors");
        if (!index.is_none()) options.index_path = index.cast<std::string>();
        app::DiffDocumentOptions doc_options;
        if (top == 0) throw Error(ErrorKind::InvalidArgument, "top: give 1 or more");
        doc_options.top = top;
        if (!level.is_none()) {
          if (options.tensors.empty())
            throw Error(ErrorKind::InvalidArgument, "level lists every tile of each pair: name the tensors it is for");
          doc_options.level = static_cast<unsigned>(integer_argument(level, "level", 0, 63));
          options.keep_tiles = true;
        }
        const app::ComputeRequest request = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
        nlohmann::json doc;
        {
          py::gil_scoped_release unlocked;
          const auto rt = make_runtime(request);
          options.threads = rt->threads;
          app::RemotePair pair(a, b);  // URLs: each pair's tensors fetched while it is read (docs/remote.md)
          options.around_pair = pair.around_pair();
          doc = app::diff_document(diff_checkpoints(pair.path_a(), pair.path_b(), rt->planner(), options), doc_options);
          pair.show_given(doc);
        }
        return to_python(doc);
      },
      py::arg("a"), py::arg("b"), py::arg("tensors") = py::none(), py::kw_only(), py::arg("top") = 10,
      py::arg("level") = py::none(), py::arg("index") = py::none(), py::arg("backend") = py::none(),
      py::arg("prefer") = py::none(), py::arg("never") = py::none(), py::arg("allow_approx") = py::none(),
      py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(),
      "What changed between checkpoints a and b, and where: the document `tensormorph diff A B --json` prints "
      "(pairs with their difference figures and histograms, ranking, layer_strip, only_in_a, only_in_b, skipped; "
      "docs/diff.md). tensors: a name or a list of A's names; level: with named tensors, every tile of that pyramid "
      "level; index: the difference index file (default: the cache folder).");
  m.def(
      "diff_tile",
      [](const std::string& a, const std::string& b, const std::string& name, long level, long x, long y, long slice,
         const py::object& backend, const py::object& prefer, const py::object& never, const py::object& allow_approx) {
        for (const auto& [what, v] : {std::pair<const char*, long>{"level", level}, {"x", x}, {"y", y}, {"slice", slice}})
          if (v < 0) throw Error(ErrorKind::InvalidArgument, std::string(what) + ": expected 0 or more, have " + std::to_string(v));
        const app::ComputeRequest request = compute_request(backend, prefer, never, allow_approx);
        TileDelta t;
        {
          py::gil_scoped_release unlocked;
          const auto rt = make_runtime(request);
          app::RemotePair pair(a, b);  // URLs: the pair's tensors fetched while the tile is read (docs/remote.md)
          t = diff_tile_values(pair.path_a(), pair.path_b(), name, static_cast<unsigned>(level), static_cast<uint64_t>(slice),
                               static_cast<uint64_t>(y), static_cast<uint64_t>(x), rt->planner(), pair.around_pair());
        }
        const auto rows = static_cast<py::ssize_t>(t.range.row_end - t.range.row_begin);
        const auto cols = static_cast<py::ssize_t>(t.range.col_end - t.range.col_begin);
        py::array_t<double> delta({rows, cols});
        std::copy(t.delta.begin(), t.delta.end(), delta.mutable_data());
        py::dict where;
        where["level"] = level, where["slice"] = slice, where["tx"] = x, where["ty"] = y;
        where["row_begin"] = t.range.row_begin, where["row_end"] = t.range.row_end;
        where["col_begin"] = t.range.col_begin, where["col_end"] = t.range.col_end;
        return named_result(delta, where);
      },
      py::arg("a"), py::arg("b"), py::arg("name"), py::kw_only(), py::arg("level") = 0, py::arg("x") = 0, py::arg("y") = 0,
      py::arg("slice") = 0, py::arg("backend") = py::none(), py::arg("prefer") = py::none(), py::arg("never") = py::none(),
      py::arg("allow_approx") = py::none(),
      "One tile of tm.diff's pyramid as values: (delta, where), delta = b - a as a float64 array of the tile's rows x "
      "columns (read as the pyramid reads them: the same pairing, Q/K rows, adapter ΔW), where = {level, slice, tx, ty, "
      "row_begin, row_end, col_begin, col_end}. At most 2^24 elements: ask a finer level for more.");
  m.def("open", &open_path, py::arg("path"),
        "Opens a checkpoint: a directory, a *.safetensors.index.json, a GGUF shard or a single .safetensors / .gguf / "
        "torch.save file. Raises BadInput for a truncated or corrupt file, IoError when the OS refuses.");
}

}  // namespace tmorph::python
