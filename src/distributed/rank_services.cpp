#include "distributed/rank_services.h"

#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::string describe(const RankProtocol& p) {
  return std::string("'") + p.name + "' (tags " + std::to_string(p.first_tag) + ".." + std::to_string(p.last_tag) + ")";
}

}  // namespace

void RankServiceRegistry::add(RankService service) {
  const RankProtocol& p = service.protocol;
  if (p.first_tag < kFirstProtocolTag || p.last_tag < p.first_tag)
    throw Error(ErrorKind::Internal, "rank protocol " + describe(p) + ": a range of tags from " + std::to_string(kFirstProtocolTag) +
                                         " up (the lower ones are the world's own)");
  if (!p.holds(service.request_tag))
    throw Error(ErrorKind::Internal, "rank protocol " + describe(p) + ": its request tag " + std::to_string(service.request_tag) +
                                         " is outside its range");
  if (!service.handle) throw Error(ErrorKind::Internal, "rank protocol " + describe(p) + ": no handler");
  for (const RankService& s : services_)
    if (p.first_tag <= s.protocol.last_tag && s.protocol.first_tag <= p.last_tag)
      throw Error(ErrorKind::Internal, "rank protocol " + describe(p) + " overlaps " + describe(s.protocol));
  services_.push_back(std::move(service));
}

const RankService* RankServiceRegistry::find(int tag) const {
  for (const RankService& s : services_)
    if (s.request_tag == tag) return &s;
  return nullptr;
}

int serve_rank_requests(World& world, const RankServiceRegistry& services) {
  for (;;) {
    const RankMessage m = world.receive(0);
    if (m.tag == kTagEndOfService) return World::end_of_service_code(m);
    const RankService* s = services.find(m.tag);
    if (!s) throw Error(ErrorKind::Internal, "unexpected message tag " + std::to_string(m.tag) + " from rank 0");
    s->handle(m, world);
  }
}

}  // namespace tmorph
