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

// The data of one known-answer case, filled by the op's builder (compute/op_table.h's row): the input, the
// params struct's bytes (its pointers point into the vectors below, which therefore never reallocate once the
// params are written) and the output's initial bytes.
struct KnownAnswerCase {
  tm_op op = TM_OP_INVALID;
  tm_dtype dtype = TM_DTYPE_INVALID;
  uint64_t elements = 0;
  std::vector<uint8_t> input;
  std::vector<uint8_t> params;
  std::vector<double> doubles;
  std::vector<uint64_t> u64s;
  std::vector<uint32_t> u32s;
  std::vector<uint8_t> initial_output;
  bool float32_output = false;  // compared as float32 values (any two NaNs equal)
  bool ssb_sums = false;        // TM_OP_STEM_SSB_OVERLAP's float64 sums: compared within the op's bound
  std::vector<tm_ssb_chi_term_v1> chi_terms;
};

class KnownAnswer {
 public:
  // A call of kernel_index on device_index over this case, writing to output (output_size() bytes,
  // initialised with initial_output()).
  tm_kernel_call_v1 call(uint32_t kernel_index, uint32_t device_index, void* output) const;
  uint64_t output_size() const { return c_.initial_output.size(); }
  const std::vector<uint8_t>& initial_output() const { return c_.initial_output; }
  // Empty when a and b agree under the op's exact contract; otherwise where they first differ. Outputs
  // of float32 values (dequantization) treat any two NaNs as equal (payloads are not part of it).
  std::string compare(const std::vector<uint8_t>& reference, const std::vector<uint8_t>& candidate) const;
  // "stats.moments on f16 (70000 elements)"
  const std::string& description() const { return description_; }
  // How a passing candidate relates to the reference: "equal to" it, or within the op's bound (SSB).
  std::string agreement() const { return c_.ssb_sums ? "within the op's bound of the CPU reference" : "equal to the CPU reference"; }

 private:
  friend std::unique_ptr<KnownAnswer> make_known_answer(const OpRequest& request);
  KnownAnswerCase c_;
  std::string description_;
};

// The case for request's op and dtype (its format for a format op), built by the op's row of op_table.h, or
// null when the op has no case (yet, or for this dtype; a ggml format needs request.format_block_elements and
// format_block_bytes).
std::unique_ptr<KnownAnswer> make_known_answer(const OpRequest& request);

// The builders of the op table's rows: fill `k` for request's dtype or format from the deterministic `seed`;
// false when the op has no case for it.
namespace known_answer_cases {
bool stats_moments(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool stats_histogram(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool stats_bitpattern_histogram(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool stats_quantiles(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool stem_frames(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);  // stem.frame_sums, stem.pattern_reduce
bool display_colorize(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool dequantize_ggml(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool quant_moments(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool decode_bitshuffle_lz4(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool stem_ssb_overlap(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool lod_tile_stats(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
bool stem_compact_sums(KnownAnswerCase& k, const OpRequest& req, uint64_t seed);
}  // namespace known_answer_cases

}  // namespace tmorph
