// ScratchBuffer: heap within the limit (the thread's buffer reused, nested buffers kept apart), an
// unlinked temporary file beyond it, and a clear error when the temporary directory is unusable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/scratch_buffer.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

TEST(ScratchBuffer, HeapWithinTheLimitAndNestedBuffersDoNotAlias) {
  ScratchBuffer outer(4096, 1 << 20);
  EXPECT_FALSE(outer.file_backed());
  std::memset(outer.data(), 7, outer.size());
  {
    ScratchBuffer inner(4096, 1 << 20);  // while the thread's cached buffer is lent out
    EXPECT_NE(inner.data(), outer.data());
    std::memset(inner.data(), 9, inner.size());
  }
  EXPECT_EQ(outer.data()[4095], 7);
}

TEST(ScratchBuffer, BeyondTheLimitItIsAnUnlinkedFile) {
  ScratchBuffer big(3 << 20, 1 << 20);
  EXPECT_TRUE(big.file_backed());
  std::memset(big.data(), 1, big.size());
  EXPECT_EQ(big.data()[big.size() - 1], 1);
}

TEST(ScratchBuffer, AnUnusableTemporaryDirectoryIsANamedError) {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", "/nonexistent-tensormorph-dir", 1);
  try {
    ScratchBuffer b(2 << 20, 1 << 20);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-tensormorph-dir: cannot create a scratch file"), std::string::npos)
        << e.what();
  }
  if (old) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
}

}  // namespace
}  // namespace tmorph
