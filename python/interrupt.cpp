#include "interrupt.h"

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>
#include <string>

namespace py = pybind11;

namespace tmorph::python {

Interruptible::Interruptible(py::object progress) : progress_(std::move(progress)) {}

Interruptible::~Interruptible() {
  py::gil_scoped_acquire locked;  // the members hold Python objects
  stopped_by_.reset();
  progress_ = py::object();
}

void Interruptible::attach(IndexingOptions& options) {
  options.cancel = &cancel_;
  options.progress = [this](const IndexingProgress& p) { on_progress(p); };
}

void Interruptible::on_progress(const IndexingProgress& p) {
  if (stopped_by_) return;
  py::gil_scoped_acquire locked;
  try {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (progress_.is_none()) return;
    if (py::isinstance<py::bool_>(progress_)) {
      if (!progress_.cast<bool>()) return;
      char line[160];
      const double gb = 1e-9, rate = p.seconds > 0 ? static_cast<double>(p.bytes_done) / p.seconds * gb : 0;
      std::snprintf(line, sizeof line, "\rtensormorph: indexed %zu/%zu tensors, %.2f/%.2f GB, %.2f GB/s", p.tensors_done,
                    p.tensors_total, static_cast<double>(p.bytes_done) * gb, static_cast<double>(p.bytes_total) * gb, rate);
      py::module_::import("sys").attr("stderr").attr("write")(std::string(line));
      line_open_ = true;
      return;
    }
    py::dict d;
    d["bytes_done"] = p.bytes_done, d["bytes_total"] = p.bytes_total;
    d["tensors_done"] = p.tensors_done, d["tensors_total"] = p.tensors_total;
    d["seconds"] = p.seconds;
    progress_(d);
  } catch (py::error_already_set& e) {
    stopped_by_ = std::move(e);
    cancel_.store(true);
  }
}

std::function<void(uint64_t, uint64_t)> Interruptible::frames_hook() {
  if (progress_.is_none()) return {};
  return [this](uint64_t done, uint64_t total) {
    frames_total_.store(total);
    frames_done_.store(done);
  };
}

std::function<void(const SsbFitProgress&)> Interruptible::fit_hook() {
  if (progress_.is_none()) return {};
  return [this](const SsbFitProgress& p) {
    std::lock_guard<std::mutex> lock(fit_mutex_);
    fit_latest_ = p;
  };
}

void Interruptible::call_progress(const py::dict& d, const std::string& line) {
  try {
    if (py::isinstance<py::bool_>(progress_)) {
      if (!progress_.cast<bool>()) return;
      py::module_::import("sys").attr("stderr").attr("write")(line);
      line_open_ = true;
      return;
    }
    progress_(d);
  } catch (py::error_already_set& e) {
    stopped_by_ = std::move(e);
    cancel_.store(true);
  }
}

void Interruptible::report_frames(double seconds) {
  const uint64_t done = frames_done_.load(), total = frames_total_.load();
  if (stopped_by_ || progress_.is_none() || total == 0 || (done == frames_reported_ && total == frames_total_reported_)) return;
  frames_reported_ = done, frames_total_reported_ = total;
  char line[128];
  std::snprintf(line, sizeof line, "\rtensormorph: decoded %llu/%llu frames (%.0f%%)", static_cast<unsigned long long>(done),
                static_cast<unsigned long long>(total), 100.0 * static_cast<double>(done) / static_cast<double>(total));
  py::dict d;
  d["frames_done"] = done, d["frames_total"] = total, d["seconds"] = seconds;
  call_progress(d, line);
}

void Interruptible::report_fit() {
  std::optional<SsbFitProgress> p;
  {
    std::lock_guard<std::mutex> lock(fit_mutex_);
    p = fit_latest_;
  }
  if (stopped_by_ || progress_.is_none() || !p || p->evaluations == fit_reported_) return;
  fit_reported_ = p->evaluations;
  char line[160];
  std::snprintf(line, sizeof line, "\rtensormorph: fit %s, %u evaluations, best loss %.6g", p->stage, p->evaluations, p->best_loss);
  py::dict d;
  d["stage"] = std::string(p->stage), d["evaluations"] = p->evaluations, d["stage_evaluations"] = p->stage_evaluations;
  d["stage_planned"] = p->stage_planned, d["best_loss"] = p->best_loss, d["seconds"] = p->seconds;
  call_progress(d, line);
}

void Interruptible::run(const std::function<void()>& work) {
  std::exception_ptr failed;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  {
    py::gil_scoped_release unlocked;
    std::promise<void> done;
    std::future<void> finished = done.get_future();
    std::thread worker([&] {
      try {
        work();
        done.set_value();
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
    while (finished.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      if (cancel_.load()) continue;  // stopping: wait for the work to reach its cancellation point
      py::gil_scoped_acquire locked;
      if (PyErr_CheckSignals() != 0) {
        stopped_by_ = py::error_already_set();
        cancel_.store(true);
        continue;
      }
      report_frames(elapsed());
      report_fit();
    }
    worker.join();
    try {
      finished.get();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (!failed) report_frames(elapsed()), report_fit();  // the last counts, when not yet reported
  rethrow_if_stopped();  // the reason it stopped, rather than the engine's Cancelled
  if (failed) std::rethrow_exception(failed);
}

void Interruptible::rethrow_if_stopped() {
  if (line_open_) py::module_::import("sys").attr("stderr").attr("write")(std::string("\n"));
  line_open_ = false;
  if (stopped_by_) {
    py::error_already_set e = std::move(*stopped_by_);
    stopped_by_.reset();
    throw e;
  }
}

}  // namespace tmorph::python
