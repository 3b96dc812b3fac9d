// The cache of fetched headers: a record beside a remote checkpoint's stand-in (the files it was opened from, each
// with its remote identity, and when) that lets the next command reopen it without a request while the record is
// younger than the setting remote.header_max_age_s (default 600 s; 0: always ask the server). Data read later
// still checks every response against the recorded identity, so a file changed on the server fails the command
// naming it (and the record is dropped) rather than mixing old headers with new bytes. The whole cache folder
// (cache_dir()/remote) is bounded by remote.header_cache_bytes (default 256 MiB): when over it, the least recently
// fetched checkpoints' records and stand-ins go first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "remote/http_ranges.h"

namespace tmorph::remote {

struct HeaderRecord {
  int64_t fetched_at_ms = 0;  // milliseconds since the epoch
  uint64_t header_bytes = 0;  // what the first open fetched for info
  struct File {
    std::string given;        // the path as the user wrote it (shown in documents)
    std::string path;         // its stand-in
    RemoteIdentity id;
  };
  std::vector<File> files;
};

// The record of the checkpoint whose stand-in is `local_path`, when it exists, parses, is younger than the setting
// and every stand-in it names is there with the recorded size; nullopt otherwise (the checkpoint is fetched again).
std::optional<HeaderRecord> fresh_header_record(const std::string& local_path);
void write_header_record(const std::string& local_path, const HeaderRecord& record);
void drop_header_record(const std::string& local_path);

// Marks the checkpoint whose stand-in is `local_path` as open in this process (pruning leaves it), or no longer.
void mark_open(const std::string& local_path, bool open);

// Removes the least recently fetched checkpoints (records and their stand-ins; those open in this process and those
// in a folder another process holds stay) until the cache folder's allocated bytes are within the bound.
void prune_header_cache();

}  // namespace tmorph::remote
