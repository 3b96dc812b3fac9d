#include "read_array.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "compute_args.h"
#include "checkpoint/value_reader.h"
#include "lod/view.h"
#include "tensormorph/dtype.h"
#include "tensormorph/error.h"

namespace py = pybind11;

namespace tmorph::python {

void bind_mapping(py::module_& m) {
  py::class_<Mapping>(m, "Mapping", "A mapped file that zero-copy arrays view (their .base); kept alive by them.")
      .def_property_readonly("path", [](const Mapping& mp) { return mp.file->path(); })
      .def_property_readonly("address", [](const Mapping& mp) { return reinterpret_cast<uintptr_t>(mp.file->data()); },
                             "address of the first mapped byte")
      .def_property_readonly("size", [](const Mapping& mp) { return mp.file->size(); }, "mapped bytes");
}

namespace {

// The numpy type string of a dense dtype viewed in place, or nullopt when it must be widened.
std::optional<const char*> numpy_type(DType d, bool raw) {
  switch (d) {
    case DType::F64: return "<f8";
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I8: return "i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "u1";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::BOOL: return "?";
    case DType::BF16: return raw ? std::optional<const char*>("<u2") : std::nullopt;
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: return raw ? std::optional<const char*>("u1") : std::nullopt;
  }
  return std::nullopt;
}

// The part of the default 2-D view (slices x rows x cols) a Region selects, and the numpy shape it has.
struct Selection {
  View2D view;
  AxisRange rows, cols;
  std::vector<py::ssize_t> shape;
  uint64_t elements() const { return view.slices * rows.count * cols.count; }
};

Selection select(const CheckpointTensor& t, const Region& region) {
  Selection s;
  s.view = default_view(t.shape);
  const size_t rank = t.shape.size();
  if (region.rows && rank < 2)
    throw Error(ErrorKind::InvalidArgument, t.name + ": rows= needs a tensor of rank 2 or more; this one has rank " +
                                                std::to_string(rank) + " (select with cols=)");
  if (region.cols && rank < 1) throw Error(ErrorKind::InvalidArgument, t.name + ": cols= needs a tensor of rank 1 or more");
  s.rows = region.rows.value_or(AxisRange{0, s.view.rows, 1});
  s.cols = region.cols.value_or(AxisRange{0, s.view.cols, 1});
  s.shape.assign(t.shape.begin(), t.shape.end());
  if (rank >= 2) s.shape[rank - 2] = static_cast<py::ssize_t>(s.rows.count);
  if (rank >= 1) s.shape[rank - 1] = static_cast<py::ssize_t>(s.cols.count);
  return s;
}

// A read-only strided view of the mapping: no copy, its base the Mapping (for a tensor in several chunks,
// of its assembled copy).
py::array mapped_view(const std::shared_ptr<const Checkpoint>& c, const CheckpointTensor& t, const char* type,
                      const Selection& sel) {
  const py::dtype dt(type);
  const size_t rank = t.shape.size();
  const Checkpoint::InPlace in_place = c->in_place(t);  // a torch view keeps its strides: numpy reads it in place
  if (in_place.file) c->files[*in_place.file]->check_not_shrunk();  // a view past a new end would be SIGBUS
  std::vector<py::ssize_t> strides(rank);
  for (size_t i = 0; i < rank; ++i) strides[i] = static_cast<py::ssize_t>(in_place.element_strides[i]) * dt.itemsize();
  uint64_t offset = 0;
  if (sel.elements() > 0) {  // an empty selection views the tensor's first byte (never past the mapping)
    if (rank >= 2) offset += sel.rows.begin * static_cast<uint64_t>(strides[rank - 2]);
    if (rank >= 1) offset += sel.cols.begin * static_cast<uint64_t>(strides[rank - 1]);
  }
  if (rank >= 2) strides[rank - 2] *= static_cast<py::ssize_t>(sel.rows.step);
  if (rank >= 1) strides[rank - 1] *= static_cast<py::ssize_t>(sel.cols.step);
  // The array's base keeps its bytes alive: the file's Mapping, or the checkpoint that holds the assembled copy
  // of a tensor in several chunks.
  py::object base = in_place.file ? py::cast(Mapping{c->files[*in_place.file]})
                                   : py::object(py::capsule(new std::shared_ptr<const Checkpoint>(c), [](void* p) {
                                       delete static_cast<std::shared_ptr<const Checkpoint>*>(p);
                                     }));
  py::array a(dt, sel.shape, strides, in_place.first + offset, base);
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

// bf16 and f8 widened to float32: bf16 by placing its bits in the high half (exact, NaN payloads kept),
// f8 through the exact decoders. `src` holds the whole tensor; only the selection is widened.
float widen_one(DType d, const uint8_t* src, uint64_t i) {
  if (d == DType::BF16) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return static_cast<float>(d == DType::F8_E4M3FN ? f8_e4m3fn_to_double(src[i]) : f8_e5m2_to_double(src[i]));
}

void widen(DType d, const uint8_t* src, const Selection& sel, float* out) {
  const View2D& v = sel.view;
  for (uint64_t s = 0; s < v.slices; ++s)
    for (uint64_t r = 0; r < sel.rows.count; ++r) {
      const uint64_t row = (s * v.rows + sel.rows.begin + r * sel.rows.step) * v.cols;
      for (uint64_t k = 0; k < sel.cols.count; ++k) *out++ = widen_one(d, src, row + sel.cols.begin + k * sel.cols.step);
    }
}

// Quantized or packed: decoded one selected row of the default 2-D view at a time, only the columns from
// the first to the last selected (the reader decodes whole blocks around them).
void decode(const Checkpoint& c, const CheckpointTensor& t, const Selection& sel, const app::ComputeRequest& request,
            float* out) {
  if (sel.elements() == 0) return;
  auto rt = make_runtime(request);
  const Planner planner = rt->planner();
  ValueReader reader(c, t, planner, sel.view);
  const uint64_t first = sel.cols.begin, last = sel.cols.begin + (sel.cols.count - 1) * sel.cols.step;
  for (uint64_t s = 0; s < sel.view.slices; ++s)
    for (uint64_t r = 0; r < sel.rows.count; ++r) {
      const float* row = reader.read_decoded(s, sel.rows.begin + r * sel.rows.step, first, last + 1);
      for (uint64_t k = 0; k < sel.cols.count; ++k) *out++ = row[k * sel.cols.step];
    }
}

}  // namespace

std::optional<AxisRange> axis_range(const py::object& selection, uint64_t length, const char* what) {
  if (selection.is_none()) return std::nullopt;
  py::slice slice = py::slice(py::none(), py::none(), py::none());
  if (py::isinstance<py::slice>(selection)) {
    slice = selection.cast<py::slice>();
  } else if ((py::isinstance<py::tuple>(selection) || py::isinstance<py::list>(selection)) && py::len(selection) == 2) {
    slice = py::slice(selection[py::int_(0)], selection[py::int_(1)], py::none());
  } else {
    throw Error(ErrorKind::InvalidArgument, std::string(what) + "= expects a slice, a (start, stop) pair or None");
  }
  py::ssize_t start = 0, stop = 0, step = 0, count = 0;
  if (!slice.compute(static_cast<py::ssize_t>(length), &start, &stop, &step, &count)) throw py::error_already_set();
  if (step < 1) throw Error(ErrorKind::InvalidArgument, std::string(what) + "= needs a step of 1 or more, not " + std::to_string(step));
  return AxisRange{count > 0 ? static_cast<uint64_t>(start) : 0, static_cast<uint64_t>(count), static_cast<uint64_t>(step)};
}

py::array read_tensor(const std::shared_ptr<const Checkpoint>& c, const CheckpointTensor& t, bool raw,
                      const Region& region, const app::ComputeRequest& request) {
  const Selection sel = select(t, region);
  if (t.dtype) {
    if (const auto type = numpy_type(*t.dtype, raw)) return mapped_view(c, t, *type, sel);
    py::array_t<float> out(sel.shape);
    float* dst = out.mutable_data();
    const DType d = *t.dtype;
    const uint8_t* src = c->data(t);
    {
      py::gil_scoped_release unlocked;
      widen(d, src, sel, dst);
    }
    return out;
  }
  if (raw)
    throw Error(ErrorKind::InvalidArgument, t.name + ": raw=True needs a dense dtype; " + t.stored_type +
                                                " is only read decoded to float32");
  if (!t.readable())
    throw Error(ErrorKind::Unavailable, t.name + ": " + (t.unavailable_reason.empty() ? "no decoder here" : t.unavailable_reason));
  py::array_t<float> out(sel.shape);
  float* dst = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    decode(*c, t, sel, request, dst);
  }
  return out;
}

}  // namespace tmorph::python
