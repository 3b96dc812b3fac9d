#include "checkpoint/packed_dequantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>

#include "support/thread_pool.h"
#include "ops/dequantize.h"
#include "ops/kernel_call.h"
#include "ops/streamed_stats.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

// Values per kernel call: bounds what one call writes whatever the tensor size.
constexpr uint64_t kValuesPerCall = uint64_t{1} << 24;
// Values decoded at a time for statistics (about 4 MiB of float32).
constexpr uint64_t kPieceValues = uint64_t{1} << 20;

[[noreturn]] void bad(const Checkpoint& c, const PackedPart& p, const std::string& what) {
  throw Error(ErrorKind::BadInput, c.files.at(p.file_index)->path() + ": tensor '" + p.name + "': " + what);
}

// The part's bytes, checked to lie inside its file and to hold its shape.
const uint8_t* part_data(const Checkpoint& c, const PackedPart& p) {
  if (p.file_index >= c.files.size()) throw Error(ErrorKind::BadInput, "packed part '" + p.name + "' names a file the checkpoint lacks");
  uint64_t elements = 1;
  for (uint64_t d : p.shape) elements *= d;
  const uint64_t size = c.files[p.file_index]->size();
  if (p.bytes != elements * dtype_size(p.dtype) || p.file_offset > size || p.bytes > size - p.file_offset)
    bad(c, p, "expected " + std::to_string(elements * dtype_size(p.dtype)) + " bytes at offset " + std::to_string(p.file_offset) +
                  " inside the file");
  return c.data(p);
}

const PackedPart& need(const Checkpoint& c, const PackedTensor& p, const char* role) {
  const PackedPart* part = p.part(role);
  if (!part) throw Error(ErrorKind::BadInput, "packed " + p.variant + " tensor lacks its '" + role + "' part");
  part_data(c, *part);
  return *part;
}

// A float part widened exactly to float32 (f16, bf16 and f32 values are all floats).
std::vector<float> widened(const Checkpoint& c, const PackedPart& part) {
  const uint8_t* data = part_data(c, part);
  const size_t width = dtype_size(part.dtype);
  std::vector<float> out(part.bytes / width);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(element_to_double(part.dtype, data + i * width));
  return out;
}

}  // namespace

Placement place_packed_dequantize(const Planner& planner, const PackedTensor& p, uint64_t elements) {
  OpRequest r;
  r.op = TM_OP_DEQUANTIZE_PACKED;
  r.dtype = DType::F32;
  r.elements = elements;
  for (const auto& part : p.parts) r.bytes += part.bytes;
  r.format_id = p.scheme;
  r.format_name = p.variant;
  return planner.place(r);
}

PackedDecoder::PackedDecoder(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner) {
  if (!t.packed()) throw Error(ErrorKind::Internal, t.name + " is not a packed tensor");
  if (!t.unavailable_reason.empty()) throw Error(ErrorKind::Unavailable, t.name + " (" + t.stored_type + "): " + t.unavailable_reason);
  const PackedTensor& p = *t.packed();
  placement_ = place_packed_dequantize(planner, p, t.elements);
  params_.scheme = p.scheme;
  params_.bits = p.bits;
  params_.rows = p.rows;
  params_.cols = p.cols;
  codes_ = part_data(c, p.parts.at(0));
  switch (p.scheme) {
    case TM_PACKED_FP8:
      params_.code_dtype = static_cast<uint32_t>(p.code_dtype);
      params_.block_rows = p.block_rows, params_.block_cols = p.block_cols;
      scales_ = widened(c, p.parts.at(1));
      break;
    case TM_PACKED_MXFP4:
      params_.exponents = part_data(c, need(c, p, "scales"));
      break;
    case TM_PACKED_BNB4: {
      params_.block_cols = p.block_cols;
      code_values_ = widened(c, need(c, p, "quant_map"));  // an aligned copy: parts may lie at any offset
      params_.code_values = code_values_.data();
      const PackedPart& absmax = need(c, p, "absmax");
      if (!p.nested_block) {
        scales_ = widened(c, absmax);
      } else {  // double quantization: absmax = nested_quant_map[code] * nested_absmax[b / nested_block] + offset
        const uint8_t* codes = part_data(c, absmax);
        const std::vector<float> nested = widened(c, need(c, p, "nested_absmax"));
        const std::vector<float> map = widened(c, need(c, p, "nested_quant_map"));
        scales_.resize(absmax.bytes);
        for (size_t b = 0; b < scales_.size(); ++b) scales_[b] = map[codes[b]] * nested.at(b / p.nested_block) + p.nested_offset;
      }
      break;
    }
    case TM_PACKED_GPTQ:
    case TM_PACKED_AWQ: {
      params_.groups = p.groups;
      params_.zero_offset = p.zero_offset;
      params_.block_cols = p.block_cols;
      const PackedPart& qzeros = need(c, p, "qzeros");  // copied: parts may lie at any offset
      zeros_.resize(qzeros.bytes / 4);
      std::memcpy(zeros_.data(), part_data(c, qzeros), zeros_.size() * 4);
      params_.zeros = zeros_.data();
      scales_ = widened(c, need(c, p, "scales"));
      if (p.scheme == TM_PACKED_AWQ) break;
      if (const PackedPart* g = p.part("g_idx")) {
        const uint8_t* data = part_data(c, *g);
        group_index_.resize(g->bytes / 4);
        std::memcpy(group_index_.data(), data, g->bytes);
        for (size_t i = 0; i < group_index_.size(); ++i)
          if (group_index_[i] < 0 || static_cast<uint64_t>(group_index_[i]) >= p.groups)
            bad(c, *g, "entry " + std::to_string(i) + " is group " + std::to_string(group_index_[i]) + "; the scales hold groups 0.." +
                           std::to_string(p.groups - 1));
      } else {
        group_index_.resize(p.cols);
        for (uint64_t i = 0; i < p.cols; ++i) group_index_[i] = static_cast<int32_t>(i / p.group_size);
      }
      params_.group_index = group_index_.data();
      break;
    }
    default:
      throw Error(ErrorKind::Unavailable, t.name + ": unknown packed scheme");
  }
  params_.scales = scales_.empty() ? nullptr : scales_.data();
}

