#include "cli/progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string_view>

#include "stem/ssb/ssb_fit.h"

namespace tmorph::cli {

std::string clock_text(double seconds) {
  if (!(seconds >= 0) || seconds > 360000) return "--:--";
  const auto s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string bar_text(double fraction, int width) {
  const double f = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  std::string bar(static_cast<size_t>(f * width), '#');
  bar.resize(static_cast<size_t>(width), '.');
  return "[" + bar + "]";
}

std::function<void(uint64_t, uint64_t)> terminal_frames_progress(const std::string& what, bool quiet) {
  if (quiet || !isatty(STDERR_FILENO)) return {};
  using Clock = std::chrono::steady_clock;
  struct Line {
    Clock::time_point start = Clock::now(), drawn = start;
    uint64_t total = 0;  // of the pass being drawn: a new total (or a count going back) starts a new pass
    uint64_t last = 0;
  };
  auto line = std::make_shared<Line>();
  return [what, line](uint64_t done, uint64_t total) {
    const Clock::time_point now = Clock::now();
    if (total != line->total || done < line->last) *line = Line{now, now, total, 0};  // first drawn after 100 ms
    line->last = done;
    const bool end = done >= total;
    if (!end && now - line->drawn < std::chrono::milliseconds(100)) return;
    line->drawn = now;
    const double seconds = std::chrono::duration<double>(now - line->start).count();
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    const double eta = rate > 0 ? static_cast<double>(total - std::min(done, total)) / rate : -1;
    std::fprintf(stderr, "\r%s %s %5.1f%%  %llu/%llu frames  %.0f frames/s  ETA %s\x1b[K%s", what.c_str(),
                 bar_text(total ? static_cast<double>(done) / static_cast<double>(total) : 1.0).c_str(),
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total), rate, clock_text(eta).c_str(),
                 end ? "\n" : "");
    std::fflush(stderr);
  };
}

struct FitProgressLine::State {
  std::chrono::steady_clock::time_point drawn = std::chrono::steady_clock::now();
  SsbFitProgress last;  // what the fit said last (stage names are static strings)
  bool open = false;    // a stage's line is drawn or due, and not ended
};

namespace {

void draw_fit_line(const SsbFitProgress& p) {
  std::string counted = std::to_string(p.stage_evaluations);
  if (p.stage_planned)
    counted = bar_text(static_cast<double>(p.stage_evaluations) / p.stage_planned) + " " + counted + "/" + std::to_string(p.stage_planned);
  std::fprintf(stderr, "\rfit: %s %s evaluations  best loss %.6g  %.1f s\x1b[K", p.stage, counted.c_str(), p.best_loss, p.seconds);
  std::fflush(stderr);
}

}  // namespace

FitProgressLine::FitProgressLine(bool quiet) {
  if (!quiet && isatty(STDERR_FILENO)) state_ = std::make_shared<State>();
}

FitProgressLine::~FitProgressLine() { finish(); }

void FitProgressLine::finish() {
  if (!state_ || !state_->open) return;
  draw_fit_line(state_->last);  // the stage as it ended
  std::fputs("\n", stderr);
  state_->open = false;
}

std::function<void(const SsbFitProgress&)> FitProgressLine::callback() {
  if (!state_) return {};
  return [s = state_](const SsbFitProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (s->open && std::string_view(s->last.stage) != p.stage) {  // the stage before ends on a line of its own
      draw_fit_line(s->last);
      std::fputs("\n", stderr);
      s->drawn = now - std::chrono::milliseconds(100);
    }
    s->last = p, s->open = true;
    if (now - s->drawn < std::chrono::milliseconds(100)) return;
    s->drawn = now;
    draw_fit_line(p);
  };
}

}  // namespace tmorph::cli
