#include "distributed/rank_exchange.h"

#include "tensormorph/error.h"

namespace tmorph {

namespace {

void check_tag(const RankProtocol& p, int tag, const std::string& what) {
  if (!p.holds(tag))
    throw Error(ErrorKind::Internal, what + ": tag " + std::to_string(tag) + " is not one of protocol '" + p.name + "' (" +
                                         std::to_string(p.first_tag) + ".." + std::to_string(p.last_tag) + ")");
}

}  // namespace

RankExchange::RankExchange(World& world, const RankProtocol& protocol, int request_tag, int fail_tag)
    : world_(world), protocol_(protocol), request_tag_(request_tag), fail_tag_(fail_tag) {
  check_tag(protocol_, request_tag, "the request tag");
  check_tag(protocol_, fail_tag, "the failure tag");
}

void RankExchange::scatter(int ranks, const std::function<std::vector<uint8_t>(int rank)>& request,
                           const std::function<void(int rank)>& sent) const {
  for (int k = 1; k < ranks; ++k) {
    world_.send(k, request_tag_, request(k));
    if (sent) sent(k);
  }
}

RankExchange::Reply RankExchange::decoded(RankMessage m, const std::string& what) const {
  check_tag(protocol_, m.tag, what);
  Reply r;
  if (m.tag == fail_tag_) r.failure = decode_rank_failure(m.bytes, what);
  r.message = std::move(m);
  return r;
}

RankExchange::Reply RankExchange::receive(int rank, const std::string& what) const { return decoded(world_.receive(rank), what); }

bool RankExchange::poll(Reply& out, const std::function<std::string(int source)>& what) const {
  RankMessage m;
  if (!world_.poll(m)) return false;
  const std::string name = what(m.source);
  out = decoded(std::move(m), name);
  return true;
}

void RankExchange::serve(const std::function<void()>& work) const { send_failure_to_rank0(world_, fail_tag_, work); }

void RankExchange::reply(int tag, const std::vector<uint8_t>& bytes) const {
  check_tag(protocol_, tag, "a reply to rank 0");
  world_.send(0, tag, bytes);
}

}  // namespace tmorph
