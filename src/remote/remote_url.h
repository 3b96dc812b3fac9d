// Remote checkpoint paths: which arguments name a remote file, and the URL each is fetched from.
//   http://HOST[:PORT]/PATH and https://…  as given;
//   hf://ORG/NAME[@REVISION]/FILE           ENDPOINT/ORG/NAME/resolve/REVISION/FILE (REVISION default "main"),
//     ENDPOINT from $HF_ENDPOINT, else the setting remote.hf_endpoint, else https://huggingface.co;
//   s3://BUCKET/KEY                        ENDPOINT/BUCKET/KEY (path style), ENDPOINT from $AWS_ENDPOINT_URL_S3, else
//     $AWS_ENDPOINT_URL, else the setting remote.s3_endpoint, else https://s3.REGION.amazonaws.com; requests signed
//     with AWS Signature Version 4 for REGION ($AWS_REGION, $AWS_DEFAULT_REGION, the setting remote.s3_region,
//     else us-east-1) when $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY are set, unsigned otherwise.
#pragma once

#include <string>

namespace tmorph::remote {

// True when `path` starts with http://, https://, hf:// or s3:// (a local path never does).
bool is_remote_path(const std::string& path);

struct RemoteUrl {
  std::string given;  // as the user wrote it (named in messages)
  std::string url;    // what is fetched: http(s)://HOST[:PORT]/PATH, no query or fragment
  std::string host;   // HOST[:PORT]
  std::string path;   // /PATH (percent-encoding kept as written)
  bool hf = false;    // from hf://: a token from $HF_TOKEN is sent
  bool s3 = false;    // from s3://: requests signed (SigV4) for s3_region when credentials are set
  std::string s3_region;
};

// Parses a remote path; InvalidArgument naming it when it is malformed (no host, no file, a '..' or empty
// segment, a query or fragment, characters outside printable ASCII, an hf:// path without ORG/NAME/FILE).
// `hf_endpoint` is the endpoint an hf:// path resolves against (hf_endpoint() when empty).
RemoteUrl parse_remote_url(const std::string& path, const std::string& hf_endpoint = "");

// The endpoint hf:// paths resolve against: $HF_ENDPOINT, else the setting remote.hf_endpoint, else
// https://huggingface.co (no trailing slash).
std::string hf_endpoint();

// The endpoint and region of s3:// paths (above; no trailing slash).
std::string s3_endpoint(const std::string& region);
std::string s3_region();

// The URL of a file beside `u` (same folder): a shard named by an index, config.json.
RemoteUrl sibling(const RemoteUrl& u, const std::string& file_name);

}  // namespace tmorph::remote
