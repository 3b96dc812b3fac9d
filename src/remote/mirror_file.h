// The local stand-in of a remote file: a sparse file of the remote file's size in the user's cache folder
// (cache_dir()/remote/SCHEME/HOST/PATH) holding the headers at their offsets and holes elsewhere (a few
// kilobytes per file, what the header cache and the index's file identity read), and, while the MirrorFile
// lives, an overlay of the whole file in this process's memory (core/file_overlay.h) that every MappedFile of the
// path maps instead: headers and fetched tensor bytes are written there, read in place by the statistics, and
// released (their pages freed) once used. Tensor bytes never touch the disk. Its modification time is set from the
// remote identity (Last-Modified, with the ETag's hash as nanoseconds), so the index's file identity changes
// when the remote file does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "remote/http_ranges.h"
#include "remote/remote_url.h"

namespace tmorph {
class FileOverlay;
}

namespace tmorph::remote {

// Where the stand-in of `u` lives.
std::string mirror_path(const RemoteUrl& u);

class MirrorFile {
 public:
  // Creates (or resizes) the stand-in at `path` to id.size bytes and registers its overlay, holding the bytes the
  // file on disk holds (its headers). Io naming the path when it cannot.
  MirrorFile(std::string path, const RemoteIdentity& id);
  ~MirrorFile();
  MirrorFile(const MirrorFile&) = delete;
  MirrorFile& operator=(const MirrorFile&) = delete;

  // Header bytes: to the file on disk and the overlay. Thread-safe (pwrite) for disjoint ranges.
  void write_header(uint64_t offset, const uint8_t* data, size_t bytes);
  // Tensor bytes: to the overlay only. Thread-safe for disjoint ranges.
  void write(uint64_t offset, const uint8_t* data, size_t bytes);
  // Frees the whole pages of the overlay inside [offset, offset + bytes): they read as zeros again. Bytes of a page
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
  std::shared_ptr<FileOverlay> overlay_;
  void copy_data_into_overlay();
};

// Writes a small whole file (a JSON sidecar) beside the stand-ins, atomically.
void write_mirror_sidecar(const std::string& path, const std::vector<uint8_t>& bytes);

// Holds a lock on a stand-in folder for as long as it lives. Use (shared, for as long as a process has a checkpoint
// of the folder open): the header cache's pruning (remote/header_cache.h) removes no stand-in of a folder another
// process uses. Write (exclusive, while a process fetches headers into stand-ins and sizes them): one process at a
// time rewrites a folder's headers. Tensor bytes live in each process's own memory (core/file_overlay.h), so
// processes using one folder never see each other's fetches or releases. Waits for the lock. Within one process a
// lock is shared: a second MirrorLock of the same folder and kind counts as a holder of the same lock, which is
// released when the last one goes.
class MirrorLock {
 public:
  enum class Kind { Use, Write };
  // True when this process holds the Use lock of `folder` (through any MirrorLock).
  static bool held_here(const std::string& folder);

  MirrorLock(const std::string& folder, Kind kind);
  ~MirrorLock();
  MirrorLock(const MirrorLock&) = delete;
  MirrorLock& operator=(const MirrorLock&) = delete;

 private:
  std::string path_;  // the lock file: .tensormorph-remote.lock (Use) or .tensormorph-headers.lock (Write)
};

}  // namespace tmorph::remote
