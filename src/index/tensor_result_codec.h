// One tensor's indexing result (statistics, pyramid, seconds) as bytes, for a rank that computed it to
// send to the rank that commits it (distributed_indexer.h). Lossless: doubles travel as their bits,
// placements as the JSON the index stores for them, tiles as the index's tile records, so what rank 0
// commits is what it would have committed had it computed the tensor itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "index/indexer.h"

namespace tmorph {

std::vector<uint8_t> encode_tensor_result(const TensorResult& r);
// what: names the message in errors. Throws Error(BadInput) naming `what` and the offset for a
// truncated or inconsistent record (a tile count that does not match the view's layout, records of the
// wrong size); never reads past the end or allocates more than the message holds.
TensorResult decode_tensor_result(const std::vector<uint8_t>& bytes, const std::string& what);

}  // namespace tmorph
