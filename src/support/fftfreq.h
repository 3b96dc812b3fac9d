// numpy.fft.fftfreq(n)[i]: the frequency of DFT bin i of n samples, in cycles per sample — i / n for the first
// ceil(n / 2) bins, (i − n) / n after (the Nyquist bin of an even n is −½).
#pragma once

#include <cstdint>

namespace tmorph {

inline double fftfreq(uint64_t i, uint64_t n) {
  const int64_t k = i < (n + 1) / 2 ? static_cast<int64_t>(i) : static_cast<int64_t>(i) - static_cast<int64_t>(n);
  return static_cast<double>(k) / static_cast<double>(n);
}

}  // namespace tmorph
