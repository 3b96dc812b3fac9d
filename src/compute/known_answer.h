// Known-answer cases for kernel self-tests: a small deterministic input for one op and dtype (or
// format), the params the op's contract needs, and how two outputs are compared. The answer is not
// stored: it is what the reference backend (the CPU) computes from the same call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensormorph/placement.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/plugin_abi.h"

namespace tmorph {

class KnownAnswer {
 public:
  // A call of kernel_index on device_index over this case, writing to output (output_size() bytes,
  // initialised with initial_output()).
  tm_kernel_call_v1 call(uint32_t kernel_index, uint32_t device_index, void* output) const;
  uint64_t output_size() const { return initial_output_.size(); }
  const std::vector<uint8_t>& initial_output() const { return initial_output_; }
  // Empty when a and b agree under the op's exact contract; otherwise where they first differ. Outputs
  // of float32 values (dequantization) treat any two NaNs as equal (payloads are not part of it).
  std::string compare(const std::vector<uint8_t>& reference, const std::vector<uint8_t>& candidate) const;
  // "stats.moments on f16 (70000 elements)"
  const std::string& description() const { return description_; }
  // How a passing candidate relates to the reference: "equal to" it, or within the op's bound (SSB).
  std::string agreement() const { return ssb_sums_ ? "within the op's bound of the CPU reference" : "equal to the CPU reference"; }

 private:
  friend std::unique_ptr<KnownAnswer> make_known_answer(const OpRequest& request);
  tm_op op_ = TM_OP_INVALID;
  tm_dtype dtype_ = TM_DTYPE_INVALID;
  uint64_t elements_ = 0;
  std::vector<uint8_t> input_;
  std::vector<uint8_t> params_;          // the op's params struct; its pointers point into the vectors below
  std::vector<double> doubles_;
  std::vector<uint64_t> u64s_;
  std::vector<uint32_t> u32s_;
  std::vector<uint8_t> initial_output_;
  bool float32_output_ = false;
  bool ssb_sums_ = false;  // TM_OP_STEM_SSB_OVERLAP's float64 sums: compared within the op's bound
  std::vector<tm_ssb_chi_term_v1> chi_terms_;
  std::string description_;
};

// The case for request's op and dtype (its format for a format op), or null when the op has no case yet
// (a ggml format needs request.format_block_elements and format_block_bytes).
std::unique_ptr<KnownAnswer> make_known_answer(const OpRequest& request);

}  // namespace tmorph
