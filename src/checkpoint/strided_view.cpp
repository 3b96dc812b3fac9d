#include "checkpoint/strided_view.h"

#include <algorithm>
#include <cstring>

#include "checkpoint/checkpoint.h"
#include "tensormorph/dtype.h"

namespace tmorph {

namespace {

// One row (the last dimension) of n elements, `stride` elements apart.
template <size_t W>
void copy_row(const uint8_t* src, uint64_t n, uint64_t stride, uint8_t* dst) {
  for (uint64_t i = 0; i < n; ++i) std::memcpy(dst + i * W, src + i * stride * W, W);
}

void copy_row_any(const uint8_t* src, size_t width, uint64_t n, uint64_t stride, uint8_t* dst) {
  switch (width) {
    case 1: return copy_row<1>(src, n, stride, dst);
    case 2: return copy_row<2>(src, n, stride, dst);
    case 4: return copy_row<4>(src, n, stride, dst);
    case 8: return copy_row<8>(src, n, stride, dst);
    default:
      for (uint64_t i = 0; i < n; ++i) std::memcpy(dst + i * width, src + i * stride * width, width);
  }
}

}  // namespace

void gather_strided(const uint8_t* first, size_t width, const std::vector<uint64_t>& shape,
                    const std::vector<uint64_t>& strides, uint8_t* dst) {
  if (shape.empty()) {
    std::memcpy(dst, first, width);
    return;
  }
  for (uint64_t n : shape)
    if (n == 0) return;
  const size_t rank = shape.size();
  const uint64_t row = shape[rank - 1], row_stride = strides[rank - 1];
  // An odometer over every dimension but the last; `offset` is the current row's first element.
  std::vector<uint64_t> index(rank - 1, 0);
  uint64_t offset = 0;
  for (;;) {
    copy_row_any(first + offset * width, width, row, row_stride, dst);
    dst += row * width;
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++index[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= (shape[d] - 1) * strides[d];
      index[d] = 0;
    }
    if (d == SIZE_MAX) return;  // every dimension wrapped: done
  }
}

const uint8_t* Checkpoint::data(const CheckpointTensor& t) const {
  const uint8_t* first = files[t.file_index]->data() + t.file_offset;
  if (!t.strided() || !t.dtype) return first;
  std::lock_guard lock(gathered->mu);
  auto it = gathered->views.find(t.name);
  if (it == gathered->views.end()) {
    const size_t width = dtype_size(*t.dtype);
    LargeBuffer copy(std::max<uint64_t>(t.elements * width, 1));
    gather_strided(first, width, t.shape, t.strides, copy.get());
    it = gathered->views.emplace(t.name, std::move(copy)).first;
  }
  return it->second.get();
}

}  // namespace tmorph
