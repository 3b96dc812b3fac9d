// Running a test once per Highway SIMD target, for kernels that dispatch dynamically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <hwy/targets.h>

namespace tmorph::test {

// Runs fn(target_name, is_default) once for every SIMD target compiled in and supported here, the default
// one (the one dispatch picks) first, then restores normal dispatch.
template <class Fn>
void for_each_simd_target(Fn fn) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  for (size_t i = 0; i < targets.size(); ++i) {
    hwy::SetSupportedTargetsForTest(targets[i]);
    fn(std::string(hwy::TargetName(targets[i])), i == 0);
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace tmorph::test
