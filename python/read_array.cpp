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

std::vector<py::ssize_t> numpy_shape(const CheckpointTensor& t) {
  return {t.shape.begin(), t.shape.end()};
}

py::array mapped_view(const std::shared_ptr<const Checkpoint>& c, const CheckpointTensor& t, const char* type) {
  py::object base = py::cast(Mapping{c->files[t.file_index]});
  py::array a(py::dtype(type), numpy_shape(t), {}, c->data(t), base);
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

// bf16 and f8 widened to float32: bf16 by placing its bits in the high half (exact, NaN payloads kept),
// f8 through the exact decoders.
void widen(DType d, const uint8_t* src, uint64_t n, float* out) {
  if (d == DType::BF16) {
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      std::memcpy(out + i, &bits, 4);
    }
    return;
  }
  for (uint64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(d == DType::F8_E4M3FN ? f8_e4m3fn_to_double(src[i]) : f8_e5m2_to_double(src[i]));
}

// Quantized or packed: decoded a row of the default 2-D view at a time.
void decode(const Checkpoint& c, const CheckpointTensor& t, float* out) {
  auto rt = make_runtime({});
  const Planner planner = rt->planner();
  ValueReader reader(c, t, planner, default_view(t.shape));
  const View2D v = reader.view();
  for (uint64_t s = 0; s < v.slices; ++s)
    for (uint64_t r = 0; r < v.rows; ++r, out += v.cols)
      if (v.cols) std::memcpy(out, reader.read_decoded(s, r, 0, v.cols), v.cols * sizeof(float));
}

}  // namespace

py::array read_tensor(const std::shared_ptr<const Checkpoint>& c, const CheckpointTensor& t, bool raw) {
  if (t.dtype) {
    if (const auto type = numpy_type(*t.dtype, raw)) return mapped_view(c, t, *type);
    py::array_t<float> out(numpy_shape(t));
    float* dst = out.mutable_data();
    const DType d = *t.dtype;
    const uint8_t* src = c->data(t);
    {
      py::gil_scoped_release unlocked;
      widen(d, src, t.elements, dst);
    }
    return out;
  }
  if (raw)
    throw Error(ErrorKind::InvalidArgument, t.name + ": raw=True needs a dense dtype; " + t.stored_type +
                                                " is only read decoded to float32");
  if (!t.ggml_type && !(t.packed && t.unavailable_reason.empty()))
    throw Error(ErrorKind::Unavailable, t.name + ": " + (t.unavailable_reason.empty() ? "no decoder here" : t.unavailable_reason));
  py::array_t<float> out(numpy_shape(t));
  float* dst = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    decode(*c, t, dst);
  }
  return out;
}

}  // namespace tmorph::python
