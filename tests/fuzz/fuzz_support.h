// Shared by the libFuzzer harnesses of tests/fuzz (docs/formats.md, "Fuzzing the parsers").
//
// A harness feeds one input to one parser and catches tmorph::Error, the clear error every malformed
// input must end in, and nothing else: any other exception escapes to libFuzzer (a finding), as do
// crashes, sanitizer reports, leaks, timeouts and out-of-memory. TM_FUZZ_CHECK states what a parser
// promises about what it accepted (every tensor inside the file, ...); a broken promise aborts.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#define TM_FUZZ_CHECK(cond)                                                                  \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace tmorph::fuzz {

// A scratch folder of this process (under $TMPDIR, else /tmp), created on first use and removed at
// exit: harnesses whose parser takes a path write their input there.
inline const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the folder runs after static destructors would.
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                              ("tm-fuzz-" + std::to_string(static_cast<long>(getpid())));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return new std::string(d.string());
  }();
  return *dir;
}

// TM_FUZZ_VERBOSE=1 in the environment: harnesses say what each input became (for reading reproducers
// and checking seeds), on stderr.
inline bool verbose() {
  static const bool on = std::getenv("TM_FUZZ_VERBOSE") != nullptr;
  return on;
}

inline void write_file(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
}

}  // namespace tmorph::fuzz
