#include "index/indexer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "support/thread_pool.h"
#include "index/read_pacer.h"
#include "checkpoint/strided_view.h"
#include "checkpoint/tensor_stats.h"
#include "checkpoint/value_reader.h"
#include "formats/zip_archive.h"
#include "ops/tile_stats.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

using Clock = std::chrono::steady_clock;

// Work shared by the workers and the committing thread.
class Run {
 public:
  Run(const Checkpoint& c, std::vector<std::deque<size_t>> queues) : c_(c), queues_(std::move(queues)) {}

  // The next tensor for worker w: from the file w prefers, else from the next file that has work.
  std::optional<size_t> next(unsigned w) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return std::nullopt;
    for (size_t k = 0; k < queues_.size(); ++k) {
      auto& q = queues_[(w + k) % queues_.size()];
      if (q.empty()) continue;
      const size_t t = q.front();
      q.pop_front();
      return t;
    }
    return std::nullopt;
  }

  void finish(TensorResult d) {
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back(std::move(d));
    cv_.notify_one();
  }

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) failed_ = e;
    cv_.notify_one();
  }

  void worker_exited() {
    std::lock_guard<std::mutex> lock(mu_);
    ++exited_;
    cv_.notify_one();
  }

  // Waits up to `wait` for results; returns them (possibly none). `all_exited` tells whether the
  // workers are gone, so nothing more will come.
  std::deque<TensorResult> take(std::chrono::milliseconds wait, unsigned workers, bool& all_exited, std::exception_ptr& failed) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, wait, [&] { return !done_.empty() || exited_ == workers || failed_; });
    std::deque<TensorResult> out;
    out.swap(done_);
    all_exited = exited_ == workers;
    failed = failed_;
    return out;
  }

  std::atomic<uint64_t> bytes_done{0};
  const Checkpoint& c_;

 private:
  std::vector<std::deque<size_t>> queues_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TensorResult> done_;
  std::exception_ptr failed_;
  unsigned exited_ = 0;
};

