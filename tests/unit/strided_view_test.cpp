// gather_strided against the definition: element (i0, ..., ik) of the view is storage element
// sum(i_d * stride_d), written in row-major order; every element width, zero strides, empty and scalar views.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/strided_view.h"

namespace tmorph {
namespace {

std::vector<uint8_t> by_definition(const std::vector<uint8_t>& storage, size_t width, const std::vector<uint64_t>& shape,
                                   const std::vector<uint64_t>& strides) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  std::vector<uint8_t> out(n * width);
  for (uint64_t flat = 0; flat < n; ++flat) {
    uint64_t rest = flat, at = 0;
    for (size_t d = shape.size(); d-- > 0;) at += (rest % shape[d]) * strides[d], rest /= shape[d];
    std::memcpy(out.data() + flat * width, storage.data() + at * width, width);
  }
  return out;
}

void check(size_t width, const std::vector<uint64_t>& shape, const std::vector<uint64_t>& strides) {
  uint64_t last = 0, n = 1;
  for (size_t d = 0; d < shape.size(); ++d) last += (shape[d] ? shape[d] - 1 : 0) * strides[d], n *= shape[d];
  std::vector<uint8_t> storage((last + 1) * width);
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<uint8_t> got(n * width + 1, 0xEE);  // one guard byte
  gather_strided(storage.data(), width, shape, strides, got.data());
  EXPECT_EQ(got.back(), 0xEE) << "wrote past the view";
  got.pop_back();
  EXPECT_EQ(got, by_definition(storage, width, shape, strides));
}

TEST(StridedView, TransposesPermutesAndColumnsOfEveryWidth) {
  for (size_t width : {1, 2, 3, 4, 8, 16}) {
    SCOPED_TRACE(width);
    check(width, {6, 4}, {1, 6});           // a transpose
    check(width, {4}, {6});                 // a column
    check(width, {4, 2, 3}, {1, 12, 4});    // permute(2, 0, 1) of (2, 3, 4)
    check(width, {3, 5, 2, 7}, {70, 1, 35, 5});
    check(width, {70, 90}, {1, 70});         // a transpose larger than one block
    check(width, {2, 45, 33}, {1, 2, 90});
  }
}

TEST(StridedView, ZeroStridesEmptyAndScalarViews) {
  check(4, {4, 3}, {0, 1});   // expand of a row
  check(4, {5, 6}, {0, 0});   // one element everywhere
  check(2, {3, 0, 4}, {1, 3, 1});  // empty: nothing written
  check(8, {}, {});           // a scalar
  check(2, {1, 1, 9}, {100, 50, 2});
}

// Any split of the rows into bands gathers the same bytes as the whole view.
TEST(StridedView, BandsOfRowsEqualTheWholeView) {
  std::mt19937_64 rng(29);
  for (int k = 0; k < 100; ++k) {
    const size_t rank = 1 + rng() % 4;
    std::vector<uint64_t> shape(rank), strides(rank);
    for (size_t d = 0; d < rank; ++d) shape[d] = 1 + rng() % (rank <= 2 ? 70 : 7), strides[d] = rng() % 50;
    uint64_t last = 0, n = 1;
    for (size_t d = 0; d < rank; ++d) last += (shape[d] - 1) * strides[d], n *= shape[d];
    std::vector<uint8_t> storage((last + 1) * 2);
    for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<uint8_t>(i * 29 + 3);
    std::vector<uint8_t> whole(n * 2), banded(n * 2);
    gather_strided(storage.data(), 2, shape, strides, whole.data());
    const uint64_t rows = strided_rows(shape), cols = shape.back();
    for (uint64_t r = 0; r < rows;) {
      const uint64_t m = std::min<uint64_t>(rows - r, 1 + rng() % 40);
      gather_strided_rows(storage.data(), 2, shape, strides, r, r + m, banded.data() + r * cols * 2);
      r += m;
    }
    EXPECT_EQ(banded, whole) << "rank " << rank;
  }
}

TEST(StridedView, RandomViews) {
  std::mt19937_64 rng(28);
  for (int k = 0; k < 200; ++k) {
    const size_t rank = rng() % 5;
    std::vector<uint64_t> shape(rank), strides(rank);
    for (size_t d = 0; d < rank; ++d) shape[d] = rng() % (rank <= 2 ? 80 : 6), strides[d] = rng() % 40;
    check(size_t{1} << (rng() % 4), shape, strides);
  }
}

}  // namespace
}  // namespace tmorph

