// Which rank of an MPI job computes which tensors (distributed_indexer.h): a deterministic plan,
// balanced by bytes, that keeps each rank on neighbouring tensors so it reads few files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tmorph {

// Splits `bytes` (the tensors to compute, in checkpoint order: file by file, offset by offset) into
// `ranks` contiguous runs whose largest total is as small as any contiguous split allows; run k is rank
// k's. Returns, per rank, positions into `bytes`. A run may be empty (fewer tensors than ranks, or one
// tensor larger than the rest together). The same input gives the same plan on every machine.
std::vector<std::vector<size_t>> plan_ranks(const std::vector<uint64_t>& bytes, int ranks);

}  // namespace tmorph
