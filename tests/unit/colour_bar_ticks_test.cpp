// Colour-bar ticks and labels (render/colour_bar_ticks.h): nice values per transform, each placed by the display
// kernels' own normalisation, and the labelled image keeping the cells and the bar as cell_image.h draws them.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "display/colormap.h"
#include "lod/cells.h"
#include "render/colour_bar_ticks.h"
#include "tensormorph/planner.h"

namespace tmorph {
namespace {

DisplayParams params(double lo, double hi, Transform t) {
  DisplayParams p;
  p.limits = {lo, hi};
  p.transform = t;
  p.colormap = &colormap("viridis");
  return p;
}

std::vector<std::string> labels(const std::vector<ColourBarTick>& ticks) {
  std::vector<std::string> out;
  for (const auto& t : ticks) out.push_back(t.label);
  return out;
}

TEST(ColourBarTicks, LinearTicksAreNiceValuesInsideTheLimits) {
  const auto ticks = colour_bar_ticks(params(-0.05, 0.05, Transform::Linear));
  EXPECT_EQ(labels(ticks), (std::vector<std::string>{"-0.04", "-0.02", "0", "0.02", "0.04"}));
  const Normalizer n({-0.05, 0.05}, Transform::Linear, kDefaultLogFloor);
  for (const auto& t : ticks) EXPECT_DOUBLE_EQ(t.position, n(t.value)) << t.label;
  // Seven steps of 200 are more than six ticks: every other one is kept.
  EXPECT_EQ(labels(colour_bar_ticks(params(0, 1234, Transform::Linear))),
            (std::vector<std::string>{"0", "400", "800", "1200"}));
}

TEST(ColourBarTicks, LogTicksArePowersOfTenOrNiceExponents) {
  EXPECT_EQ(labels(colour_bar_ticks(params(1e-3, 100, Transform::Log))),
            (std::vector<std::string>{"0.001", "0.01", "0.1", "1", "10", "100"}));
  // No power of ten between 2 and 8: nice steps of the exponent, labelled with the value (3 digits).
  const auto narrow = colour_bar_ticks(params(2, 8, Transform::Log));
  ASSERT_GE(narrow.size(), 2u);
  for (const auto& t : narrow) {
    EXPECT_GE(t.value, 2);
    EXPECT_LE(t.value, 8);
  }
}

TEST(ColourBarTicks, SignedLogAndCollapsedRanges) {
  const auto s = colour_bar_ticks(params(-100, 100, Transform::SignedLog));
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[2].label, "0");
  EXPECT_DOUBLE_EQ(s[2].position, 0.5);
  EXPECT_EQ(s.front().label, "-100");
  const auto one = colour_bar_ticks(params(3, 3, Transform::Linear));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].label, "3");
  EXPECT_DOUBLE_EQ(one[0].position, 0.5);
}

TEST(ColourBarTicks, LabelledImageKeepsCellsAndBarAndGrowsToTheRight) {
  CellImage img;
  img.params = params(-0.05, 0.05, Transform::Linear);
  img.cells_width = 40, img.cells_height = 128;
  img.image = RgbaImage(40 + kColourBarGap + kColourBarWidth, 128);
  for (size_t i = 0; i < img.image.pixels.size(); ++i) img.image.pixels[i] = static_cast<uint8_t>(i * 7);
  const RgbaImage out = with_colour_bar_labels(img, "MEAN");
  ASSERT_GT(out.width, img.image.width);
  ASSERT_EQ(out.height, img.image.height);
  for (uint32_t y = 0; y < out.height; ++y)
    for (uint32_t x = 0; x < img.image.width; ++x)
      ASSERT_EQ(0, std::memcmp(out.at(x, y), img.image.at(x, y), 4)) << x << "," << y;
  size_t ink = 0;
  for (uint32_t y = 0; y < out.height; ++y)
    for (uint32_t x = img.image.width; x < out.width; ++x) ink += out.at(x, y)[0] == 34;
  EXPECT_GT(ink, 60u);  // five labels and their marks
  const PngText layout = colour_bar_layout_text(img, out);
  EXPECT_EQ(layout[0], (std::pair<std::string, std::string>{"tensormorph:cells_box", "0,0,40,128"}));
  EXPECT_EQ(layout[1], (std::pair<std::string, std::string>{"tensormorph:colour_bar_box", "48,0,16,128"}));
  EXPECT_EQ(layout[3], (std::pair<std::string, std::string>{"tensormorph:ticks", "0.04;0.02;0;-0.02;-0.04"}));
}

}  // namespace
}  // namespace tmorph
