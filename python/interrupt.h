// A long call made with the GIL released that stays interruptible and reports progress: the engine calls
// on_progress on the calling thread (IndexingOptions.progress, about ten times a second); it takes the GIL
// briefly, runs Python's signal handlers (Ctrl-C in a terminal or Jupyter's interrupt raises
// KeyboardInterrupt there) and the caller's progress callable. Either raising sets the cancel flag: the
// engine finishes the tensors in flight, commits them, and returns; rethrow_if_stopped() then raises the
// exception in the caller (what was committed stays in the index, so calling again resumes).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "index/indexer.h"
#include "stem/ssb/ssb_fit.h"

namespace tmorph::python {

// Adds a caller's progress callback and cancel flag to the indexing a document runs (empty: none).
using IndexingHook = std::function<void(IndexingOptions&)>;

class Interruptible {
 public:
  // progress: None (signals only), True (a line on sys.stderr, rewritten in place) or a callable taking a
  // dict {bytes_done, bytes_total, tensors_done, tensors_total, seconds}. Construct with the GIL held.
  explicit Interruptible(pybind11::object progress);
  ~Interruptible();
  Interruptible(const Interruptible&) = delete;
  Interruptible& operator=(const Interruptible&) = delete;

  // Call with the GIL held. Runs work(hook) without the GIL, the hook giving the indexing that work runs
  // this object's progress callback and cancel flag; then raises what stopped it, else returns work's result.
  template <class Work>
  auto run_indexing(Work&& work) {
    decltype(work(IndexingHook())) result{};
    {
      pybind11::gil_scoped_release unlocked;
      result = work(IndexingHook([this](IndexingOptions& o) { attach(o); }));
    }
    rethrow_if_stopped();
    return result;
  }
  // The flag for engine calls without a progress callback (LoadRequest.cancel, SsbFitOptions.cancel).
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }
  // For LoadRequest.progress under run(): records the loading threads' frame counts (no GIL, no Python); run()'s
  // waiting thread hands them to the progress argument every 100 ms and once at the end: True writes a line on
  // sys.stderr, a callable gets a dict {frames_done, frames_total, seconds} (a product of several passes counts
  // each pass from 0). What the callable raises stops the work like Ctrl-C and is raised to the caller.
  std::function<void(uint64_t, uint64_t)> frames_hook();
  // For SsbFitOptions::progress under run(), the same way: the callable gets {stage ("search" or "simplex"),
  // evaluations, stage_evaluations, stage_planned (0: open-ended), best_loss, seconds}; True writes a line.
  std::function<void(const SsbFitProgress&)> fit_hook();
  // Call with the GIL held. Runs `work` on a helper thread while this thread, without the GIL, wakes every
  // 100 ms to run Python's signal handlers (they run only on the main thread, which is why the work moves);
  // an exception they raise sets the cancel flag, the work stops at its next cancellation point, and that
  // exception is raised here. Otherwise work's own exception is rethrown, or run returns.
  void run(const std::function<void()>& work);

 private:
  // Fills options.progress and options.cancel with this object's (which must outlive the run).
  void attach(IndexingOptions& options);
  // Call with the GIL held, after the run: raises what stopped it, if anything did.
  void rethrow_if_stopped();
  void on_progress(const IndexingProgress& p);  // called without the GIL
  void report_frames(double seconds);           // called with the GIL: frames_hook's counts, when they changed
  void report_fit();                            // called with the GIL: fit_hook's latest, when it changed
  void call_progress(const pybind11::dict& d, const std::string& line);  // the callable gets d; True writes line

  pybind11::object progress_;
  std::atomic<bool> cancel_{false};
  std::optional<pybind11::error_already_set> stopped_by_;
  bool line_open_ = false;  // progress=True wrote a line not yet ended
  std::atomic<uint64_t> frames_done_{0}, frames_total_{0};  // frames_hook's latest counts
  uint64_t frames_reported_ = 0, frames_total_reported_ = 0;
  std::mutex fit_mutex_;                        // guards fit_latest_ (written by the fitting thread)
  std::optional<SsbFitProgress> fit_latest_;
  unsigned fit_reported_ = 0;                   // evaluations last reported
};

}  // namespace tmorph::python
