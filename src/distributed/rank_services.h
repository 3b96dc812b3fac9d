// The services ranks > 0 give rank 0, one per protocol, in one registry: each protocol (indexing, 4D-STEM products,
// SSB bands, …) registers its tag range and the handler of its requests, and the worker loop of a rank > 0
// (serve_rank_requests) hands each message from rank 0 to the service whose request it is, until rank 0 ends the
// service (world.h: kTagEndOfService).
//
// Contract:
// - Tags 0..kFirstProtocolTag-1 are the world's own (end of service); a protocol's range [first, last] lies above
//   them, holds its request tag, and overlaps no other registered protocol's range: add() refuses one that
//   does with Error(Internal) naming both protocols and their ranges, so two protocols can never read each
//   other's messages.
// - The registry knows no domain: a handler is whatever the protocol's owner built with the rank's runtime.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/world.h"

namespace tmorph {

constexpr int kFirstProtocolTag = 16;

// A protocol's tags, inclusive.
struct RankProtocol {
  const char* name;  // for people: "indexing", "4D-STEM products"
  int first_tag, last_tag;
  // The protocol's k-th tag (first_tag + k).
  constexpr int tag(int k) const { return first_tag + k; }
  constexpr bool holds(int tag) const { return tag >= first_tag && tag <= last_tag; }
};

struct RankService {
  RankProtocol protocol;
  int request_tag = 0;  // what rank 0 sends to ask for the service (within the range)
  // Runs on a rank > 0 for one request from rank 0; answers rank 0 itself (RankExchange::serve).
  std::function<void(const RankMessage&, World&)> handle;
};

class RankServiceRegistry {
 public:
  // Error(Internal) for a range below kFirstProtocolTag, empty, without its request tag, or overlapping one
  // registered before (both named), or a service without a handler.
  void add(RankService service);
  // The service whose request tag is `tag`, or null.
  const RankService* find(int tag) const;
  const std::vector<RankService>& services() const { return services_; }

 private:
  std::vector<RankService> services_;
};

// A rank > 0: receives rank 0's messages and hands each to its service until rank 0 ends the service; returns the
// exit code rank 0 sent. A message no service asks for is Error(Internal) naming its tag.
int serve_rank_requests(World& world, const RankServiceRegistry& services);

}  // namespace tmorph
