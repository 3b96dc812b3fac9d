// A request's query read against an operation's declaration (core/param_schema.h): constructing it refuses a
// parameter the operation does not take (token, which authentication reads, aside) and one given more than
// once; each getter parses its parameter by the declared kind and range. Refusals are Error(InvalidArgument),
// which guarded() answers with 400 and the message naming the parameter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <httplib.h>

#include "core/param_schema.h"

namespace tmorph::server {

class DeclaredQuery {
 public:
  DeclaredQuery(const httplib::Request& req, const OperationSchema& op);

  const OperationSchema& operation() const { return op_; }
  // The text as given; nullopt when absent.
  std::optional<std::string> text(std::string_view name) const;
  std::optional<double> number(std::string_view name) const;
  std::optional<uint64_t> count(std::string_view name) const;
  // A switch: `absent` when not given.
  bool on(std::string_view name, bool absent) const;
  std::optional<std::string> choice(std::string_view name) const;
  std::optional<std::vector<uint64_t>> counts(std::string_view name) const;
  std::optional<std::vector<double>> numbers(std::string_view name) const;

 private:
  const httplib::Request& req_;
  const OperationSchema& op_;
  const ParamSpec& spec(std::string_view name) const;
};

}  // namespace tmorph::server
