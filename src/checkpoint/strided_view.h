// Tensors not stored in row-major order in one place: strided views, whose elements lie in a storage at
// offset + sum(index_i * stride_i) (torch.save views: transposes, column slices, expanded dimensions), and
// tensors stored as chunks (DCP), each chunk a row-major block of the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tmorph {

// Copies the view's elements in row-major order of `shape` into dst (product(shape) * width bytes).
// `first` points at the view's first element (its storage offset); strides are in elements, one per
// dimension of shape. The caller has checked that every element lies inside the storage.
void gather_strided(const uint8_t* first, size_t width, const std::vector<uint64_t>& shape,
                    const std::vector<uint64_t>& strides, uint8_t* dst);

// The rows of a view of `shape`: one per index of every dimension but the last (1 for rank 0 and 1).
uint64_t strided_rows(const std::vector<uint64_t>& shape);

// Rows [row_begin, row_end) of the view (strided_rows' numbering), row-major, into dst ((row_end -
// row_begin) * shape.back() * width bytes): a view streamed a band at a time.
void gather_strided_rows(const uint8_t* first, size_t width, const std::vector<uint64_t>& shape,
                         const std::vector<uint64_t>& strides, uint64_t row_begin, uint64_t row_end, uint8_t* dst);

// Copies a row-major block of `sizes` (one chunk of a tensor of `shape`, placed at `offsets`) into its
// place in dst, the tensor's row-major bytes. The caller has checked that the block lies inside.
void place_block(const uint8_t* block, size_t width, const std::vector<uint64_t>& shape, const std::vector<uint64_t>& offsets,
                 const std::vector<uint64_t>& sizes, uint8_t* dst);

}  // namespace tmorph
