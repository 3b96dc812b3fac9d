// Shared by the stem.compact_sums tests (stem_resident_test.cpp on the CPU, vulkan_parity_test.cpp on Vulkan): random
// electron-counted frames (sparse, some all zero) compacted into a CompactFrames, and the detectors the sums are
// asked for, so every backend's op is held to the CPU resident path on the same copies.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "stem/products/virtual_detector.h"
#include "stem/resident/compact_frames.h"
#include "stem/resident/device_copy.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/placement.h"
#include "tensormorph/backend_registry.h"

#include <gtest/gtest.h>
#include <string>
#include <utility>

namespace tmorph::test {

struct CompactCase {
  std::unique_ptr<CompactFrames> frames;
  std::vector<std::vector<uint32_t>> detectors;
  std::vector<uint32_t> com;
  std::vector<uint64_t> positions;
};

// The copies the parity tests compare on: pixel and radial order, uint16 keys (one page) and uint32 keys
// (frames of more than 65,536 pixels), a dense U8 copy and a sparse U32 one.
struct CompactShape {
  uint64_t count, rows, cols;
  DType dt;
  double density;
  bool radial;
};
inline std::vector<CompactShape> compact_shapes() {
  return {{29, 13, 11, DType::U16, 0.3, false}, {31, 13, 11, DType::U8, 0.6, true}, {30, 250, 250, DType::U16, 0.55, true},
          {9, 260, 256, DType::U32, 0.05, false}};
}

// `count` frames of rows x cols values of dtype (U8, U16 or U32): each pixel non-zero with probability `density`
// (counts 1..max), every 5th frame all zero; radially ordered about an off-grid centre when `radial`.
inline CompactCase compact_case(uint64_t count, uint64_t rows, uint64_t cols, DType dt, double density, bool radial, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t pixels = rows * cols, width = dtype_size(dt);
  const uint32_t max = dt == DType::U8 ? 255u : dt == DType::U16 ? 65535u : 100000u;
  std::vector<uint8_t> raw(count * pixels * width, 0);
  std::bernoulli_distribution hit(density);
  std::uniform_int_distribution<uint32_t> value(1, max), small(1, 3);
  for (uint64_t f = 0; f < count; ++f) {
    if (f % 5 == 4) continue;
    for (uint64_t p = 0; p < pixels; ++p) {
      if (!hit(rng)) continue;
      const uint32_t v = (rng() % 4 == 0) ? value(rng) : small(rng);
      std::memcpy(raw.data() + (f * pixels + p) * width, &v, width);  // little-endian: the low bytes
    }
  }
  CompactCase c;
  c.frames = std::make_unique<CompactFrames>(count, rows, cols);
  c.frames->append(raw.data(), count / 2, dt, 2);
  c.frames->append(raw.data() + count / 2 * pixels * width, count - count / 2, dt, 3);
  const double cr = static_cast<double>(rows) / 2 - 0.3, cc = static_cast<double>(cols) / 2 + 0.2;
  if (radial) c.frames->order_radially(cr, cc, 2);
  std::vector<uint32_t> scattered;
  for (uint32_t p = static_cast<uint32_t>(seed % 7); p < pixels; p += 7 + p % 5) scattered.push_back(p);
  c.detectors = {annulus_pixels(rows, cols, cr, cc, 0, static_cast<double>(std::min(rows, cols)) / 6),
                 annulus_pixels(rows, cols, cr, cc, static_cast<double>(std::min(rows, cols)) / 5, static_cast<double>(std::min(rows, cols)) / 2),
                 scattered};
  for (uint32_t p = 1; p < pixels; p += 3) c.com.push_back(p);
  c.positions.resize(count);
  std::iota(c.positions.begin(), c.positions.end(), 0);
  std::shuffle(c.positions.begin(), c.positions.end(), rng);
  c.positions.push_back(c.positions.front());  // a position twice
  return c;
}

// Holds `got` (stem.compact_sums on some backend) to `want` (CompactFrames::sums), field by field.
inline void expect_same_sums(const CompactFrames::Sums& want, const CompactFrames::Sums& got, const std::string& what) {
  EXPECT_EQ(got.totals, want.totals) << what;
  EXPECT_EQ(got.com_weight, want.com_weight) << what;
  EXPECT_EQ(got.com_row, want.com_row) << what;
  EXPECT_EQ(got.com_col, want.com_col) << what;
  ASSERT_EQ(got.images.size(), want.images.size()) << what;
  for (size_t d = 0; d < want.images.size(); ++d) EXPECT_EQ(got.images[d], want.images[d]) << what << ", detector " << d;
}

// Runs one stem.compact_sums call on the placement's backend as the ABI sees it; the status and the message.
inline std::pair<tm_status, std::string> run_compact_call(const Placement& at, const CompactImage& image, tm_stem_compact_sums_params_v1 p,
                                                          uint64_t params_size, uint64_t element_count, uint64_t output_values,
                                                          const uint8_t* input = nullptr) {
  std::vector<uint64_t> out(output_values, 0);
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = TM_OP_STEM_COMPACT_SUMS;
  call.kernel_index = at.kernel_index;
  call.device_index = at.device_index;
  call.dtype = TM_DTYPE_U8;
  call.input = input ? input : image.bytes.get();
  call.element_count = element_count;
  call.params = &p;
  call.params_size = params_size;
  call.output = out.data();
  call.output_size = out.size() * 8;
  call.threads = 2;
  tm_message msg{};
  const tm_status st = at.backend_ref->table->run(&call, &msg);
  msg.text[sizeof msg.text - 1] = 0;
  return {st, msg.text};
}

// Every malformed call of the contract a backend must refuse with TM_ERR_INVALID_ARGUMENT and a message naming the
// field: on a well-formed image of `c` (at least two positions, pixel order, uint16 keys).
inline void expect_malformed_calls_refused(const Placement& at, const CompactCase& c) {
  const CompactImage image = compact_image(*c.frames);
  ASSERT_EQ(image.key_bytes, 2u);
  const std::vector<uint32_t> positions = {0, 1};
  std::vector<uint64_t> lists(c.frames->rows() * c.frames->cols(), 1);
  tm_stem_compact_sums_params_v1 good{};
  good.pixels_per_frame = c.frames->rows() * c.frames->cols();
  good.cols = static_cast<uint32_t>(c.frames->cols());
  good.key_bytes = 2;
  good.page_count = static_cast<uint32_t>(image.page_first.size() - 1);
  good.list_count = 1;
  good.page_first = image.page_first.data();
  good.positions = positions.data();
  good.position_count = positions.size();
  good.key_lists = lists.data();
  good.pixel_of_key = nullptr;
  good.com_list = TM_STEM_ALL_PIXELS;
  good.flags = 0;
  const uint64_t values = 2 * (TM_STEM_FRAME_SUMS_FIXED + 1);
  const auto expect_refused = [&](tm_stem_compact_sums_params_v1 p, uint64_t params_size, uint64_t elements, uint64_t out_values,
                                  const std::string& names, const uint8_t* input = nullptr) {
    const auto [st, msg] = run_compact_call(at, image, p, params_size, elements, out_values, input);
    EXPECT_EQ(st, TM_ERR_INVALID_ARGUMENT) << at.backend << ": " << names << ": " << msg;
    EXPECT_NE(msg.find(names), std::string::npos) << at.backend << ": " << msg;
  };
  EXPECT_EQ(run_compact_call(at, image, good, sizeof good, image.size, values).first, TM_OK) << at.backend;
  expect_refused(good, sizeof good - 8, image.size, values, "params must be");
  auto p = good;
  p.key_bytes = 3;
  expect_refused(p, sizeof p, image.size, values, "key_bytes");
  expect_refused(good, sizeof good, uint64_t{TM_STEM_COMPACT_PAGE_BYTES} * good.page_count + 1, values, "element_count");
  const std::vector<uint32_t> outside = {0, static_cast<uint32_t>(c.frames->appended())};
  p = good;
  p.positions = outside.data();
  expect_refused(p, sizeof p, image.size, values, "positions[1]");
  expect_refused(good, sizeof good, image.size, values - 1, "output_size");
  p = good;
  p.list_count = 65;
  expect_refused(p, sizeof p, image.size, 2 * (TM_STEM_FRAME_SUMS_FIXED + 65), "list_count");
  p = good;
  p.com_list = 1;
  expect_refused(p, sizeof p, image.size, values, "com_list");
  const std::vector<uint32_t> past_the_frame = {0, static_cast<uint32_t>(good.pixels_per_frame) + 1};
  p = good;
  p.list_ranges = past_the_frame.data();
  expect_refused(p, sizeof p, image.size, values, "list_ranges");
  // Page words that break the contract: an entry offset past the page's entries, a key outside the frame.
  std::vector<uint8_t> bad(image.bytes.get(), image.bytes.get() + image.size);
  uint32_t e;
  std::memcpy(&e, bad.data() + 4, 4);
  const uint32_t past = e + 1;
  std::memcpy(bad.data() + 12, &past, 4);  // o[1] of page 0
  expect_refused(good, sizeof good, image.size, values, "page 0", bad.data());
  bad.assign(image.bytes.get(), image.bytes.get() + image.size);
  uint32_t n;
  std::memcpy(&n, bad.data(), 4);
  uint32_t first_entries;
  std::memcpy(&first_entries, bad.data() + 12, 4);
  ASSERT_GT(first_entries, 0u) << "position 0 of the case has entries";
  const uint16_t key = static_cast<uint16_t>(std::min<uint64_t>(good.pixels_per_frame, 65535));
  std::memcpy(bad.data() + (3 + n) * 4, &key, 2);  // position 0's first key
  expect_refused(good, sizeof good, image.size, values, "page 0", bad.data());
}

}  // namespace tmorph::test