// Streams one tensor through `buffer` in reads of buffer.size() bytes, asking the kernel to read
// `ahead` bytes further on while the current piece is being computed, and returns its statistics. A
// dense tensor's pyramid (lod/pyramid.h) is built from the same pieces, so the data is read once; a
// quantized or packed tensor's from its decoded values, after its statistics.
StatsResult index_tensor(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                         const StatsOptions& options, std::vector<uint8_t>& buffer, uint64_t ahead,
                         std::atomic<uint64_t>& bytes_done, std::optional<Pyramid>* pyramid) {
  const MappedFile& file = *c.files[t.file_index];
  if (!t.dtype) {
    // A quantized tensor (a GGUF block format, or a packed scheme's parts): read through the mapping,
    // decoded a piece at a time and summarised as float32 (streamed_stats.h).
    std::vector<std::pair<const MappedFile*, PackedPart>> ranges;
    if (t.packed())
      for (const auto& part : t.packed()->parts) ranges.emplace_back(c.files[part.file_index].get(), part);
    else ranges.emplace_back(&file, PackedPart{"", t.name, DType::U8, {}, t.file_index, t.file_offset, t.bytes});
    for (const auto& [f, r] : ranges) f->read_ahead(r.file_offset, r.bytes);
    StatsResult r = compute_tensor_stats(c, t, planner, options);
    if (pyramid) {
      // The pyramid of the decoded values (float32, as they decode), a view row at a time (one more
      // decode of the pages just read).
      const View2D view = default_view(t.shape);
      ValueReader reader(c, t, planner, view);
      PyramidBuilder lod(DType::F32, view, PlacedTileStats(planner, DType::F32, t.elements, options.memory_budget_bytes, 1));
      for (uint64_t s = 0; s < view.slices; ++s)
        for (uint64_t y = 0; y < view.rows; ++y) lod.feed(reader.read_decoded(s, y, 0, view.cols), view.cols);
      *pyramid = lod.finish();
    }
    for (const auto& [f, part] : ranges) f->drop_pages(part.file_offset, part.bytes);
    bytes_done += t.bytes;
    return r;
  }
  const DType dtype = *t.dtype;
  const size_t width = dtype_size(dtype);
  StatsStream stream(planner, dtype, t.elements, options);
  std::optional<PyramidBuilder> lod;
  // Level-0 tiles are the placed op lod.tile_stats, placed once for the tensor (ops/tile_stats.h).
  if (pyramid) lod.emplace(dtype, default_view(t.shape), PlacedTileStats(planner, dtype, t.elements, options.memory_budget_bytes, 1));
  // 8- and 16-bit dtypes: the pyramid counts every element's bit pattern as it tiles them, so the
  // statistics take those counts instead of counting the patterns again (the pass is then one count
  // per element, in tile order; the pattern method of lod.tile_stats, op_contracts.h).
  const bool shared_patterns = lod && lod->pattern_counts() && stream.count_patterns_elsewhere("counted_by_pyramid_pass");
  // Ends the pyramid, handing its pattern counts to the statistics.
  auto finish_pyramid = [&] {
    if (shared_patterns) stream.add_pattern_counts(*lod->pattern_counts());
    *pyramid = lod->finish();
  };
  const uint64_t bytes = t.elements * width;
  const uint64_t piece = (lod ? lod->piece_elements(buffer.size() / width) : buffer.size() / width) * width;
  // Feeds `n` bytes of the tensor already in memory at p.
  auto feed_memory = [&](const uint8_t* p, uint64_t n) {
    for (uint64_t off = 0; off < n;) {
      const uint64_t k = std::min(piece, n - off);
      stream.feed(p + off, k / width);
      if (lod) lod->feed(p + off, k / width);
      bytes_done += k;
      off += k;
    }
  };
  // The CRC-32 of the bytes read, for a torch.save storage whose CRC is checked on a full pass (t.crc32).
  uint32_t crc = 0;
  // Reads bytes [offset, offset + n) of f through the buffer, asking for `ahead` bytes further on.
  auto feed_file = [&](const MappedFile& f, uint64_t offset, uint64_t n) {
    f.read_ahead(offset, std::min(n, ahead));
    for (uint64_t off = 0; off < n;) {
      const uint64_t k = std::min(piece, n - off);
      if (off + ahead < n) f.read_ahead(offset + off + ahead, std::min(k, n - off - ahead));
      f.read_at(offset + off, buffer.data(), k);
      if (t.crc32) crc = zip_crc32(buffer.data(), k, crc);
      stream.feed(buffer.data(), k / width);
      if (lod) lod->feed(buffer.data(), k / width);
      bytes_done += k;
      off += k;
    }
  };
  if (t.strided()) {
    // A strided view: gathered into the buffer a band of rows at a time (a buffer of one row when a row
    // is longer than the buffer). Wider dtypes' second pass needs the whole view: gathered once more
    // into a copy (Checkpoint::data).
    const uint64_t cols = t.shape.empty() ? 1 : t.shape.back(), rows = strided_rows(t.shape);
    const uint64_t row_bytes = std::max<uint64_t>(cols * width, 1);
    std::vector<uint8_t> one_row;
    uint8_t* band = buffer.data();
    uint64_t per = buffer.size() / row_bytes;
    if (per == 0) one_row.resize(row_bytes), band = one_row.data(), per = 1;
    const uint8_t* first = file.data() + t.file_offset;
    for (uint64_t r = 0; r < rows && t.elements; r += per) {
      const uint64_t n = std::min(per, rows - r);
      gather_strided_rows(first, width, t.shape, t.strides(), r, r + n, band);
      stream.feed(band, n * cols);
      if (lod) lod->feed(band, n * cols);
      bytes_done += n * cols * width;
    }
    if (lod) finish_pyramid();
    return stream.finish(stream.needs_second_pass() ? c.data(t) : nullptr);
  }
  if ((t.chunked() && !t.chunks_in_order()) || t.encoded()) {
    // Chunks that are blocks rather than row bands, or encoded values: the elements assembled (decoded) in
    // row-major order (Checkpoint::data), fed from that copy.
    const uint8_t* base = c.data(t);
    feed_memory(base, bytes);
    if (lod) finish_pyramid();
    return stream.finish(stream.needs_second_pass() ? base : nullptr);
  }
  if (t.chunked()) {
    // Row bands: the chunks in order are the tensor in order, each read from its own file.
    for (const auto& chunk : t.chunks()) {
      uint64_t n = width;
      for (uint64_t d : chunk.sizes) n *= d;
      feed_file(*c.files[chunk.file_index], chunk.file_offset, n);
    }
    if (lod) finish_pyramid();
    // Wider dtypes' histogram and quantile passes need the whole tensor: assembled (Checkpoint::data).
    return stream.finish(stream.needs_second_pass() ? c.data(t) : nullptr);
  }
  feed_file(file, t.file_offset, bytes);
  if (t.crc32) check_zip_crc(*t.crc32, crc, t.crc_entry, t.file_offset, bytes, file.path());
  if (lod) finish_pyramid();
  if (!stream.needs_second_pass()) return stream.finish(nullptr);
  // Wider dtypes: the histogram and quantile passes read the tensor through the mapping, whose pages
  // are released afterwards.
  const uint8_t* base = c.data(t);
  StatsResult r = stream.finish(base);
  file.drop_pages(t.file_offset, bytes);
  return r;
}

}  // namespace

std::vector<size_t> tensors_to_index(const CheckpointIndex& index, const Planner& planner, const IndexingOptions& options,
                                     IndexingReport& report) {
  const Checkpoint& c = index.checkpoint();
  std::vector<size_t> wanted = options.only;
  if (wanted.empty())
    for (size_t i = 0; i < c.tensors.size(); ++i) wanted.push_back(i);
  std::vector<size_t> todo;
  for (size_t i : wanted) {
    if (unreadable_reason(c.tensors[i], planner)) {
      ++report.unavailable;
      if (c.tensors[i].damaged) ++report.damaged;
    }
    else if (index.has_stats(i)) ++report.already_indexed;
    else todo.push_back(i);
  }
  return todo;
}

