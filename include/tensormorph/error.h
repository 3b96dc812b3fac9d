// Error policy: C++ code throws tmorph::Error; the CLI catches it at the top, prints what() on stderr and
// exits with exit_code(). Plugins never throw across the C ABI; they return tm_status + tm_message.
#pragma once

#include <stdexcept>
#include <string>

namespace tmorph {

enum class ErrorKind {
  InvalidArgument,  // the user asked for something malformed (exit 2)
  BadInput,         // a file is truncated, corrupt or lies about its contents (exit 3)
  Unavailable,      // a requested backend/kernel cannot serve the request (exit 4)
  PrecisionRefused, // only an approximation could serve it and no consent was given (exit 5)
  Io,               // the OS refused (open, map, read) (exit 6)
  Incomplete,       // the command reported all it could, but some data was damaged or missing (exit 7)
  Internal,         // a bug (exit 70)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const;

 private:
  ErrorKind kind_;
};

}  // namespace tmorph
