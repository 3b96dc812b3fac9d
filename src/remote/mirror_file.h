// The local stand-in of a remote file: a sparse file of the remote file's size in the user's cache folder
// (cache_dir()/remote/SCHEME/HOST/PATH), holding the bytes fetched so far at their offsets and holes
// elsewhere, so the readers map it exactly as they map a local file. Fetched tensor bytes are released
// (their blocks freed) once used; headers stay (a few kilobytes per file). Its modification time is set
// from the remote identity (Last-Modified, with the ETag's hash as nanoseconds), so the index's file
// identity changes when the remote file does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "remote/http_ranges.h"
#include "remote/remote_url.h"

namespace tmorph::remote {

// Where the stand-in of `u` lives.
std::string mirror_path(const RemoteUrl& u);

class MirrorFile {
 public:
  // Creates (or resizes) the stand-in at `path` to id.size bytes. Io naming the path when it cannot.
  MirrorFile(std::string path, const RemoteIdentity& id);
  ~MirrorFile();
  MirrorFile(const MirrorFile&) = delete;
  MirrorFile& operator=(const MirrorFile&) = delete;

  void write(uint64_t offset, const uint8_t* data, size_t bytes);  // thread-safe (pwrite)
  // Frees the whole file-system blocks inside [offset, offset + bytes): they read as zeros again. Bytes of a block
  // the range shares with its neighbours stay.
  void release(uint64_t offset, uint64_t bytes);
  // Sets the modification time from the identity again (writes and releases move it).
  void restamp();
  const std::string& path() const { return path_; }
  const RemoteIdentity& identity() const { return id_; }

 private:
  std::string path_;
  RemoteIdentity id_;
  int fd_ = -1;
};

// Writes a small whole file (a JSON sidecar) beside the stand-ins, atomically.
void write_mirror_sidecar(const std::string& path, const std::vector<uint8_t>& bytes);

// Holds an exclusive lock on a stand-in folder (a lock file in it) for as long as it lives: one process at a
// time fetches into and releases stand-ins, so none reads holes another just released. Waits for the lock.
// Within one process the lock is shared: a second MirrorLock of a folder the process holds (diff A B with both
// on one server) counts as a holder of the same lock, which is released when the last one goes.
class MirrorLock {
 public:
  // True when this process holds the lock of `folder` (through any MirrorLock).
  static bool held_here(const std::string& folder);

  explicit MirrorLock(const std::string& folder);
  ~MirrorLock();
  MirrorLock(const MirrorLock&) = delete;
  MirrorLock& operator=(const MirrorLock&) = delete;

 private:
  std::string path_;  // the lock file
};

}  // namespace tmorph::remote
