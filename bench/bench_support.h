// Shared by the benchmarks: environment-driven sizes and thread counts, page-aligned buffers, and a
// plain std::thread split used for the memcpy reference.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

// Prints "<tool>: <message>" on stderr and exits 2 (bad environment).
[[noreturn]] inline void die(const char* tool, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", tool, message.c_str());
  std::exit(2);
}

// The positive integer in environment variable `var` (MiB), or `fallback` when unset; at most `max`.
inline uint64_t env_mib(const char* tool, const char* var, uint64_t fallback, uint64_t max) {
  const char* env = std::getenv(var);
  if (!env || !*env) return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(env, &end, 10);
  if (*end || v == 0 || v > max) die(tool, std::string(var) + " must be a positive integer, got '" + env + "'");
  return static_cast<uint64_t>(v);
}

// TM_BENCH_THREADS: comma-separated thread counts (default "1,2").
inline std::vector<unsigned> thread_counts(const char* tool) {
  const char* env = std::getenv("TM_BENCH_THREADS");
  const std::string spec = env && *env ? env : "1,2";
  std::vector<unsigned> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end || v == 0 || v > 1024) die(tool, "TM_BENCH_THREADS must list positive integers, got '" + spec + "'");
    out.push_back(static_cast<unsigned>(v));
  }
  return out;
}

// Page-aligned heap buffer (not initialised).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    data_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, rounded ? rounded : 4096)));
    if (!data_) throw std::bad_alloc();
  }
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return bytes_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t bytes_ = 0;
};

// Runs fn(begin, end) over [0, n) split into contiguous parts (multiples of align), one std::thread each.
template <class Fn>
void split_threads(uint64_t n, unsigned parts, uint64_t align, Fn fn) {
  if (parts <= 1 || n < parts * align) {
    fn(uint64_t{0}, n);
    return;
  }
  std::vector<std::thread> threads;
  uint64_t begin = 0;
  for (unsigned t = 0; t < parts; ++t) {
    const uint64_t end = t + 1 == parts ? n : (n * (t + 1) / parts) / align * align;
    threads.emplace_back([=] { fn(begin, end); });
    begin = end;
  }
  for (auto& th : threads) th.join();
}

// The machine's copy bandwidth for `bytes` split over `threads` std::threads: the reference every
// throughput is compared with. Source and destination pages are touched before timing.
inline void memcpy_benchmark(benchmark::State& state, unsigned threads, uint64_t bytes) {
  static Buffer src, dst;
  if (src.size() != bytes) {
    src = Buffer(bytes);
    dst = Buffer(bytes);
    for (size_t i = 0; i < src.size(); ++i) src.data()[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
    std::memset(dst.data(), 1, dst.size());  // fault every destination page in before timing
  }
  for (auto _ : state) {
    split_threads(bytes, threads, 4096, [&](uint64_t b, uint64_t e) { std::memcpy(dst.data() + b, src.data() + b, e - b); });
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(dst.data()[bytes / 2]);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

}  // namespace bench
