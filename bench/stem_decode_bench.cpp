// Decode throughput of a Dectris acquisition without holding it: every frame's stored chunk is read
// (H5Dread_chunk) and decoded into a per-thread frame buffer that stays in cache, the way streamed
// products consume frames. Separates the decoder's speed from the cost of first touching gigabytes of
// fresh output memory (which `tensormorph stem load` also pays, and which a VM can make slow).
//   stem_decode_bench MASTER THREADS RUNS   ->  one JSON line: best seconds, decoded bytes, stored bytes
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "support/thread_pool.h"
#include "stem/acquisition.h"
#include "stem/frame_reader.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: stem_decode_bench MASTER THREADS RUNS\n");
    return 2;
  }
  const tmorph::Acquisition acq = tmorph::open_acquisition(argv[1]);
  const unsigned threads = static_cast<unsigned>(std::atoi(argv[2]));
  const int runs = std::atoi(argv[3]);
  tmorph::FrameReader reader(acq);
  tmorph::ThreadPool& pool = tmorph::ThreadPool::shared(threads);
  const uint64_t frames = acq.frames_present;
  double best = 1e30;
  uint64_t stored_total = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<uint64_t> stored(pool.size(), 0);
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(frames, [&](uint64_t begin, uint64_t end, unsigned part) {
      std::vector<uint8_t> frame(reader.frame_bytes()), scratch;
      std::vector<tmorph::FrameReader::Stored> batch(32);  // read 32 chunks per HDF5 lock, as the loader does
      std::vector<uint64_t> ids(32);
      for (uint64_t f = begin; f < end;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(32, end - f));
        for (size_t i = 0; i < n; ++i) ids[i] = f + i;
        reader.read_batch(ids.data(), n, batch.data());
        for (size_t i = 0; i < n; ++i, ++f) {
          reader.decode(f, batch[i], frame.data(), scratch);
          stored[part] += batch[i].bytes.size();
        }
      }
    });
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    stored_total = 0;
    for (uint64_t s : stored) stored_total += s;
  }
  std::printf("{\"threads\": %u, \"seconds\": %.6f, \"decoded_bytes\": %llu, \"stored_bytes\": %llu}\n", pool.size(), best,
              static_cast<unsigned long long>(frames * reader.frame_bytes()), static_cast<unsigned long long>(stored_total));
  return 0;
}
