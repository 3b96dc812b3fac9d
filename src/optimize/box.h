// A box-bounded search space and a deterministic random source for the optimisers in this folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmorph {

struct SearchDimension {
  std::string name;
  double low = 0, high = 1;  // inclusive bounds, low < high
};

using Point = std::vector<double>;  // one value per SearchDimension, in its units

// splitmix64: a small generator whose sequence is fixed by its seed on every platform and compiler (unlike the
// std:: distributions), so seeded searches give byte-identical results everywhere the libm agrees.
class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace tmorph
