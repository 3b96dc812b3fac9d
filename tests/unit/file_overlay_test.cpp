// core/file_overlay.h: a registered overlay is what every MappedFile of its path maps, for as long as something
// holds it; releasing frees whole pages only; the indexer's page dropping leaves an overlay's bytes alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <vector>

#include "core/file_overlay.h"
#include "core/mapped_file.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

std::string overlay_test_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const auto d = std::filesystem::temp_directory_path() / ("tm-test-overlay-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  const std::string path = (d / name).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(FileOverlay, MappedFilesOfThePathMapTheOverlayWhileItIsHeld) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::vector<uint8_t> on_disk(3 * page, 0xAB);
  const std::string path = overlay_test_file("held.bin", on_disk);
  std::vector<uint8_t> in_memory(3 * page);
  std::iota(in_memory.begin(), in_memory.end(), uint8_t{1});
  auto overlay = std::make_shared<FileOverlay>(path, in_memory.size());
  overlay->write(0, in_memory.data(), in_memory.size());
  register_overlay(overlay);
  {
    // Another spelling of the same path finds it too.
    const MappedFile f(std::filesystem::path(path).parent_path().string() + "/./held.bin");
    ASSERT_TRUE(f.in_memory());
    ASSERT_EQ(f.size(), in_memory.size());
    EXPECT_EQ(std::memcmp(f.data(), in_memory.data(), in_memory.size()), 0);
    std::vector<uint8_t> got(100);
    f.read_at(page - 50, got.data(), got.size());
    EXPECT_EQ(std::memcmp(got.data(), in_memory.data() + page - 50, got.size()), 0);
    EXPECT_THROW(f.read_at(3 * page - 10, got.data(), got.size()), Error);  // past the end: refused, not read
    // The indexer's "done with these pages" must not free the only copy.
    f.drop_pages(0, in_memory.size());
    EXPECT_EQ(std::memcmp(f.data(), in_memory.data(), in_memory.size()), 0);
    EXPECT_GE(overlay->resident_bytes(), 3 * page);
    // Releasing [10, 2 * page + 10) frees page 1 only: the bytes it shares with pages 0 and 2 stay.
    overlay->release(10, 2 * page);
    EXPECT_EQ(overlay->resident_bytes(), 2 * page);
    EXPECT_EQ(f.data()[page - 1], in_memory[page - 1]);
    EXPECT_EQ(f.data()[page], 0);
    EXPECT_EQ(f.data()[2 * page - 1], 0);
    EXPECT_EQ(f.data()[2 * page], in_memory[2 * page]);
  }
  overlay.reset();  // nothing holds it now: the path maps the file on disk again
  EXPECT_EQ(find_overlay(path), nullptr);
  const MappedFile f(path);
  EXPECT_FALSE(f.in_memory());
  EXPECT_EQ(std::memcmp(f.data(), on_disk.data(), on_disk.size()), 0);
}

TEST(FileOverlay, AWriteOutsideTheFileIsRefusedNamingIt) {
  const std::string path = overlay_test_file("small.bin", std::vector<uint8_t>(16, 0));
  FileOverlay overlay(path, 16);
  const uint8_t bytes[8] = {};
  overlay.write(8, bytes, 8);
  try {
    overlay.write(9, bytes, 8);
    FAIL() << "a write past the end was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("9+8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tmorph