void PackedDecoder::decode_rows(uint64_t first, uint64_t count, float* dst, unsigned threads) const {
  if (first + count > params_.rows) throw Error(ErrorKind::Internal, "dequantize.packed: rows beyond the matrix");
  // Whole rows per call (AWQ: whole words of 8 rows), at most about kValuesPerCall values.
  uint64_t step = std::max<uint64_t>(1, kValuesPerCall / std::max<uint64_t>(1, params_.cols));
  if (params_.scheme == TM_PACKED_AWQ) step = (step + 7) / 8 * 8;
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min(step, count - done);
    tm_dequantize_packed_params_v1 call = params_;
    call.row_first = first + done;
    run_placed_kernel(placement_, TM_OP_DEQUANTIZE_PACKED,
                      {DType::F32, codes_, n * params_.cols, &call, sizeof call, dst + done * params_.cols, n * params_.cols * sizeof(float),
                       threads});
    done += n;
  }
}

StatsResult compute_packed_stats(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                 const StatsOptions& options) {
  const PackedDecoder decoder(c, t, planner);
  const unsigned threads = options.threads ? options.threads : default_thread_count();
  const uint64_t cols = std::max<uint64_t>(1, decoder.cols());
  const uint64_t rows = std::max<uint64_t>(8, kPieceValues / cols / 8 * 8);  // whole AWQ words of rows
  std::vector<float> piece(std::min(decoder.rows(), rows) * cols);
  return streamed_float_stats(
      t.elements, decoder.placement(),
      [&](const FloatSink& sink) {
        for (uint64_t first = 0; first < decoder.rows(); first += rows) {
          const uint64_t n = std::min(rows, decoder.rows() - first);
          decoder.decode_rows(first, n, piece.data(), threads);
          sink(piece.data(), n * cols);
        }
      },
      planner, options);
}

namespace {

// Adds the count of every code of t's code part to counts (2^bits entries) and the saturated ones.
void count_codes(const PackedDecoder& d, const std::vector<bool>& saturating, std::vector<uint64_t>& counts, uint64_t& saturated) {
  const auto& p = d.params();
  const uint8_t* codes = d.codes();
  const uint64_t n = p.rows * p.cols;
  switch (p.scheme) {
    case TM_PACKED_FP8:
      for (uint64_t i = 0; i < n; ++i) ++counts[codes[i]];
      break;
    case TM_PACKED_MXFP4:
    case TM_PACKED_BNB4:
      for (uint64_t i = 0; i < n / 2; ++i) ++counts[codes[i] & 0x0f], ++counts[codes[i] >> 4];
      if (n % 2) ++counts[p.scheme == TM_PACKED_BNB4 ? codes[n / 2] >> 4 : codes[n / 2] & 0x0f];
      break;
    case TM_PACKED_GPTQ:
      if (p.bits == 3) {  // bit streams crossing words (op_contracts.h): count code by code
        const auto* words = reinterpret_cast<const int32_t*>(codes);
        for (uint64_t o = 0; o < p.rows; ++o)
          for (uint64_t i = 0; i < p.cols; ++i) ++counts[tm_gptq_field(words + o, p.rows, i, 3)];
        break;
      }
      [[fallthrough]];
    case TM_PACKED_AWQ: {  // every word holds 32 / bits codes, whatever order they are in
      const uint32_t mask = (1u << p.bits) - 1;
      for (uint64_t w = 0; w < n * p.bits / 32; ++w) {
        uint32_t word;
        std::memcpy(&word, codes + w * 4, 4);
        for (uint32_t j = 0; j < 32 / p.bits; ++j) ++counts[(word >> (j * p.bits)) & mask];
      }
      break;
    }
    default:
      break;
  }
  for (size_t code = 0; code < counts.size(); ++code)
    if (saturating[code]) saturated += counts[code];
}

}  // namespace

