#include "checkpoint/strided_view.h"

#include <algorithm>
#include <cstring>

#include "checkpoint/checkpoint.h"
#include "formats/protobuf_values.h"
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

// The last two dimensions (rows x cols, strides rs and cs) in blocks of kBlock x kBlock, so that a
// transpose (cs large, rs = 1) reads each source cache line for kBlock consecutive rows instead of once per
// element. W is the element width (0: `width` at run time).
template <size_t W>
void copy_plane_blocked(const uint8_t* src, size_t width, uint64_t rows, uint64_t cols, uint64_t rs, uint64_t cs, uint8_t* dst) {
  constexpr uint64_t kBlock = 32;
  const size_t w = W ? W : width;
  for (uint64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const uint64_t r1 = std::min(rows, r0 + kBlock);
    for (uint64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const uint64_t c1 = std::min(cols, c0 + kBlock);
      for (uint64_t c = c0; c < c1; ++c)
        for (uint64_t r = r0; r < r1; ++r) std::memcpy(dst + (r * cols + c) * w, src + (r * rs + c * cs) * w, W ? W : width);
    }
  }
}

void copy_plane_any(const uint8_t* src, size_t width, uint64_t rows, uint64_t cols, uint64_t rs, uint64_t cs, uint8_t* dst) {
  switch (width) {
    case 1: return copy_plane_blocked<1>(src, width, rows, cols, rs, cs, dst);
    case 2: return copy_plane_blocked<2>(src, width, rows, cols, rs, cs, dst);
    case 4: return copy_plane_blocked<4>(src, width, rows, cols, rs, cs, dst);
    case 8: return copy_plane_blocked<8>(src, width, rows, cols, rs, cs, dst);
    default: return copy_plane_blocked<0>(src, width, rows, cols, rs, cs, dst);
  }
}

// Calls visit(offset) for every index of dimensions [0, outer) of `extent`, in row-major order, with
// offset = sum(index_d * step_d): the odometer both copies below walk.
template <class Visit>
void for_each_outer(const std::vector<uint64_t>& extent, const std::vector<uint64_t>& step, size_t outer, Visit visit) {
  std::vector<uint64_t> index(outer, 0);
  uint64_t offset = 0;
  for (;;) {
    visit(offset);
    size_t d = outer;
    while (d-- > 0) {
      if (++index[d] < extent[d]) {
        offset += step[d];
        break;
      }
      offset -= (extent[d] - 1) * step[d];
      index[d] = 0;
    }
    if (d == SIZE_MAX) return;  // every dimension wrapped: done
  }
}

}  // namespace

uint64_t strided_rows(const std::vector<uint64_t>& shape) {
  uint64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  return rows;
}

void gather_strided_rows(const uint8_t* first, size_t width, const std::vector<uint64_t>& shape,
                         const std::vector<uint64_t>& strides, uint64_t row_begin, uint64_t row_end, uint8_t* dst) {
  const size_t rank = shape.size();
  if (rank == 0) {
    if (row_begin < row_end) std::memcpy(dst, first, width);
    return;
  }
  for (uint64_t n : shape)
    if (n == 0) return;
  const uint64_t cols = shape[rank - 1], cs = strides[rank - 1];
  const uint64_t plane_rows = rank >= 2 ? shape[rank - 2] : 1, rs = rank >= 2 ? strides[rank - 2] : 0;
  const size_t outer = rank >= 2 ? rank - 2 : 0;  // dimensions that index the planes
  // When the last dimension is not the one that runs through memory (a transpose), groups of up to
  // kGroup rows of one plane are copied in blocks; otherwise row by row.
  constexpr uint64_t kGroup = 32;
  const bool blocked = rank >= 2 && cs > 1;
  for (uint64_t r = row_begin; r < row_end;) {
    const uint64_t plane = r / plane_rows, i = r % plane_rows;
    uint64_t offset = i * rs, rest = plane;
    for (size_t d = outer; d-- > 0;) offset += (rest % shape[d]) * strides[d], rest /= shape[d];
    const uint64_t n = std::min({plane_rows - i, row_end - r, blocked ? kGroup : plane_rows});
    if (blocked) {
      copy_plane_any(first + offset * width, width, n, cols, rs, cs, dst);
    } else {
      for (uint64_t k = 0; k < n; ++k) copy_row_any(first + (offset + k * rs) * width, width, cols, cs, dst + k * cols * width);
    }
    dst += n * cols * width;
    r += n;
  }
}

void gather_strided(const uint8_t* first, size_t width, const std::vector<uint64_t>& shape,
                    const std::vector<uint64_t>& strides, uint8_t* dst) {
  gather_strided_rows(first, width, shape, strides, 0, strided_rows(shape), dst);
}

void place_block(const uint8_t* block, size_t width, const std::vector<uint64_t>& shape, const std::vector<uint64_t>& offsets,
                 const std::vector<uint64_t>& sizes, uint8_t* dst) {
  const size_t rank = shape.size();
  if (rank == 0) {
    std::memcpy(dst, block, width);
    return;
  }
  for (uint64_t n : sizes)
    if (n == 0) return;
  // Row-major strides of the tensor, in elements.
  std::vector<uint64_t> stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * shape[d + 1];
  uint64_t at = 0;
  for (size_t d = 0; d < rank; ++d) at += offsets[d] * stride[d];
  const uint64_t row = sizes[rank - 1] * width;
  for_each_outer(sizes, stride, rank - 1, [&](uint64_t offset) {
    std::memcpy(dst + (at + offset) * width, block, row);
    block += row;
  });
}

bool CheckpointTensor::chunks_in_order() const {
  // A block is one run of consecutive row-major elements when, after its first dimension wider than 1,
  // it spans every dimension whole.
  for (const auto& c : chunks()) {
    if (c.flat_in(shape.size())) continue;
    size_t d = 0;
    while (d < shape.size() && c.sizes[d] == 1) ++d;
    for (size_t e = d + 1; e < shape.size(); ++e)
      if (c.sizes[e] != shape[e]) return false;
  }
  return true;
}

const uint8_t* Checkpoint::data(const CheckpointTensor& t) const {
  const uint8_t* first = files[t.file_index]->data() + t.file_offset;
  if ((!t.strided() && !t.chunked() && !t.encoded()) || !t.dtype) return first;
  if (t.chunks().size() == 1) return first;
  std::lock_guard lock(gathered->mu);
  auto it = gathered->views.find(t.name);
  if (it == gathered->views.end()) {
    const size_t width = dtype_size(*t.dtype);
    LargeBuffer copy(std::max<uint64_t>(t.elements * width, 1));
    if (const EncodedValues* encoded = t.encoded()) {
      const MappedFile& file = *files[t.file_index];
      decode_values(file.data(), file.size(), *encoded, *t.dtype, t.elements, copy.get(), file.path(), "tensor '" + t.name + "' (" + t.stored_type + ")");
    } else if (t.strided()) {
      gather_strided(first, width, t.shape, t.strides(), copy.get());
    } else {
      for (const auto& c : t.chunks()) {
        const uint8_t* block = files[c.file_index]->data() + c.file_offset;
        if (c.flat_in(t.shape.size())) std::memcpy(copy.get() + c.offsets[0] * width, block, c.sizes[0] * width);
        else place_block(block, width, t.shape, c.offsets, c.sizes, copy.get());
      }
    }
    it = gathered->views.emplace(t.name, std::move(copy)).first;
  }
  return it->second.get();
}

}  // namespace tmorph
