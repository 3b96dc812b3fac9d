// A query read against its operation's declaration (declared_query.h).
#include "server/declared_query.h"

#include "server/http_util.h"
#include "tensormorph/error.h"

namespace tmorph::server {

DeclaredQuery::DeclaredQuery(const httplib::Request& req, const OperationSchema& op) : req_(req), op_(op) {
  for (const auto& [name, value] : req.params) {
    if (name == "token") continue;  // read by authentication (auth.h), before any endpoint
    if (!op.find(Face::Http, name)) refuse_unknown(op, Face::Http, name);
    if (times_given(req, name) > 1)
      throw Error(ErrorKind::InvalidArgument, "parameter '" + name + "' is given more than once");
  }
}

const ParamSpec& DeclaredQuery::spec(std::string_view name) const {
  const ParamSpec* p = op_.find(Face::Http, name);
  if (!p) throw Error(ErrorKind::Internal, std::string(op_.name) + ": the endpoint reads '" + std::string(name) + "', which it does not declare");
  return *p;
}

std::optional<std::string> DeclaredQuery::text(std::string_view name) const {
  const ParamSpec& p = spec(name);
  const std::string n(name);
  if (!req_.has_param(n.c_str())) return std::nullopt;
  std::string value = req_.get_param_value(n.c_str());
  if (p.kind == ParamKind::Text) check_text(p, Face::Http, value);
  return value;
}

std::optional<double> DeclaredQuery::number(std::string_view name) const {
  const auto t = text(name);
  return t ? std::optional<double>(parse_number(spec(name), Face::Http, *t)) : std::nullopt;
}

std::optional<uint64_t> DeclaredQuery::count(std::string_view name) const {
  const auto t = text(name);
  return t ? std::optional<uint64_t>(parse_count(spec(name), Face::Http, *t)) : std::nullopt;
}

bool DeclaredQuery::on(std::string_view name, bool absent) const {
  const auto t = text(name);
  return t ? parse_switch(spec(name), Face::Http, *t) : absent;
}

std::optional<std::string> DeclaredQuery::choice(std::string_view name) const {
  const auto t = text(name);
  return t ? std::optional<std::string>(parse_choice(spec(name), Face::Http, *t)) : std::nullopt;
}

std::optional<std::vector<uint64_t>> DeclaredQuery::counts(std::string_view name) const {
  const auto t = text(name);
  return t ? std::optional<std::vector<uint64_t>>(parse_counts(spec(name), Face::Http, *t)) : std::nullopt;
}

std::optional<std::vector<double>> DeclaredQuery::numbers(std::string_view name) const {
  const auto t = text(name);
  return t ? std::optional<std::vector<double>>(parse_numbers(spec(name), Face::Http, *t)) : std::nullopt;
}

}  // namespace tmorph::server
