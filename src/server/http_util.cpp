#include "server/http_util.h"

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <new>

#include "core/json_bounded.h"
#include "core/param_schema.h"
#include "tensormorph/error.h"

namespace tmorph::server {

void send_json(httplib::Response& res, const nlohmann::json& doc, int status) {
  res.status = status;
  // Invalid UTF-8 (a tensor name from a foreign file) is replaced rather than failing the response.
  res.set_content(doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
  res.set_header("Cache-Control", "no-store");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, {{"error", message}}, status);
}

namespace {

int status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return 400;
    case ErrorKind::Unavailable:
    case ErrorKind::PrecisionRefused:
    case ErrorKind::Incomplete: return 409;  // as an acquisition with readiness problems is
    case ErrorKind::BadInput:
    case ErrorKind::Io:
    case ErrorKind::Internal: return 500;
  }
  return 500;
}

}  // namespace

httplib::Server::Handler guarded(Handler h) {
  return [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      h(req, res);
    } catch (const HttpError& e) {
      send_error(res, e.status(), e.what());
    } catch (const Error& e) {
      send_error(res, status_of(e.kind()), e.what());
    } catch (const std::bad_alloc&) {
      send_error(res, 503, "out of memory");
    } catch (const std::exception& e) {
      send_error(res, 500, std::string("internal error: ") + e.what());
    }
  };
}

size_t times_given(const httplib::Request& req, const std::string& name) {
  size_t raw = 0;
  const size_t q = req.target.find('?');
  if (q != std::string::npos) {
    std::string_view rest = std::string_view(req.target).substr(q + 1);
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const std::string key(pair.substr(0, pair.find('=')));
      if (!key.empty() && httplib::detail::decode_url(key, true) == name) ++raw;
      if (amp == std::string_view::npos) break;
      rest.remove_prefix(amp + 1);
    }
  }
  return std::max(raw, req.get_param_value_count(name.c_str()));
}

std::optional<std::string> text_param(const httplib::Request& req, const char* name) {
  const size_t n = times_given(req, name);
  if (n == 0) return std::nullopt;
  if (n > 1) throw HttpError(400, std::string("parameter '") + name + "' is given more than once");
  return req.get_param_value(name);
}

std::optional<uint64_t> uint_param(const httplib::Request& req, const char* name) {
  const auto text = text_param(req, name);
  if (!text) return std::nullopt;
  const bool digits = !text->empty() && text->size() <= 16 && text->find_first_not_of("0123456789") == std::string::npos;
  const uint64_t v = digits ? std::strtoull(text->c_str(), nullptr, 10) : 0;
  if (!digits || v >= (uint64_t{1} << 53))
    throw HttpError(400, std::string("parameter '") + name + "': expected a non-negative integer, got '" + *text + "'");
  return v;
}

nlohmann::json body_object(const httplib::Request& req) {
  nlohmann::json body;
  try {
    body = parse_json_bounded(req.body, "request body");
  } catch (const Error& e) {
    throw HttpError(400, std::string("the body must be a JSON object: ") + e.what());
  }
  if (!body.is_object()) throw HttpError(400, "the body must be a JSON object");
  return body;
}

double parse_double(const std::string& text, const char* name) {
  double v = 0;
  if (!parse_decimal(text, v))  // core/param_schema.h's grammar: no '+', spaces, hexadecimal, nan or inf
    throw HttpError(400, std::string("parameter '") + name + "': expected a finite number, got '" + text + "'");
  return v;
}

}  // namespace tmorph::server
