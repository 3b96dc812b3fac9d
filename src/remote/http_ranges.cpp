#include "remote/http_ranges.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph::remote {

namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

// "bytes FIRST-LAST/TOTAL" (TOTAL may be '*'): false when it does not parse.
bool parse_content_range(const std::string& v, uint64_t& first, uint64_t& last, std::optional<uint64_t>& total) {
  unsigned long long a = 0, b = 0, t = 0;
  char star = 0;
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
    first = a, last = b, total = t;
    return b >= a;
  }
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%c", &a, &b, &star) == 3 && star == '*') {
    first = a, last = b, total.reset();
    return b >= a;
  }
  return false;
}

// Retry-After: delta seconds or an HTTP date; negative when absent or unreadable.
double parse_retry_after(const std::string& v) {
  if (v.empty()) return -1;
  if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) return v.size() > 9 ? 1e9 : std::atof(v.c_str());
  const time_t when = curl_getdate(v.c_str(), nullptr);
  if (when < 0) return -1;
  return std::max(0.0, static_cast<double>(when - std::time(nullptr)));
}

bool retryable_curl_code(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

std::string range_text(uint64_t offset, uint64_t bytes) {
  return "bytes " + std::to_string(offset) + "-" + std::to_string(offset + bytes - 1);
}

struct Piece {
  enum class Kind { Range, Whole } kind = Kind::Range;
  std::string url;
  uint64_t offset = 0, bytes = 0;     // Range: the bytes asked for
  uint64_t got = 0;                   // received and handed to the sink (kept across attempts)
  unsigned attempts = 0;
  Clock::time_point not_before{};
  bool done = false;
  // Whole: the body, at most max_body bytes; absent is 404 of an optional file.
  std::vector<uint8_t> body;
  uint64_t max_body = 0;
  bool optional = false, missing = false;
  const RemoteIdentity* expect = nullptr;  // Range: checked against every response
  RemoteIdentity seen;                     // identity of the latest response
  const RangeSink* sink = nullptr;
  bool clip_to_size = false;               // open(): the file may end before the bytes asked for

  // This attempt's response (reset at each status line: redirects send several).
  long status = 0;
  std::string content_range, retry_after_text;
  std::string error_page;            // the first bytes of a non-2xx response's body (an S3 error names its code)
  bool body_checked = false;
  uint64_t attempt_bytes = 0;
  std::string fatal;                 // set by a callback: the run fails with it
  ErrorKind fatal_kind = ErrorKind::Io;

  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::atomic<uint64_t>* counter = nullptr;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* p = static_cast<Piece*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    const size_t sp = line.find(' ');
    p->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
    p->content_range.clear(), p->retry_after_text.clear(), p->error_page.clear();
    p->seen.etag.clear(), p->seen.last_modified.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  const std::string name = lower(trim(line.substr(0, colon))), value = trim(line.substr(colon + 1));
  if (name == "content-range") p->content_range = value;
  else if (name == "etag") p->seen.etag = value;
  else if (name == "last-modified") p->seen.last_modified = value;
  else if (name == "retry-after") p->retry_after_text = value;
  return size * n;
}

// Checks a 206 response before its first byte is used: the range starts where this piece stands, and the
// file is the one `expect` names. Sets fatal and returns false otherwise.
bool check_range_response(Piece& p) {
  uint64_t first = 0, last = 0;
  std::optional<uint64_t> total;
  const std::string where = p.url + " (" + range_text(p.offset + p.got, p.bytes - p.got) + ")";
  if (!parse_content_range(p.content_range, first, last, total)) {
    p.fatal = where + ": answered 206 without a readable Content-Range ('" + p.content_range + "')";
    return false;
  }
  if (first != p.offset + p.got || last >= p.offset + p.bytes) {
    p.fatal = where + ": the server sent " + p.content_range + ", not the range asked for";
    return false;
  }
  if (total) p.seen.size = *total;
  if (p.clip_to_size && total && *total < p.offset + p.bytes) p.bytes = *total - p.offset;
  if (p.expect) {
    const RemoteIdentity& e = *p.expect;
    std::string changed;
    if (!e.etag.empty() && p.seen.etag != e.etag) changed = "its ETag is now " + (p.seen.etag.empty() ? std::string("absent") : p.seen.etag) + ", it was " + e.etag;
    else if (total && *total != e.size) changed = "its size is now " + std::to_string(*total) + " bytes, it was " + std::to_string(e.size);
    else if (!e.last_modified.empty() && !p.seen.last_modified.empty() && p.seen.last_modified != e.last_modified)
      changed = "its Last-Modified is now " + p.seen.last_modified + ", it was " + e.last_modified;
    if (!changed.empty()) {
      p.fatal = p.url + ": the file changed during this run (" + changed + "); nothing read from it after the change was used";
      p.fatal_kind = ErrorKind::BadInput;
      return false;
    }
  }
  return true;
}

// Keeps the start of an error response's body for its message; returns len (the rest is dropped).
size_t keep_error_page(Piece& p, const char* data, size_t len) {
  constexpr size_t kKept = 2048;
  if (p.error_page.size() < kKept) p.error_page.append(data, std::min(len, kKept - p.error_page.size()));
  return len;
}

// "HTTP 403" and, when the body is an S3 error document, its code and message: "HTTP 403 (S3
// SignatureDoesNotMatch: The request signature ...)".
std::string status_text(const Piece& p) {
  std::string text = "HTTP " + std::to_string(p.status);
  const auto element = [&](const char* name) -> std::string {
    const std::string open = std::string("<") + name + ">", close = std::string("</") + name + ">";
    const size_t a = p.error_page.find(open);
    const size_t b = a == std::string::npos ? a : p.error_page.find(close, a);
    if (b == std::string::npos) return "";
    std::string v = p.error_page.substr(a + open.size(), b - a - open.size());
    for (char& ch : v)
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
    return v.substr(0, 200);
  };
  if (p.error_page.find("<Error>") != std::string::npos) {
    const std::string code = element("Code"), message = element("Message");
    if (!code.empty()) text += " (S3 " + code + (message.empty() ? "" : ": " + message) + ")";
  }
  return text;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* p = static_cast<Piece*>(user);
  const size_t len = size * n;
  try {
    if (p->kind == Piece::Kind::Range) {
      if (p->status != 206) return keep_error_page(*p, data, len);  // judged when the response completes
      if (!p->body_checked) {
        if (!check_range_response(*p)) return 0;
        p->body_checked = true;
      }
      if (p->got + len > p->bytes) {
        p->fatal = p->url + " (" + range_text(p->offset, p->bytes) + "): the server sent more bytes than its Content-Range said";
        return 0;
      }
      (*p->sink)(p->offset + p->got, reinterpret_cast<const uint8_t*>(data), len);
      p->got += len;
    } else {
      if (p->status != 200) return keep_error_page(*p, data, len);
      if (p->body.size() + len > p->max_body) {
        p->fatal = p->url + ": larger than the " + std::to_string(p->max_body) + " bytes allowed for it";
        p->fatal_kind = ErrorKind::BadInput;
        return 0;
      }
      p->body.insert(p->body.end(), data, data + len);
    }
    p->attempt_bytes += len;
    p->counter->fetch_add(len);
  } catch (const std::exception& e) {
    p->fatal = e.what();
    return 0;
  }
  return len;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

FetchOptions FetchOptions::from_settings() {
  FetchOptions o;
  const Settings s = Settings::load();
  if (auto v = s.number("remote.attempts", 1, 100)) o.max_attempts = static_cast<unsigned>(*v);
  if (auto v = s.number("remote.stall_timeout_s", 1, 3600)) o.stall_timeout_s = static_cast<long>(*v);
  if (auto v = s.number("remote.in_flight", 1, 64)) o.max_in_flight = static_cast<unsigned>(*v);
  if (const char* ca = std::getenv("CURL_CA_BUNDLE"); ca && *ca) o.ca_file = ca;
  return o;
}

struct HttpRanges::Impl {
  CURLM* multi = nullptr;
  std::vector<CURL*> idle;  // easy handles kept for reuse
  ~Impl() {
    for (CURL* e : idle) curl_easy_cleanup(e);
    if (multi) curl_multi_cleanup(multi);
  }
};

HttpRanges::HttpRanges(FetchOptions options) : impl_(std::make_unique<Impl>()), options_(std::move(options)) {
  global_init();
  impl_->multi = curl_multi_init();
  if (!impl_->multi) throw Error(ErrorKind::Io, "libcurl: cannot create a multi handle");
  curl_multi_setopt(impl_->multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(options_.max_in_flight));
  curl_multi_setopt(impl_->multi, CURLMOPT_MAXCONNECTS, static_cast<long>(options_.max_in_flight * 2));
}

HttpRanges::~HttpRanges() = default;

namespace {

// Runs every piece to completion on `multi`: at most max_in_flight at once, retrying as FetchOptions says.
// Throws the first fatal error after every transfer in progress was removed.
void run_pieces(CURLM* multi, std::vector<CURL*>& idle, const FetchOptions& o, std::vector<Piece>& pieces,
                std::atomic<uint64_t>& requests, std::atomic<uint64_t>& retries) {
  std::vector<Piece*> active;
  struct Cleanup {
    CURLM* multi;
    std::vector<Piece*>& active;
    std::vector<CURL*>& idle;
    ~Cleanup() {
      for (Piece* p : active) {
        curl_multi_remove_handle(multi, p->easy);
        curl_easy_cleanup(p->easy);  // its connection may be mid-body: not reused
        curl_slist_free_all(p->headers);
        p->easy = nullptr, p->headers = nullptr;
      }
    }
  } cleanup{multi, active, idle};

  auto start = [&](Piece& p) {
    CURL* e;
    if (!idle.empty()) e = idle.back(), idle.pop_back(), curl_easy_reset(e);
    else if (!(e = curl_easy_init())) throw Error(ErrorKind::Io, "libcurl: cannot create a handle");
    p.easy = e;
    p.status = 0, p.body_checked = false, p.attempt_bytes = 0, p.errbuf[0] = 0;
    p.content_range.clear(), p.retry_after_text.clear(), p.error_page.clear();
    if (p.kind == Piece::Kind::Whole) p.body.clear();
    ++p.attempts;
    ++requests;
    curl_easy_setopt(e, CURLOPT_URL, p.url.c_str());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "tensormorph");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, o.connect_timeout_s);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, o.stall_timeout_s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, p.errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &p);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &p);
    if (!o.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, o.ca_file.c_str());
    curl_slist_free_all(p.headers);
    p.headers = nullptr;
    if (p.kind == Piece::Kind::Range)
      p.headers = curl_slist_append(p.headers, ("Range: bytes=" + std::to_string(p.offset + p.got) + "-" +
                                                std::to_string(p.offset + p.bytes - 1)).c_str());
    // libcurl (7.58+) drops a custom Authorization header on a redirect to another host.
    if (!o.bearer_token.empty()) p.headers = curl_slist_append(p.headers, ("Authorization: Bearer " + o.bearer_token).c_str());
    if (!o.aws_sigv4.empty()) {
      curl_easy_setopt(e, CURLOPT_AWS_SIGV4, o.aws_sigv4.c_str());
      curl_easy_setopt(e, CURLOPT_USERPWD, o.aws_credentials.c_str());
      // S3 wants the payload's SHA-256 in a header (libcurl 7.88 does not add it): every request here is a GET
      // without a body, so it is the hash of the empty string, and libcurl signs it with the others.
      p.headers = curl_slist_append(p.headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
      if (!o.aws_session_token.empty())
        p.headers = curl_slist_append(p.headers, ("x-amz-security-token: " + o.aws_session_token).c_str());
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, p.headers);
    if (curl_multi_add_handle(multi, e) != CURLM_OK) throw Error(ErrorKind::Io, "libcurl: cannot add a transfer");
    active.push_back(&p);
  };

  // A failed attempt: retried after a wait, or the run's error once the attempts are spent.
  auto retry = [&](Piece& p, const std::string& cause, double retry_after) {
    const std::string what = p.kind == Piece::Kind::Range ? p.url + " (" + range_text(p.offset, p.bytes) + ")" : p.url;
    if (p.attempts >= o.max_attempts)
      throw Error(ErrorKind::Io, what + ": failed after " + std::to_string(p.attempts) + " attempts; last: " + cause);
    if (retry_after > o.max_retry_after_s)
      throw Error(ErrorKind::Io, what + ": " + cause + " and asks to retry after " + std::to_string(static_cast<long>(retry_after)) +
                                     " s, more than the " + std::to_string(static_cast<long>(o.max_retry_after_s)) + " s allowed");
    double wait = std::min(o.max_backoff_s, o.backoff_s * std::pow(2.0, static_cast<double>(p.attempts - 1)));
    if (retry_after >= 0) wait = retry_after;
    p.not_before = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(wait * 1000));
    ++retries;
  };

  auto finish = [&](Piece& p, CURLcode rc) {
    curl_multi_remove_handle(multi, p.easy);
    if (!p.fatal.empty()) throw Error(p.fatal_kind, p.fatal);
    const std::string what = p.kind == Piece::Kind::Range ? p.url + " (" + range_text(p.offset, p.bytes) + ")" : p.url;
    const bool reusable = rc == CURLE_OK;
    if (reusable) idle.push_back(p.easy);
    else curl_easy_cleanup(p.easy);
    p.easy = nullptr;
    if (rc != CURLE_OK) {
      const std::string cause = std::string(curl_easy_strerror(rc)) + (p.errbuf[0] ? std::string(": ") + p.errbuf : "");
      if (!retryable_curl_code(rc)) throw Error(ErrorKind::Io, what + ": " + cause);
      return retry(p, cause, -1);
    }
    const double retry_after = parse_retry_after(p.retry_after_text);
    if (p.status >= 500 || p.status == 429 || p.status == 408) return retry(p, "HTTP " + std::to_string(p.status), retry_after);
    if (p.kind == Piece::Kind::Whole) {
      if (p.status == 200) p.done = true;
      else if (p.status == 404 && p.optional) p.done = true, p.missing = true;
      else throw Error(ErrorKind::Io, what + ": " + status_text(p));
      return;
    }
    if (p.status == 200) throw Error(ErrorKind::Io, what + ": answered 200 to a Range request: the server does not serve byte ranges");
    if (p.status == 416) throw Error(ErrorKind::Io, what + ": HTTP 416 (the range lies outside the file: it is shorter than it was)");
    if (p.status != 206) throw Error(ErrorKind::Io, what + ": " + status_text(p));
    if (p.got == p.bytes) { p.done = true; return; }
    retry(p, "short body: " + std::to_string(p.attempt_bytes) + " bytes, then the response ended (" + std::to_string(p.bytes - p.got) + " bytes missing)", -1);
  };

  size_t next = 0, remaining = pieces.size();
  std::vector<Piece*> waiting;  // retries
  while (remaining > 0) {
    const auto now = Clock::now();
    for (auto it = waiting.begin(); it != waiting.end() && active.size() < o.max_in_flight;) {
      if ((*it)->not_before <= now) start(**it), it = waiting.erase(it);
      else ++it;
    }
    while (next < pieces.size() && active.size() < o.max_in_flight) start(pieces[next++]);
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      auto it = std::find_if(active.begin(), active.end(), [&](Piece* p) { return p->easy == m->easy_handle; });
      if (it == active.end()) continue;
      Piece* p = *it;
      active.erase(it);
      curl_slist_free_all(p->headers);
      p->headers = nullptr;
      const CURLcode rc = m->data.result;
      try {
        finish(*p, rc);
      } catch (...) {
        if (p->easy) curl_easy_cleanup(p->easy), p->easy = nullptr;
        throw;
      }
      if (p->done) --remaining;
      else waiting.push_back(p);
    }
    int timeout_ms = 100;
    if (active.empty() && !waiting.empty()) {
      auto soonest = waiting.front()->not_before;
      for (Piece* p : waiting) soonest = std::min(soonest, p->not_before);
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(soonest - Clock::now()).count(), 0, 100));
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    } else if (!active.empty()) {
      curl_multi_poll(multi, nullptr, 0, timeout_ms, nullptr);
    }
  }
}

