// Strided views: a tensor whose elements lie in a storage at offset + sum(index_i * stride_i) (torch.save
// views that are not dense row-major: transposes, column slices, expanded dimensions).
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

}  // namespace tmorph