QuantizationStats compute_packed_quantization_stats(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                                    const StatsOptions& options) {
  const PackedDecoder d(c, t, planner);
  const PackedTensor& p = *t.packed();
  QuantizationStats q;
  q.placement.push_back(d.placement());
  q.bits_per_weight = t.elements ? 8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.elements) : 0;
  std::vector<float> scales = d.scales();
  if (p.scheme == TM_PACKED_MXFP4) {
    const PackedPart& e = need(c, p, "scales");
    const uint8_t* bytes = part_data(c, e);
    scales.resize(e.bytes);
    for (size_t i = 0; i < scales.size(); ++i)
      scales[i] = bytes[i] == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(bytes[i]) - 127);
  }
  if (!scales.empty()) {
    q.scales = compute_stats(scales.data(), DType::F32, scales.size(), planner, options);
    q.placement.insert(q.placement.end(), q.scales->placement.begin(), q.scales->placement.end());
  }
  if (p.scheme == TM_PACKED_GPTQ || p.scheme == TM_PACKED_AWQ) {
    // The value of code 0 in each (group, output): scale * (0 - zero), the group's minimum as Q4_1's min.
    const auto& kp = d.params();
    const uint32_t per_word = 32 / kp.bits, mask = (1u << kp.bits) - 1;
    static constexpr uint32_t kAwqNibbleOf[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // output o % 8 -> nibble
    std::vector<float> mins(kp.groups * kp.rows);
    for (uint64_t g = 0; g < kp.groups; ++g)
      for (uint64_t o = 0; o < kp.rows; ++o) {
        int32_t zero;
        if (p.scheme == TM_PACKED_AWQ) {
          const auto word = static_cast<uint32_t>(kp.zeros[g * (kp.rows / per_word) + o / per_word]);
          zero = static_cast<int32_t>((word >> (kAwqNibbleOf[o % 8] * kp.bits)) & mask);
        } else {  // GPTQ: row g of qzeros is the outputs' bit stream
          zero = static_cast<int32_t>(tm_gptq_field(kp.zeros + g * (kp.rows * kp.bits / 32), 1, o, kp.bits)) + kp.zero_offset;
        }
        mins[g * kp.rows + o] = kp.scales[g * kp.rows + o] * static_cast<float>(-zero);
      }
    q.mins = compute_stats(mins.data(), DType::F32, mins.size(), planner, options);
  }
  q.code_bits = p.scheme == TM_PACKED_FP8 ? 8 : p.bits;
  const size_t slots = size_t{1} << q.code_bits;
  std::vector<bool> saturating(slots, false);
  switch (p.scheme) {
    case TM_PACKED_FP8: {  // the codes of the largest finite magnitude, either sign
      const uint8_t top = p.code_dtype == DType::F8_E5M2 ? 0x7b : 0x7e;
      saturating[top] = saturating[top | 0x80] = true;
      break;
    }
    case TM_PACKED_MXFP4: saturating[7] = saturating[15] = true; break;
    case TM_PACKED_BNB4: {
      const float* map = d.params().code_values;
      float top = 0;
      for (size_t k = 0; k < 16; ++k) top = std::max(top, std::fabs(map[k]));
      for (size_t k = 0; k < 16; ++k) saturating[k] = std::fabs(map[k]) == top;
      break;
    }
    default: saturating.front() = saturating.back() = true; break;
  }
  q.code_counts.assign(slots, 0);
  count_codes(d, saturating, q.code_counts, q.saturated);
  for (auto n : q.code_counts) q.codes += n;
  return q;
}

}  // namespace tmorph
