#include "cli/progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

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

}  // namespace tmorph::cli
