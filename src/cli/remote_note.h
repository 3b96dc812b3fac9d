// What a command on a remote checkpoint transferred, said on stderr when it ends without an error
// ("tensormorph: fetched N bytes in K requests (R retries) from HOST; …", docs/remote.md).
#pragma once

#include <cstdio>
#include <exception>

#include "app/remote_checkpoint.h"

namespace tmorph::cli {

class RemoteTransferNote {
 public:
  explicit RemoteTransferNote(const app::RemoteCheckpoint* remote) : remote_(remote) {}
  ~RemoteTransferNote() {
    if (remote_ && std::uncaught_exceptions() == 0) std::fprintf(stderr, "tensormorph: %s\n", remote_->transfer_text().c_str());
  }
  RemoteTransferNote(const RemoteTransferNote&) = delete;
  RemoteTransferNote& operator=(const RemoteTransferNote&) = delete;

 private:
  const app::RemoteCheckpoint* remote_;
};

}  // namespace tmorph::cli