int64_t http_date_seconds(const std::string& v) {
  if (v.empty()) return 0;
  const time_t t = curl_getdate(v.c_str(), nullptr);
  return t < 0 ? 0 : static_cast<int64_t>(t);
}

}  // namespace

RemoteIdentity HttpRanges::open(const std::string& url, uint64_t first_bytes, std::vector<uint8_t>& first) {
  first.clear();
  std::vector<Piece> pieces(1);
  Piece& p = pieces[0];
  p.url = url, p.offset = 0, p.bytes = std::max<uint64_t>(first_bytes, 1), p.counter = &bytes_;
  const RangeSink sink = [&](uint64_t, const uint8_t* d, size_t n) { first.insert(first.end(), d, d + n); };
  p.sink = &sink;
  p.clip_to_size = true;
  run_pieces(impl_->multi, impl_->idle, options_, pieces, requests_, retries_);
  if (p.seen.size == 0) throw Error(ErrorKind::Io, url + ": answered without the file's size (Content-Range bytes A-B/*)");
  RemoteIdentity id;
  id.url = url;
  id.size = p.seen.size;
  id.etag = p.seen.etag;
  id.last_modified = p.seen.last_modified;
  id.last_modified_s = http_date_seconds(id.last_modified);
  return id;
}

std::optional<std::vector<uint8_t>> HttpRanges::get_small(const std::string& url, uint64_t max_bytes, bool optional) {
  std::vector<Piece> pieces(1);
  Piece& p = pieces[0];
  p.kind = Piece::Kind::Whole, p.url = url, p.max_body = max_bytes, p.optional = optional, p.counter = &bytes_;
  run_pieces(impl_->multi, impl_->idle, options_, pieces, requests_, retries_);
  if (p.missing) return std::nullopt;
  return std::move(p.body);
}

