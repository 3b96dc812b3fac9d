// The scatter/gather of one rank protocol (rank_services.h), the same for every protocol: rank 0 scatters requests
// to ranks 1..n-1 and gathers their replies, a rank's failure (rank_failure.h) decoded on the way; a rank > 0
// serves a request and answers, its failure sent to rank 0 instead of escaping. Every message it sends or takes
// carries a tag of the protocol; the bytes are the protocol's (wire.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "distributed/rank_failure.h"
#include "distributed/rank_services.h"
#include "distributed/world.h"

namespace tmorph {

class RankExchange {
 public:
  // `request_tag` and `fail_tag` are tags of `protocol`.
  RankExchange(World& world, const RankProtocol& protocol, int request_tag, int fail_tag);

  // Rank 0: sends request(k) to each rank k = 1..ranks-1 in rank order (each send returns once MPI may reuse the
  // buffer), calling sent(k) after each (e.g. to remember that rank k owes an answer).
  void scatter(int ranks, const std::function<std::vector<uint8_t>(int rank)>& request,
               const std::function<void(int rank)>& sent = {}) const;

  struct Reply {
    RankMessage message;
    std::optional<RankFailure> failure;  // set when the message carries the failure tag
  };
  // Rank 0: waits for rank `rank`'s next message. `what` names it in errors (a damaged failure report; a tag outside
  // the protocol: Error(Internal)).
  Reply receive(int rank, const std::string& what) const;
  // Rank 0: the next message from any rank when one has arrived (false: none yet); `what(source)` names it.
  bool poll(Reply& out, const std::function<std::string(int source)>& what) const;

  // A rank > 0: runs `work`, which answers with reply(); when it throws, the error goes to rank 0 with the failure
  // tag instead (send_failure_to_rank0).
  void serve(const std::function<void()>& work) const;
  // A rank > 0: sends rank 0 one message of this protocol.
  void reply(int tag, const std::vector<uint8_t>& bytes) const;

  World& world() const { return world_; }

 private:
  Reply decoded(RankMessage m, const std::string& what) const;
  World& world_;
  RankProtocol protocol_;
  int request_tag_, fail_tag_;
};

}  // namespace tmorph
