// Progress lines on stderr for long CLI work: the bar and clock text that `index` and the 4D-STEM commands share,
// and a frame-count progress callback for stem loading (LoadRequest.progress) that draws on a terminal only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tmorph {
struct SsbFitProgress;
}

namespace tmorph::cli {

// "1:05" or "2:03:07"; "--:--" when unknown (negative, NaN or over 100 hours).
std::string clock_text(double seconds);

// "[######..................]": `width` characters between brackets, the done fraction (clamped to [0, 1]) as '#'.
std::string bar_text(double fraction, int width = 24);

// When stderr is a terminal and `quiet` is false: a callback for LoadRequest.progress that redraws one line in place
// ("WHAT [bar]  45.0%  2300/5120 frames  1840 frames/s  ETA 0:01"), at most every 100 ms and first 100 ms after a pass
// starts, and always at the pass's last frame, which ends the line (a product of several passes draws a line per pass). Otherwise an empty function (nothing is drawn: pipes and
// --json output stay clean).
std::function<void(uint64_t frames_done, uint64_t frames_total)> terminal_frames_progress(const std::string& what, bool quiet);

// The SSB fit's progress on a terminal's stderr (nothing when quiet or on a pipe): "fit: search [####....] 23/41
// evaluations  best loss 0.00784  1.2 s", then "fit: simplex  57 evaluations  best loss ...", redrawn at most every
// 100 ms (first after 100 ms), a new line when the stage changes; finish() (or the destructor) ends the last line.
class FitProgressLine {
 public:
  explicit FitProgressLine(bool quiet);
  ~FitProgressLine();
  FitProgressLine(const FitProgressLine&) = delete;
  FitProgressLine& operator=(const FitProgressLine&) = delete;
  // For SsbFitOptions::progress; empty when nothing is drawn. This object must outlive the fit.
  std::function<void(const SsbFitProgress&)> callback();
  void finish();

 private:
  struct State;
  std::shared_ptr<State> state_;  // null when nothing is drawn
};

}  // namespace tmorph::cli
