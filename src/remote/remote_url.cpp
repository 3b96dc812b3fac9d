#include "remote/remote_url.h"

#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <vector>

#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph::remote {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw Error(ErrorKind::InvalidArgument, path + ": not a usable remote path: " + why);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  for (;;) {
    const size_t at = s.find(sep, from);
    out.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return out;
    from = at + 1;
  }
}

// Path segments must be non-empty, not '.' or '..', printable ASCII without spaces.
void check_segments(const std::string& given, const std::vector<std::string>& segments) {
  for (const auto& seg : segments) {
    if (seg.empty() || seg == "." || seg == "..") bad(given, "empty, '.' or '..' path segment");
    for (unsigned char ch : seg)
      if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#' || ch == '\\') bad(given, "a character that is not allowed in a path segment");
  }
}

}  // namespace

bool is_remote_path(const std::string& path) {
  return starts_with(path, "http://") || starts_with(path, "https://") || starts_with(path, "hf://") || starts_with(path, "s3://");
}

std::string hf_endpoint() {
  std::string e;
  if (const char* env = std::getenv("HF_ENDPOINT"); env && *env) e = env;
  else if (auto s = Settings::load().get("remote.hf_endpoint")) e = *s;
  else e = "https://huggingface.co";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

namespace {

std::string first_of(std::initializer_list<const char*> env, const char* setting) {
  for (const char* name : env)
    if (const char* v = std::getenv(name); v && *v) return v;
  if (auto s = Settings::load().get(setting)) return *s;
  return "";
}

// S3's bucket naming rules: 3-63 characters of lower-case letters, digits, '.' and '-', starting and ending with a
// letter or digit.
bool s3_bucket_name(const std::string& b) {
  if (b.size() < 3 || b.size() > 63 || !std::isalnum(static_cast<unsigned char>(b.front())) ||
      !std::isalnum(static_cast<unsigned char>(b.back())))
    return false;
  for (unsigned char ch : b)
    if (!(std::islower(ch) || std::isdigit(ch) || ch == '.' || ch == '-')) return false;
  return true;
}

}  // namespace

std::string s3_region() {
  const std::string r = first_of({"AWS_REGION", "AWS_DEFAULT_REGION"}, "remote.s3_region");
  return r.empty() ? "us-east-1" : r;
}

std::string s3_endpoint(const std::string& region) {
  std::string e = first_of({"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}, "remote.s3_endpoint");
  if (e.empty()) e = "https://s3." + region + ".amazonaws.com";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

RemoteUrl parse_remote_url(const std::string& path, const std::string& endpoint_given) {
  RemoteUrl u;
  u.given = path;
  if (starts_with(path, "s3://")) {
    const auto parts = split(path.substr(5), '/');
    if (parts.size() < 2) bad(path, "expected s3://BUCKET/KEY");
    if (!s3_bucket_name(parts[0])) bad(path, "'" + parts[0] + "' is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-')");
    if (path.find_first_of("?#") != std::string::npos) bad(path, "a query or fragment is not supported");
    check_segments(path, std::vector<std::string>(parts.begin() + 1, parts.end()));
    const std::string region = s3_region();
    const std::string endpoint = endpoint_given.empty() ? s3_endpoint(region) : endpoint_given;
    if (!starts_with(endpoint, "http://") && !starts_with(endpoint, "https://"))
      bad(path, "the s3 endpoint '" + endpoint + "' is not an http:// or https:// URL");
    RemoteUrl base = parse_remote_url(endpoint + "/" + path.substr(5));
    base.given = path;
    base.s3 = true;
    base.s3_region = region;
    return base;
  }
  if (starts_with(path, "hf://")) {
    // ORG/NAME[@REVISION]/FILE...
    const auto parts = split(path.substr(5), '/');
    if (parts.size() < 3) bad(path, "expected hf://ORG/NAME[@REVISION]/FILE");
    std::string name = parts[1], revision = "main";
    if (const size_t at = name.find('@'); at != std::string::npos) revision = name.substr(at + 1), name = name.substr(0, at);
    std::vector<std::string> rest(parts.begin() + 2, parts.end());
    check_segments(path, {parts[0], name, revision});
    check_segments(path, rest);
    const std::string endpoint = endpoint_given.empty() ? hf_endpoint() : endpoint_given;
    if (!starts_with(endpoint, "http://") && !starts_with(endpoint, "https://"))
      bad(path, "the hf endpoint '" + endpoint + "' is not an http:// or https:// URL");
    std::string file;
    for (const auto& r : rest) file += "/" + r;
    RemoteUrl base = parse_remote_url(endpoint + "/" + parts[0] + "/" + name + "/resolve/" + revision + file);
    base.given = path;
    base.hf = true;
    return base;
  }
  const size_t scheme_end = path.find("://");
  if (scheme_end == std::string::npos || !is_remote_path(path)) bad(path, "expected http://, https:// or hf://");
  if (path.find_first_of("?#") != std::string::npos) bad(path, "a query or fragment is not supported");
  const std::string rest = path.substr(scheme_end + 3);
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0) bad(path, "expected SCHEME://HOST/PATH");
  u.host = rest.substr(0, slash);
  if (u.host.find('@') != std::string::npos) bad(path, "credentials in the URL are not accepted (use the environment)");
  for (unsigned char ch : u.host)
    if (!(std::isalnum(ch) || ch == '.' || ch == '-' || ch == ':' || ch == '[' || ch == ']')) bad(path, "a character that is not allowed in a host name");
  u.path = rest.substr(slash);
  check_segments(path, split(u.path.substr(1), '/'));
  u.url = path.substr(0, scheme_end + 3) + u.host + u.path;
  return u;
}

RemoteUrl sibling(const RemoteUrl& u, const std::string& file_name) {
  if (file_name.empty() || file_name == "." || file_name == ".." || file_name.find('/') != std::string::npos)
    bad(u.given, "a file beside it must be a plain name, not '" + file_name + "'");
  RemoteUrl s = u;
  s.path = u.path.substr(0, u.path.rfind('/') + 1) + file_name;
  s.url = u.url.substr(0, u.url.rfind('/') + 1) + file_name;
  s.given = u.given.substr(0, u.given.rfind('/') + 1) + file_name;
  check_segments(s.given, {file_name});
  return s;
}

}  // namespace tmorph::remote
