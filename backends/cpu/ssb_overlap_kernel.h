// CPU reference kernel for TM_OP_STEM_SSB_OVERLAP (op_contracts.h): single-sideband ptychography's
// correction, inverse FFT (FFTW, complex64) and reduction over the bright-field pixels.
#pragma once

#include <string>

#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Validates the call against the contract and runs it on call.threads threads. The pixels are reduced in
// min(pixels, 16) fixed groups of consecutive pixels (each summed in pixel order, the groups then added
// in group order), so the result does not depend on the thread count. Returns TM_OK or an error with
// *error set.
tm_status run_stem_ssb_overlap(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
