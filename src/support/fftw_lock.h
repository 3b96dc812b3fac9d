// FFTW's planners (fftw_plan_* and fftwf_plan_*) are not thread-safe; executing a plan is. Every plan
// creation and destruction in Tensormorph holds this lock.
#pragma once

#include <mutex>

namespace tmorph {

inline std::mutex& fftw_planner_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace tmorph