IndexingReport compute_tensors(const Checkpoint& c, const Planner& planner, const IndexingOptions& options,
                               const std::vector<size_t>& tensors, const std::function<void(TensorResult&&)>& done,
                               const std::function<void(uint64_t bytes_done)>& tick) {
  const auto start = Clock::now();
  IndexingReport report;
  std::vector<std::deque<size_t>> queues(std::max<size_t>(1, c.files.size()));
  for (size_t i : tensors) queues[c.tensors[i].file_index].push_back(i);  // checkpoint order: each queue ascends in offset
  const unsigned threads = options.threads ? options.threads : default_thread_count();
  report.workers = static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(threads, tensors.size())));
  const uint64_t budget = options.memory_budget ? options.memory_budget : uint64_t{1} << 30;
  // Per worker: half its share of the budget for data being read ahead, the other half for the kernels'
  // workspace; reads of whole 64 Ki-element blocks of the widest dtype (512 KiB), at most 4 MiB, so a
  // piece is still in cache when the second kernel reads it.
  const uint64_t block = 65536 * 8, share = budget / report.workers;
  report.readahead_bytes = std::max<uint64_t>(block, share / 2);
  report.window_bytes = std::clamp<uint64_t>(report.readahead_bytes / 4 / block * block, block, 8 * block);

  StatsOptions stats = CheckpointIndex::index_options();
  stats.threads = 1;  // parallel across tensors: every worker owns one core
  stats.memory_budget_bytes = share / 2;
  stats.allowed_approx_steps = options.allowed_approx_steps;

  Run run(c, std::move(queues));
  ReadPacer pacer(options.max_bytes_per_s);
  std::vector<std::thread> workers;
  if (!tensors.empty()) {
    for (unsigned w = 0; w < report.workers; ++w)
      workers.emplace_back([&, w] {
        try {
          std::vector<uint8_t> buffer(report.window_bytes);
          const auto cancelled = [&] { return options.cancel && options.cancel->load(); };
          const auto paced = [&] {  // waits while ahead of options.max_bytes_per_s; false when cancelled
            while (options.max_bytes_per_s && !cancelled()) {
              const double wait = pacer.wait(std::chrono::duration<double>(Clock::now() - start).count(), run.bytes_done.load());
              if (wait <= 0) break;
              std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.05)));
            }
            return !cancelled();
          };
          while (auto i = paced() ? run.next(w) : std::nullopt) {
            const auto t0 = Clock::now();
            std::optional<Pyramid> pyramid;
            StatsResult r =
                index_tensor(c, c.tensors[*i], planner, stats, buffer, report.readahead_bytes, run.bytes_done,
                             options.pyramids ? &pyramid : nullptr);
            run.finish({*i, std::move(r), std::move(pyramid), std::chrono::duration<double>(Clock::now() - t0).count()});
          }
        } catch (...) {
          run.fail(std::current_exception());
        }
        run.worker_exited();
      });
  }
  struct Joiner {
    std::vector<std::thread>& ts;
    ~Joiner() {
      for (auto& t : ts) t.join();
    }
  } joiner{workers};

  // This thread hands results on (to the one writer, or to the rank that commits them).
  std::exception_ptr failed;
  for (bool all_exited = workers.empty(); !all_exited || failed;) {
    auto results = run.take(std::chrono::milliseconds(100), report.workers, all_exited, failed);
    try {
      for (auto& d : results) {
        done(std::move(d));
        ++report.computed;
      }
      tick(run.bytes_done.load());
    } catch (...) {
      run.fail(std::current_exception());  // the workers stop taking tensors; rethrown below once they exited
      failed = std::current_exception();
    }
    if (failed && all_exited) break;
  }
  if (failed) std::rethrow_exception(failed);
  report.cancelled = report.computed < tensors.size();
  report.bytes = run.bytes_done.load();
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

IndexingReport index_checkpoint(CheckpointIndex& index, const Planner& planner, const IndexingOptions& options) {
  const auto start = Clock::now();
  IndexingReport counted;
  const std::vector<size_t> todo = tensors_to_index(index, planner, options, counted);
  IndexingProgress progress;
  progress.tensors_total = todo.size();
  for (size_t i : todo) progress.bytes_total += index.checkpoint().tensors[i].bytes;
  // One connection, one writer: every finished tensor is durable at once.
  IndexingReport report = compute_tensors(
      index.checkpoint(), planner, options, todo,
      [&](TensorResult&& d) {
        index.store_stats(d.tensor, d.stats, d.seconds, d.pyramid ? &*d.pyramid : nullptr);
        ++progress.tensors_done;
      },
      [&](uint64_t bytes_done) {
        progress.bytes_done = bytes_done;
        progress.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (options.progress) options.progress(progress);
      });
  report.unavailable = counted.unavailable;
  report.damaged = counted.damaged;
  report.already_indexed = counted.already_indexed;
  return report;
}

}  // namespace tmorph