void HttpRanges::read(const RemoteIdentity& id, const std::vector<ByteRange>& ranges, const RangeSink& sink) {
  // Ranges in file order, those less than kMergeGap apart read as one request (the gap's bytes are dropped).
  constexpr uint64_t kMergeGap = 4096;
  std::vector<ByteRange> sorted;
  for (const auto& r : ranges) {
    if (r.bytes == 0) continue;
    if (r.offset > id.size || r.bytes > id.size - r.offset)
      throw Error(ErrorKind::BadInput, id.url + ": " + range_text(r.offset, r.bytes) + " lies past its end (" + std::to_string(id.size) + " bytes)");
    sorted.push_back(r);
  }
  std::sort(sorted.begin(), sorted.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> merged;
  for (const auto& r : sorted) {
    if (!merged.empty() && r.offset <= merged.back().offset + merged.back().bytes + kMergeGap) {
      auto& m = merged.back();
      m.bytes = std::max(m.offset + m.bytes, r.offset + r.bytes) - m.offset;
    } else {
      merged.push_back(r);
    }
  }
  std::vector<Piece> pieces;
  for (const auto& r : merged) {
    for (uint64_t at = 0; at < r.bytes; at += options_.piece_bytes) {
      Piece p;
      p.url = id.url, p.offset = r.offset + at, p.bytes = std::min(options_.piece_bytes, r.bytes - at);
      p.expect = &id, p.sink = &sink, p.counter = &bytes_;
      pieces.push_back(std::move(p));
    }
  }
  run_pieces(impl_->multi, impl_->idle, options_, pieces, requests_, retries_);
}

}  // namespace tmorph::remote
