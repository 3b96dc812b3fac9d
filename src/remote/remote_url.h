// Remote checkpoint paths: which arguments name a remote file, and the URL each is fetched from.
//   http://HOST[:PORT]/PATH and https://…  as given;
//   hf://ORG/NAME[@REVISION]/FILE           ENDPOINT/ORG/NAME/resolve/REVISION/FILE (REVISION default "main"),
//     ENDPOINT from $HF_ENDPOINT, else the setting remote.hf_endpoint, else https://huggingface.co.
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
};

// Parses a remote path; Unavailable for s3:// (not read yet); InvalidArgument naming it when it is malformed (no host, no file, a '..' or empty
// segment, a query or fragment, characters outside printable ASCII, an hf:// path without ORG/NAME/FILE).
// `hf_endpoint` is the endpoint an hf:// path resolves against (hf_endpoint() when empty).
RemoteUrl parse_remote_url(const std::string& path, const std::string& hf_endpoint = "");

// The endpoint hf:// paths resolve against: $HF_ENDPOINT, else the setting remote.hf_endpoint, else
// https://huggingface.co (no trailing slash).
std::string hf_endpoint();

// The URL of a file beside `u` (same folder): a shard named by an index, config.json.
RemoteUrl sibling(const RemoteUrl& u, const std::string& file_name);

}  // namespace tmorph::remote
