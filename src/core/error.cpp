#include "tensormorph/error.h"

namespace tmorph {

int Error::exit_code() const {
  switch (kind_) {
    case ErrorKind::InvalidArgument: return 2;
    case ErrorKind::BadInput: return 3;
    case ErrorKind::Unavailable: return 4;
    case ErrorKind::PrecisionRefused: return 5;
    case ErrorKind::Io: return 6;
    case ErrorKind::Incomplete: return 7;
    case ErrorKind::Internal: return 70;
  }
  return 70;
}

}  // namespace tmorph
