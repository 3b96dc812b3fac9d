#include "checkpoint/checkpoint.h"

#include "core/name_suggestions.h"

#include "tensormorph/error.h"

namespace tmorph {

Checkpoint::InPlace Checkpoint::in_place(const CheckpointTensor& t) const {
  InPlace p;
  p.element_strides.resize(t.shape.size());
  uint64_t stride = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    p.element_strides[i] = t.strided() ? t.strides()[i] : stride;
    stride *= t.shape[i];
  }
  if (t.chunks().size() > 1 || (t.encoded() && t.dtype)) {
    p.first = data(t);
  } else {
    p.file = t.file_index;
    p.first = files[t.file_index]->data() + t.file_offset;  // not data(t): that would gather a strided view
  }
  return p;
}

const std::vector<uint64_t>& CheckpointTensor::strides() const {
  static const std::vector<uint64_t> none;
  const auto* s = std::get_if<StridedStorage>(&storage);
  return s ? s->strides : none;
}

const std::vector<TensorChunk>& CheckpointTensor::chunks() const {
  static const std::vector<TensorChunk> none;
  const auto* c = std::get_if<ChunkedStorage>(&storage);
  return c ? c->chunks : none;
}

void CheckpointTensor::refuse_unreadable() const {
  throw Error(damaged ? ErrorKind::BadInput : ErrorKind::Unavailable, name + " (" + stored_type + "): " + unavailable_reason);
}

size_t Checkpoint::position(const std::string& name, const std::string& shown_path) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name) return i;
  std::vector<std::string> names;
  names.reserve(tensors.size());
  for (const auto& t : tensors) names.push_back(t.name);
  throw Error(ErrorKind::InvalidArgument, shown_path + ": no tensor named '" + name + "'" + did_you_mean(name, names));
}

}  // namespace tmorph
