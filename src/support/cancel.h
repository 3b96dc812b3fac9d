// A caller's request that a long engine call stop early. The engine checks the flag at its natural
// boundaries (a batch of frames read, an SSB loss evaluation) and throws the one error below; work already
// done is discarded. A face that sets the flag knows why (the Python module: Ctrl-C) and reports that
// reason instead of this error, which therefore never reaches a user as such.
#pragma once

#include <atomic>
#include <stdexcept>

namespace tmorph {

// Thrown at a cancellation point when the caller's flag is set.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled by the caller") {}
};

// A cancellation point: throws Cancelled when `flag` is set and true (null: never cancelled).
inline void check_cancel(const std::atomic<bool>* flag) {
  if (flag && flag->load(std::memory_order_relaxed)) throw Cancelled();
}

}  // namespace tmorph
