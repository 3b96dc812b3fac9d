#include "distributed/rank_failure.h"

#include <new>

#include "distributed/wire.h"

namespace tmorph {

namespace {

void send(World& world, int tag, const Error& e) {
  WireWriter w;
  w.put(static_cast<int32_t>(e.kind())).put_string(e.what()).put_string(world.host());
  world.send(0, tag, w.bytes());
}

}  // namespace

void send_failure_to_rank0(World& world, int tag, const std::function<void()>& work) {
  try {
    work();
  } catch (const Error& e) {
    send(world, tag, e);
  } catch (const std::bad_alloc&) {
    send(world, tag, Error(ErrorKind::Io, "out of memory"));
  } catch (const std::exception& e) {
    send(world, tag, Error(ErrorKind::Internal, e.what()));
  }
}

RankFailure decode_rank_failure(const std::vector<uint8_t>& bytes, const std::string& what) {
  WireReader in(bytes, what);
  const int32_t kind = in.get<int32_t>();
  if (kind < static_cast<int32_t>(ErrorKind::InvalidArgument) || kind > static_cast<int32_t>(ErrorKind::Internal))
    throw Error(ErrorKind::BadInput, what + ": unknown error kind " + std::to_string(kind));
  std::string text = in.get_string();
  std::string host = in.get_string();
  in.expect_end();
  return {Error(static_cast<ErrorKind>(kind), text), std::move(host)};
}

}  // namespace tmorph
