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

// Copies a row-major block of `sizes` (one chunk of a tensor of `shape`, placed at `offsets`) into its
// place in dst, the tensor's row-major bytes. The caller has checked that the block lies inside.
void place_block(const uint8_t* block, size_t width, const std::vector<uint64_t>& shape, const std::vector<uint64_t>& offsets,
                 const std::vector<uint64_t>& sizes, uint8_t* dst);

}  // namespace tmorph
