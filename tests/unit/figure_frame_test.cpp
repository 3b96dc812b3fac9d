// A written figure's frame (render/figure_frame.h): ticks at element edges in 1-2-5 steps, the labelled image kept
// pixel for pixel inside the frame, and the layout text moved with it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "render/figure_frame.h"

namespace tmorph {
namespace {

TEST(FigureFrame, IndexTicksStandAtTheirElementsLeftEdges) {
  const auto t = index_ticks(0, 1376, 688);  // two elements per pixel, about one tick per 60 pixels
  ASSERT_GE(t.size(), 5u);
  EXPECT_EQ(t[0].label, "0");
  EXPECT_EQ(t[1].label, "200");
  EXPECT_DOUBLE_EQ(t[1].pixel, 100.0);
  const auto shifted = index_ticks(512, 88, 88);  // a tile's rows 512..599: multiples of the step inside
  ASSERT_FALSE(shifted.empty());
  EXPECT_EQ(shifted[0].label, "550");  // 88 px hold 2 ticks: a step of 50, its first multiple inside
  EXPECT_DOUBLE_EQ(shifted[0].pixel, 38.0);
  EXPECT_TRUE(index_ticks(0, 0, 10).empty());
}

TEST(FigureFrame, UnitTicksSpanTheExtentInNiceSteps) {
  const auto t = unit_ticks(0.7876, 320);  // 32 scan steps of 0.2461 Å... in nm
  ASSERT_GE(t.size(), 3u);
  EXPECT_EQ(t[0].label, "0");
  EXPECT_DOUBLE_EQ(t[0].pixel, 0.0);
  EXPECT_EQ(t[1].label, "0.2");
  EXPECT_NEAR(t[1].pixel, 0.2 / 0.7876 * 320, 1e-9);
  EXPECT_TRUE(unit_ticks(0, 100).empty());
}

TEST(FigureFrame, KeepsTheLabelledImageAndMovesTheLayout) {
  RgbaImage labelled(40, 30);
  for (uint32_t y = 0; y < 30; ++y)
    for (uint32_t x = 0; x < 40; ++x) {
      const uint8_t px[4] = {static_cast<uint8_t>(x), static_cast<uint8_t>(y), 7, static_cast<uint8_t>(x < 20 ? 255 : 0)};
      std::memcpy(labelled.at(x, y), px, 4);
    }
  FigureFrameSpec spec{"T", {"COLUMN", index_ticks(0, 20, 20)}, {"ROW", index_ticks(0, 30, 30)}};
  const FramedFigure f = frame_figure(labelled, 20, 30, spec);
  ASSERT_GT(f.left, 0u);
  ASSERT_GT(f.top, 0u);
  ASSERT_GE(f.image.width, f.left + 40);
  ASSERT_GT(f.image.height, f.top + 30);
  for (uint32_t y = 0; y < 30; ++y)
    for (uint32_t x = 0; x < 40; ++x) ASSERT_EQ(std::memcmp(f.image.at(f.left + x, f.top + y), labelled.at(x, y), 4), 0) << x << "," << y;
  const PngText text = framed_layout_text({{"tensormorph:cells_box", "0,0,20,30"}, {"tensormorph:ticks", "1;2"}}, f, spec);
  EXPECT_EQ(text[0].second, std::to_string(f.left) + "," + std::to_string(f.top) + ",20,30");
  EXPECT_EQ(text[1].second, "1;2");
  bool x_axis = false;
  for (const auto& [k, v] : text) x_axis |= k == "tensormorph:x_axis" && v.rfind("COLUMN: 0;", 0) == 0;
  EXPECT_TRUE(x_axis);
}

}  // namespace
}  // namespace tmorph
