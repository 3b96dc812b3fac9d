// Small pieces every API handler uses: JSON responses, the mapping of errors to HTTP statuses, and
// query parameters parsed with errors that name the parameter.
//
// Error contract: every API error is a JSON object {"error": MESSAGE} with status
//   400 a malformed request (bad parameter, bad body; the message names the parameter),
//   401 missing or wrong token, 403 (no token) not exactly one Host header naming a loopback host,
//   404 unknown checkpoint, tensor, route or file, 409 the tensor cannot serve this (no pyramid, a
//   format no backend here reads), 413 a body over the limit, 500 a damaged index or a bug.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tmorph::server {

// Thrown by handlers for a response with this status and {"error": message}.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

void send_json(httplib::Response& res, const nlohmann::json& doc, int status = 200);
void send_error(httplib::Response& res, int status, const std::string& message);

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
// Runs `h`, turning HttpError, tmorph::Error (InvalidArgument 400, Unavailable and PrecisionRefused
// 409, BadInput/Io/Internal 500), std::bad_alloc (503) and any other exception (500) into JSON errors.
httplib::Server::Handler guarded(Handler h);

// Query parameter `name` as an unsigned integer (decimal digits only, < 2^53); nullopt when absent.
// Throws HttpError 400 naming the parameter otherwise.
std::optional<uint64_t> uint_param(const httplib::Request& req, const char* name);
// How many times the query names `name`, counted in the raw request target: cpp-httplib drops a repeated
// identical NAME=VALUE pair while parsing, so its own count says 1 for "stat=mean&stat=mean".
size_t times_given(const httplib::Request& req, const std::string& name);
// Query parameter as text; nullopt when absent. Throws 400 when given twice.
std::optional<std::string> text_param(const httplib::Request& req, const char* name);
// A finite double; throws 400 naming `name` otherwise.
// The request's body as a JSON object, parsed with the limits of every JSON from outside
// (core/json_bounded.h: depth, NUL bytes, repeated keys). Throws HttpError 400 "the body must be a JSON
// object..." otherwise.
nlohmann::json body_object(const httplib::Request& req);

double parse_double(const std::string& text, const char* name);

}  // namespace tmorph::server
