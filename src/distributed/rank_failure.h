// A rank's failure as it travels to rank 0: the error's kind and message and the rank's host, so that rank 0
// can end the job with the same kind of error, naming the rank and where it ran.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/world.h"
#include "tensormorph/error.h"

namespace tmorph {

struct RankFailure {
  Error error;
  std::string host;
};

// Runs `work`; when it throws, sends the error to rank 0 as a message with `tag` (Error as it is,
// std::bad_alloc as Io "out of memory", any other exception as Internal) instead of letting it escape.
void send_failure_to_rank0(World& world, int tag, const std::function<void()>& work);

// The failure in a message sent by send_failure_to_rank0. Throws Error(BadInput) naming `what` when damaged.
RankFailure decode_rank_failure(const std::vector<uint8_t>& bytes, const std::string& what);

}  // namespace tmorph