namespace tmorph {
namespace {

// place_block: blocks that tile a tensor, placed in any order, rebuild it exactly.
TEST(ChunkedTensor, BlocksPlacedInAnyOrderRebuildTheTensor) {
  const std::vector<uint64_t> shape = {5, 7, 3};
  std::vector<uint16_t> whole(5 * 7 * 3);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<uint16_t>(i * 37 + 1);
  // Three blocks: rows [0, 2) whole; rows [2, 5) x cols [0, 4); rows [2, 5) x cols [4, 7).
  const std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>> blocks = {
      {{2, 4, 0}, {3, 3, 3}}, {{0, 0, 0}, {2, 7, 3}}, {{2, 0, 0}, {3, 4, 3}}};
  std::vector<uint16_t> rebuilt(whole.size(), 0);
  for (const auto& [off, size] : blocks) {
    std::vector<uint16_t> block;
    for (uint64_t a = 0; a < size[0]; ++a)
      for (uint64_t b = 0; b < size[1]; ++b)
        for (uint64_t c = 0; c < size[2]; ++c) block.push_back(whole[((off[0] + a) * 7 + off[1] + b) * 3 + off[2] + c]);
    place_block(reinterpret_cast<const uint8_t*>(block.data()), 2, shape, off, size, reinterpret_cast<uint8_t*>(rebuilt.data()));
  }
  EXPECT_EQ(rebuilt, whole);
}

TEST(ChunkedTensor, RowBandsAreInOrderBlocksAreNot) {
  CheckpointTensor t;
  t.shape = {10, 6};
  t.storage = ChunkedStorage{{{0, 0, {0, 0}, {5, 6}}, {1, 0, {5, 0}, {5, 6}}}};
  EXPECT_TRUE(t.chunks_in_order());
  t.storage = ChunkedStorage{{{0, 0, {0, 0}, {10, 3}}, {1, 0, {0, 3}, {10, 3}}}};
  EXPECT_FALSE(t.chunks_in_order());
  t.shape = {1, 4, 6};  // a leading dimension of 1 does not break a band
  t.storage = ChunkedStorage{{{0, 0, {0, 0, 0}, {1, 2, 6}}, {0, 0, {0, 2, 0}, {1, 2, 6}}}};
  EXPECT_TRUE(t.chunks_in_order());
  t.storage = ChunkedStorage{{{0, 0, {0, 0, 0}, {1, 4, 3}}, {0, 0, {0, 0, 3}, {1, 4, 3}}}};
  EXPECT_FALSE(t.chunks_in_order());
}

TEST(ChunkedTensor, FlatRangesFromTwoFilesRebuildTheTensor) {
  // A 3 x 4 parameter cut as ZeRO cuts it: elements [0, 5) at the end of rank 0's file, [5, 12) at the
  // start of rank 1's, each as one flat range (one offset and size for a 2-D tensor).
  std::vector<float> whole(12);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = 0.5f * static_cast<float>(i) - 2;
  const auto dir = std::filesystem::temp_directory_path() / ("tm-flat-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::vector<float>& v) {
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    return std::make_shared<MappedFile>(path);
  };
  std::vector<float> rank0 = {9, 9, 9}, rank1(whole.begin() + 5, whole.end());
  rank0.insert(rank0.end(), whole.begin(), whole.begin() + 5);
  rank1.push_back(7);  // padding after the parameter
  Checkpoint c;
  c.files = {write("rank0", rank0), write("rank1", rank1)};
  CheckpointTensor t;
  t.name = "w";
  t.dtype = DType::F32;
  t.shape = {3, 4};
  t.elements = 12;
  t.storage = ChunkedStorage{{{0, 3 * 4, {0}, {5}}, {1, 0, {5}, {7}}}};
  t.file_index = 0, t.file_offset = 12;
  EXPECT_TRUE(t.chunks()[0].flat_in(2));
  EXPECT_FALSE(t.chunks()[0].flat_in(1));
  EXPECT_TRUE(t.chunks_in_order());
  const float* got = reinterpret_cast<const float*>(c.data(t));
  EXPECT_EQ(std::vector<float>(got, got + 12), whole);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tmorph
