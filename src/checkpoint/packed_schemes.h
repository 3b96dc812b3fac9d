// Recognition of safetensors-packed quantization schemes: groups of stored tensors that together hold
// one logical tensor (docs/formats.md, "Packed quantization schemes"). Recognised from tensor names,
// dtypes and shapes, with the checkpoint's quantization_config (config.json) deciding what names alone
// cannot (GPTQ bits and v1/v2 zero convention, AWQ version, FP8 block size).
#pragma once

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"

namespace tmorph {

// Replaces every recognised group of parts in c (a safetensors checkpoint) by its logical tensor, at
// the position of its code part. `quantization_config` is the config's object or null. A group that is
// recognised but inconsistent (a part missing, a shape or dtype that disagrees with the others, a
// quant_state that is not JSON) is a BadInput error naming the file, the tensor and what was expected.
// A recognised scheme without a decoder (e.g. 3-bit GPTQ) becomes a logical tensor whose
// unavailable_reason says so.
void recognise_packed_tensors(Checkpoint& c, const nlohmann::json& quantization_config);

}  // namespace tmorph
