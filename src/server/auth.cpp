#include "server/auth.h"

#include <arpa/inet.h>

#include <cstdio>
#include <fstream>

#include "server/http_util.h"
#include "tensormorph/error.h"

namespace tmorph::server {

namespace {

// Compares in time independent of where the strings differ.
bool same(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string cookie_value(const httplib::Request& req, const std::string& name) {
  for (size_t k = 0; k < req.get_header_value_count("Cookie"); ++k) {
    const std::string c = req.get_header_value("Cookie", k);
    size_t pos = 0;
    while (pos < c.size()) {
      size_t end = c.find(';', pos);
      if (end == std::string::npos) end = c.size();
      std::string item = c.substr(pos, end - pos);
      item.erase(0, item.find_first_not_of(' '));
      if (item.compare(0, name.size() + 1, name + "=") == 0) return item.substr(name.size() + 1);
      pos = end + 1;
    }
  }
  return {};
}

// The host part of a Host header: "[::1]:8765" -> "::1", "localhost:80" -> "localhost".
std::string host_part(const std::string& h) {
  if (!h.empty() && h[0] == '[') {
    const size_t close = h.find(']');
    return close == std::string::npos ? h : h.substr(1, close - 1);
  }
  return h.substr(0, h.find(':'));
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

std::string generate_token() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[16];
  if (!in.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    throw Error(ErrorKind::Io, "/dev/urandom: cannot read a random token");
  std::string hex;
  for (unsigned char b : bytes) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  return hex;
}

bool admit(const std::string& token, const httplib::Request& req, httplib::Response& res) {
  if (token.empty()) {
    // Exactly one Host header, naming a loopback host: an empty or missing one names none (and HTTP/1.1
    // requires it), two could be read differently by a proxy in front.
    const size_t count = req.get_header_value_count("Host");
    const std::string host = req.get_header_value("Host");
    if (count == 1 && !host.empty() && is_loopback_host(host_part(host))) return true;
    // (httplib drops a header without a value: an empty Host reads as none.)
    const std::string what = count > 1       ? std::to_string(count) + " Host headers"
                             : host.empty() ? "no Host header (or an empty one)"
                                            : "Host '" + host + "', not a loopback name";
    send_error(res, 403, "the request has " + what + "; a server without a token answers only to requests naming "
                         "127.0.0.1, localhost or [::1] in one Host header");
    return false;
  }
  const std::string auth = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (auth.compare(0, bearer.size(), bearer) == 0 && same(auth.substr(bearer.size()), token)) return true;
  if (req.get_param_value_count("token") == 1 && same(req.get_param_value("token"), token)) {
    res.set_header("Set-Cookie", "tm_token=" + token + "; Path=/; HttpOnly; SameSite=Strict");
    return true;
  }
  if (same(cookie_value(req, "tm_token"), token)) return true;
  res.set_header("WWW-Authenticate", "Bearer");
  send_error(res, 401, "a token is required: send 'Authorization: Bearer TOKEN' or ?token=TOKEN");
  return false;
}

}  // namespace tmorph::server
