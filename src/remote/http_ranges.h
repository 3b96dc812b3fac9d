// Ranged reads of remote files over HTTP(S) through libcurl's multi interface: several ranges in flight
// on kept-alive connections, each range written to a sink as its bytes arrive (nothing is buffered here beyond
// libcurl's own receive buffers), retried with backoff on 5xx, 429, connection resets, stalls and short
// bodies (resuming after the bytes already received, honouring Retry-After), and checked against the file's
// identity (size, ETag, Last-Modified) taken when it was first read: a file that changes during a run is an
// error naming its URL and both ETags. Every error names the URL, the byte range and the cause.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tmorph::remote {

struct FetchOptions {
  unsigned max_in_flight = 8;             // ranged requests at once (also the connections kept per host)
  uint64_t piece_bytes = 16ull << 20;     // a longer range is requested in pieces of this many bytes
  unsigned max_attempts = 6;              // tries per piece before the run fails
  double backoff_s = 0.2;                 // wait before the first retry, doubled per retry, at most max_backoff_s
  double max_backoff_s = 5;
  double max_retry_after_s = 60;          // a Retry-After asking for longer fails the run (naming it)
  long connect_timeout_s = 15;
  long stall_timeout_s = 30;              // a response that delivers under 1 byte/s for this long is retried
  std::string bearer_token;               // sent as "Authorization: Bearer …" (never logged, never stored)
  // AWS Signature Version 4 (libcurl's CURLOPT_AWS_SIGV4) when aws_sigv4 is set ("aws:amz:REGION:s3"):
  // aws_credentials "KEY_ID:SECRET", aws_session_token sent as x-amz-security-token when set. Never logged or stored.
  std::string aws_sigv4, aws_credentials, aws_session_token;
  std::string ca_file;                    // a CA bundle for HTTPS (empty: the system's)

  // Defaults, then the settings remote.attempts / remote.stall_timeout_s / remote.in_flight, then $CURL_CA_BUNDLE.
  static FetchOptions from_settings();
};

// What identifies the remote file: it must not change while it is read.
struct RemoteIdentity {
  std::string url;
  uint64_t size = 0;
  std::string etag;           // as sent, quotes included; empty when the server sends none
  std::string last_modified;  // as sent (an HTTP date); empty when none
  int64_t last_modified_s = 0;// seconds since the epoch; 0 when unknown
};

struct ByteRange {
  uint64_t offset = 0, bytes = 0;
};

// Bytes of `url` at `offset`, in order within each range (ranges may interleave).
using RangeSink = std::function<void(uint64_t offset, const uint8_t* data, size_t bytes)>;

class HttpRanges {
 public:
  explicit HttpRanges(FetchOptions options);
  ~HttpRanges();
  HttpRanges(const HttpRanges&) = delete;
  HttpRanges& operator=(const HttpRanges&) = delete;

  // The first min(first_bytes, size) bytes of `url` (first_bytes >= 1) and its identity, from one ranged GET
  // (following redirects). A server that does not answer 206 with a Content-Range is refused (Io naming the URL).
  RemoteIdentity open(const std::string& url, uint64_t first_bytes, std::vector<uint8_t>& first);

  // The whole body of `url` when it is at most max_bytes (a JSON sidecar); nullopt on 404 when `optional`.
  std::optional<std::vector<uint8_t>> get_small(const std::string& url, uint64_t max_bytes, bool optional);

  // Reads every range of the file `id` names, calling `sink` as bytes arrive; returns when all are complete.
  // Ranges less than 4 KiB apart are read as one request (the bytes between them reach the sink too).
  // Throws Io naming the URL, the range and the cause when a range fails for good, BadInput when the file
  // changed (ETag, Last-Modified or size differ from `id`). Ranges must lie inside the file.
  void read(const RemoteIdentity& id, const std::vector<ByteRange>& ranges, const RangeSink& sink);

  uint64_t bytes_received() const { return bytes_.load(); }  // response bodies kept, all calls
  uint64_t requests() const { return requests_.load(); }     // HTTP requests made, retries included
  uint64_t retries() const { return retries_.load(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  FetchOptions options_;
  std::atomic<uint64_t> bytes_{0}, requests_{0}, retries_{0};
};

}  // namespace tmorph::remote
