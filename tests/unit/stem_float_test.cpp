// Float frames (EMPAD): the stem ops' float64 sums in the contract's sequential order, whatever the thread count or
// batch split, and the EMPAD sidecar parser's fields and refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ops/kernel_call.h"
#include "stem/formats/empad_xml.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"
#include "test_support.h"

namespace tmorph {
namespace {

void run_cpu_float(tm_op op, DType dtype, const void* in, uint64_t n, const void* params, uint64_t params_size, void* out,
                   uint64_t out_size, unsigned threads) {
  auto reg = test::make_registry(false);
  const CostModel costs;
  const Constraints constraints;
  Planner planner(*reg, costs, constraints);
  OpRequest r;
  r.op = op, r.dtype = dtype, r.elements = n, r.bytes = n * dtype_size(dtype);
  const Placement p = planner.place(r);
  ASSERT_EQ(p.backend, "cpu");
  run_placed_kernel(p, op, {dtype, in, n, params, params_size, out, out_size, threads});
}

// Values whose float64 sum depends on the order they are added in (large and tiny, both signs).
std::vector<float> awkward_frames(uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = u(rng) * (i % 7 == 0 ? 3.0e7f : i % 5 == 0 ? 1.0e-3f : 1.0f);
  return v;
}

TEST(StemFloatOps, FrameSumsAreSequentialFloat64SumsForEveryThreadCount) {
  const uint64_t rows = 6, cols = 11, pixels = rows * cols, frames = 9;
  const auto v = awkward_frames(frames * pixels, 5);
  const std::vector<uint32_t> a = {0, 3, 4, 5, 40, 65}, b = {1, 2, 12, 13, 14, 30};
  std::vector<uint32_t> lists(a);
  lists.insert(lists.end(), b.begin(), b.end());
  const std::vector<uint64_t> offsets = {0, a.size(), a.size() + b.size()};
  for (const uint32_t com_list : {TM_STEM_ALL_PIXELS, 1u})
    for (unsigned threads : {1u, 2u, 4u}) {
      const tm_stem_frame_sums_params_v1 params{pixels, static_cast<uint32_t>(cols), 2, offsets.data(), lists.data(), com_list, 0};
      std::vector<double> out(frames * 6, -1.0);
      run_cpu_float(TM_OP_STEM_FRAME_SUMS, DType::F32, v.data(), frames * pixels, &params, sizeof params, out.data(), out.size() * 8, threads);
      for (uint64_t f = 0; f < frames; ++f) {
        const float* px = v.data() + f * pixels;
        double total = 0, w = 0, sr = 0, sc = 0, sa = 0, sb = 0;
        for (uint64_t i = 0; i < pixels; ++i) total += px[i];
        for (uint32_t i : a) sa += px[i];
        for (uint32_t i : b) sb += px[i];
        for (uint64_t i = 0; i < pixels; ++i)
          if (com_list == TM_STEM_ALL_PIXELS || std::find(b.begin(), b.end(), i) != b.end())
            w += px[i], sr += static_cast<double>(i / cols) * px[i], sc += static_cast<double>(i % cols) * px[i];
        const double* o = out.data() + f * 6;
        // Bit equality: the same additions in the same order.
        EXPECT_EQ(std::memcmp(&o[0], &total, 8), 0) << f;
        EXPECT_EQ(std::memcmp(&o[1], &w, 8), 0) << f;
        EXPECT_EQ(std::memcmp(&o[2], &sr, 8), 0) << f;
        EXPECT_EQ(std::memcmp(&o[3], &sc, 8), 0) << f;
        EXPECT_EQ(std::memcmp(&o[4], &sa, 8), 0) << f;
        EXPECT_EQ(std::memcmp(&o[5], &sb, 8), 0) << f;
      }
      tm_stem_frame_sums_params_v1 only = params;
      only.flags = TM_STEM_LISTS_ONLY;
      std::vector<double> lo(frames * 6, -1.0);
      run_cpu_float(TM_OP_STEM_FRAME_SUMS, DType::F32, v.data(), frames * pixels, &only, sizeof only, lo.data(), lo.size() * 8, threads);
      for (uint64_t f = 0; f < frames; ++f) {
        EXPECT_EQ(lo[f * 6], 0.0);
        EXPECT_EQ(lo[f * 6 + 4], out[f * 6 + 4]);
        EXPECT_EQ(lo[f * 6 + 5], out[f * 6 + 5]);
      }
    }
}

TEST(StemFloatOps, PatternReduceAddsFramesInOrderAcrossCalls) {
  const uint64_t pixels = 150, frames = 7;
  auto v = awkward_frames(frames * pixels, 9);
  v[3 * pixels + 2] = std::numeric_limits<float>::quiet_NaN();  // ignored by the maximum
  const tm_stem_pattern_params_v1 params{pixels};
  std::vector<double> out(2 * pixels, 0.0);
  for (uint64_t i = 0; i < pixels; ++i) out[pixels + i] = -std::numeric_limits<double>::infinity();
  run_cpu_float(TM_OP_STEM_PATTERN_REDUCE, DType::F32, v.data(), 5 * pixels, &params, sizeof params, out.data(), out.size() * 8, 3);
  run_cpu_float(TM_OP_STEM_PATTERN_REDUCE, DType::F32, v.data() + 5 * pixels, 2 * pixels, &params, sizeof params, out.data(),
                out.size() * 8, 1);
  for (uint64_t i = 0; i < pixels; ++i) {
    double s = 0, m = -std::numeric_limits<double>::infinity();
    for (uint64_t f = 0; f < frames; ++f) {
      const double x = v[f * pixels + i];
      s += x;
      if (x > m) m = x;
    }
    if (i == 2) ASSERT_TRUE(std::isnan(s));
    else ASSERT_EQ(std::memcmp(&out[i], &s, 8), 0) << i;
    ASSERT_EQ(out[pixels + i], m) << i;
  }
}

std::string refusal(const std::string& xml) {
  try {
    parse_empad_xml(reinterpret_cast<const uint8_t*>(xml.data()), xml.size(), "t.xml");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return e.what();
  }
  return "no error";
}

TEST(EmpadXml, ReadsTheRawFileTheScanAndEveryField) {
  const std::string xml =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE root>\n<!-- c -->\n<root>\n <raw_file filename=\"D:\\data\\scan_x4_y3.raw\"/>\n"
      " <pix_x>'4'</pix_x><pix_y> 3 </pix_y>\n <scan_parameters mode='acquire'><series_count>12</series_count></scan_parameters>\n"
      " <note>a &lt;b&gt; &#x41;&#66; <![CDATA[<raw>]]></note>\n</root>\n";
  const EmpadXml x = parse_empad_xml(reinterpret_cast<const uint8_t*>(xml.data()), xml.size(), "t.xml");
  EXPECT_EQ(x.raw_filename, "D:\\data\\scan_x4_y3.raw");
  EXPECT_EQ(x.scan_x, 4u);
  EXPECT_EQ(x.scan_y, 3u);
  EXPECT_EQ(x.scan_x_path, "root/pix_x");
  EXPECT_EQ(x.series_count, 12u);
  EXPECT_EQ(x.metadata["root/scan_parameters@mode"]["value"], "acquire");
  EXPECT_EQ(x.metadata["root/note"]["value"], "a <b> AB <raw>");
  const std::string res = "<root><raw_file filename='r.raw'/><scan_parameters><scan_resolution_x>5</scan_resolution_x>"
                          "<scan_resolution_y>2</scan_resolution_y></scan_parameters></root>";
  const EmpadXml y = parse_empad_xml(reinterpret_cast<const uint8_t*>(res.data()), res.size(), "t.xml");
  EXPECT_EQ(y.scan_x, 5u);
  EXPECT_EQ(y.scan_y_path, "root/scan_parameters/scan_resolution_y");
}

TEST(EmpadXml, RefusesMalformedAndLyingSidecarsNamingTheOffset) {
  EXPECT_NE(refusal("<root><raw_file filename=\"r.raw\"/><pix_x>2</pix_y></root>").find("byte 42: expected </pix_x>"), std::string::npos);
  EXPECT_NE(refusal("<root><raw_file filename=\"r.raw\">").find("expected </raw_file>"), std::string::npos);
  EXPECT_NE(refusal("<root a=1/>").find("quoted value"), std::string::npos);
  EXPECT_NE(refusal("<root><raw_file filename=\"r.raw\"/></root>").find("no scan shape"), std::string::npos);
  EXPECT_NE(refusal("<root><pix_x>1</pix_x><pix_y>1</pix_y></root>").find("root/raw_file@filename"), std::string::npos);
  EXPECT_NE(refusal("<root><raw_file filename='r'/><pix_x>0</pix_x><pix_y>1</pix_y></root>").find("root/pix_x is '0'"),
            std::string::npos);
  EXPECT_NE(refusal("<root><raw_file filename='r'/><pix_x>99999999999</pix_x><pix_y>1</pix_y></root>").find("below 2^32"),
            std::string::npos);
  EXPECT_NE(refusal("<data/>").find("root element <data>"), std::string::npos);
  EXPECT_NE(refusal("<root/><root/>").find("nothing after the root"), std::string::npos);
  EXPECT_NE(refusal("<!DOCTYPE root [<!ENTITY x 'y'>]><root/>").find("internal subset"), std::string::npos);
  EXPECT_NE(refusal("<root>&#0;</root>").find("Unicode scalar"), std::string::npos);
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "<a>";
  EXPECT_NE(refusal(deep).find("nested more than 64"), std::string::npos);
  std::string big(kEmpadXmlMaxBytes + 1, ' ');
  EXPECT_NE(refusal(big).find("expected below"), std::string::npos);
}

}  // namespace
}  // namespace tmorph
