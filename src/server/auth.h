// Who may talk to the server. With a token, every request (API and static) must carry it: the header
// "Authorization: Bearer TOKEN", the query parameter ?token=TOKEN (which also sets the cookie
// tm_token, HttpOnly, SameSite=Strict, so a browser's later requests carry it), or that cookie.
// Without a token the server is bound to loopback, and a request must name a loopback host in its Host
// header, so a web page cannot reach it through DNS rebinding.
#pragma once

#include <string>

#include <httplib.h>

namespace tmorph::server {

// 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

// 32 lowercase hex digits (128 bits) from /dev/urandom. Throws Error(Io) when it cannot be read.
std::string generate_token();

// true when the request may proceed; otherwise fills `res` with 401 or 403 JSON.
bool admit(const std::string& token, const httplib::Request& req, httplib::Response& res);

}  // namespace tmorph::server
