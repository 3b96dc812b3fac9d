// A checkpoint that lives on a server (docs/remote.md): http(s):// and hf:// paths of a safetensors file, a
// sharded model.safetensors.index.json or a GGUF file (or split). Opening fetches the headers only, into local
// stand-ins (remote/mirror_file.h) that the ordinary openers and the index read as local files; a face then
// fetches the bytes of the tensors it reads before reading them, and releases them afterwards.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "index/checkpoint_index.h"
#include "index/indexer.h"

namespace tmorph::remote {
class HttpRanges;
class MirrorFile;
class MirrorLock;
struct ByteRange;
struct RemoteIdentity;
}  // namespace tmorph::remote

namespace tmorph::app {

class RemoteCheckpoint {
 public:
  // Fetches what opening `remote_path` needs: the index JSON whole (at most 64 MiB), each file's header
  // (safetensors: its 8-byte length and JSON; GGUF: a growing prefix up to its tensor data; a torch.save zip: its
  // directory, local headers and entries other than storages), config.json and
  // quantize_config.json when present; or nothing, when the header cache holds them fresh (remote/header_cache.h).
  // Holds the stand-in folder's Use lock until destroyed, and its Write lock while fetching headers
  // (remote/mirror_file.h). Errors name the URL.
  explicit RemoteCheckpoint(const std::string& remote_path);
  ~RemoteCheckpoint();

  // The stand-in to open in place of the remote path.
  const std::string& local_path() const { return local_path_; }
  // The URL of a stand-in file (a Checkpoint's file path), or `local` itself when it is none.
  std::string shown(const std::string& local) const;
  // Every string of `doc` that is a stand-in's path replaced by its URL (a document's "file" fields).
  void show_urls(nlohmann::json& doc) const;
  // show_urls, and local_path() itself shown as `given` (the path the user gave: a sharded index's URL).
  void show_given(nlohmann::json& doc, const std::string& given) const;

  // Fetches the bytes of tensors `which` of `c` (opened from local_path()) into the stand-ins' memory; Unavailable
  // naming the tensor for a storage form not read remotely (chunked, encoded values). Counted per tensor:
  // a tensor fetched already (by another thread, another call) is not fetched again, one being fetched is waited
  // for. Thread-safe.
  void fetch(const Checkpoint& c, const std::vector<size_t>& which);
  // Ends one fetch of each: a tensor's bytes are freed when no fetch holds them any more.
  void release(const Checkpoint& c, const std::vector<size_t>& which);
  // For a long-lived face (the server): every ValueReader of `c` fetches what it reads first, and what was fetched
  // stays while it fits in `keep_bytes` (least recently read freed first; what readers are reading is never freed).
  // A dense tensor in one piece (Checkpoint::spanned_reads) is fetched by the blocks of kSpanBlockBytes its reads
  // touch (Checkpoint::before_reading_span: a level-0 window of a 1 GB tensor fetches its rows, not the tensor);
  // any other tensor whole, before its reader is made (Checkpoint::before_reading; one larger than the budget is
  // kept alone). Bytes a fetch() holds (an indexing batch) are read as they are. `c` must outlive this.
  void serve_reads(const Checkpoint& c, uint64_t keep_bytes);
  static constexpr uint64_t kSpanBlockBytes = uint64_t{1} << 20;  // from the tensor's first byte
  // The tensors' bytes fetch() would read.
  static uint64_t fetch_bytes(const Checkpoint& c, const std::vector<size_t>& which);

  uint64_t bytes_received() const;
  uint64_t requests() const;
  uint64_t retries() const;
  uint64_t header_bytes() const { return header_bytes_; }  // header bytes of the files (what info needs)
  // "fetched N bytes in K requests (R retries) from HOST", for a face's stderr.
  std::string transfer_text() const;

 private:
  void add_file(const std::string& url_given);
  // A torch.save zip's headers into its stand-in: the end records and central directory, every local header, and
  // every entry but the storages (which are tensor bytes). Returns the bytes fetched, its first 8 included.
  uint64_t fetch_zip_headers(const std::string& given, const remote::RemoteIdentity& id, remote::MirrorFile& file);
  std::string local_path_;
  std::string host_;
  std::unique_ptr<remote::MirrorLock> use_lock_;
  std::unique_ptr<remote::HttpRanges> http_;
  std::map<std::string, std::unique_ptr<remote::MirrorFile>> files_;  // by stand-in path
  std::map<std::string, std::string> urls_;                           // stand-in path -> URL shown
  uint64_t header_bytes_ = 0;
  int64_t cached_at_ = 0;  // when the headers came from the cache (remote/header_cache.h): when they were fetched

  // Fetches held, by tensor name (the same in every Checkpoint opened from the stand-ins).
  struct Held {
    int count = 0;
    bool loading = false, valid = false;  // a fetch is under way; the bytes are there
  };
  void fetch_ranges(const Checkpoint& c, const std::vector<size_t>& which);
  void release_ranges(const Checkpoint& c, size_t tensor);
  void hold_for_reads(const Checkpoint& c, size_t tensor);
  remote::MirrorFile& stand_in(const Checkpoint& c, size_t file_index);
  mutable std::mutex held_mutex_;
  std::condition_variable held_changed_;
  std::map<std::string, Held> held_;
  std::list<size_t> kept_;  // tensors held for reads (serve_reads), most recently read first
  uint64_t kept_bytes_ = 0, keep_budget_ = 0;

  // Blocks of dense tensors fetched for span reads (remote_spans.cpp), by tensor name and block number.
  using BlockKey = std::pair<std::string, uint64_t>;
  struct Block {
    int pins = 0;                          // readers reading it: never freed meanwhile
    bool loading = false, valid = false;   // a fetch is under way; the bytes are there
    remote::MirrorFile* file = nullptr;
    uint64_t offset = 0, bytes = 0;        // in the file
  };
  Checkpoint::SpanRead hold_span(const Checkpoint& c, size_t tensor, uint64_t offset, uint64_t bytes);
  void unpin(const Checkpoint& c, const std::vector<BlockKey>& keys);
  // Frees unpinned blocks, then kept tensors (but the last), least recently read first, while over the budget. Under
  // held_mutex_; returns the kept tensors to release() once the lock is let go.
  std::vector<size_t> evict_over_budget_locked();
  // The file ranges of `name`'s blocks that are valid or loading: not freed with the whole tensor's pages. Under the lock.
  std::vector<remote::ByteRange> span_blocks_locked(const std::string& name) const;
  std::map<BlockKey, Block> blocks_;
  std::list<BlockKey> kept_blocks_;  // valid blocks, most recently read first
  const Checkpoint* served_ = nullptr;  // serve_reads' checkpoint
};

// A RemoteCheckpoint for an http://, https://, hf:// or s3:// path; null for a local path.
std::unique_ptr<RemoteCheckpoint> open_remote_if_url(const std::string& path);

// Indexes a remote checkpoint streamed (CLI `index URL`, Python's Checkpoint.index()): its tensors the index lacks
// in file order, in batches of at most a quarter of `memory_budget` (16 to 256 MiB; a larger tensor is a batch of
// its own), the next batch fetched while `fill` indexes this one, each released once committed. `fill(batch)`
// indexes those tensors (the face's progress and cancel); a cancelled fill stops the run. The report is the
// batches' sum: computed, bytes, workers, seconds; the caller completes the rest from its own full pass.
IndexingReport index_remote(const CheckpointIndex& index, RemoteCheckpoint& remote, uint64_t memory_budget,
                            const std::function<IndexingReport(const std::vector<size_t>&)>& fill);
// The same for the tensors `todo` of `c` (those the caller found unindexed, under its own lock of the index).
IndexingReport index_remote(const Checkpoint& c, std::vector<size_t> todo, RemoteCheckpoint& remote, uint64_t memory_budget,
                            const std::function<IndexingReport(const std::vector<size_t>&)>& fill);
// The report of a whole remote run: `whole` (a final pass over every tensor, which reads nothing: each is indexed or
// unreadable) with the batches' computed tensors, bytes, workers, windows and time from `batches`.
IndexingReport remote_indexing_report(IndexingReport whole, const IndexingReport& batches);

// Two checkpoints a command reads pair by pair (diff, compare), either of which may be remote: the paths to open
// (a remote side's stand-in), and a callback for the pair loop that fetches a pair's tensors (their positions in A
// and B as opened from those paths; kNoTensor for none) before they are read and releases them after.
class RemotePair {
 public:
  static constexpr size_t kNoTensor = static_cast<size_t>(-1);
  RemotePair(const std::string& a, const std::string& b);
  // With remote sides already open (a server's served checkpoints: their fetches and kept tensors are counted in
  // one place); null opens the side when it is a URL.
  RemotePair(const std::string& a, const std::string& b, RemoteCheckpoint* open_a, RemoteCheckpoint* open_b);
  ~RemotePair();
  const std::string& path_a() const { return path_a_; }
  const std::string& path_b() const { return path_b_; }
  const RemoteCheckpoint* a() const { return ra_; }
  const RemoteCheckpoint* b() const { return rb_; }
  // Empty when both are local.
  std::function<void(size_t tensor_a, size_t tensor_b, bool fetch)> around_pair();
  // Stand-in paths in `doc` shown as the paths given.
  void show_given(nlohmann::json& doc) const;

 private:
  std::string given_a_, given_b_, path_a_, path_b_;
  std::unique_ptr<RemoteCheckpoint> own_a_, own_b_;
  RemoteCheckpoint* ra_ = nullptr;
  RemoteCheckpoint* rb_ = nullptr;
  std::unique_ptr<Checkpoint> ca_, cb_;  // the stand-ins opened as the pair loop opens them (the same positions)
};

// The bytes of tensors `which` of `c` fetched for as long as it lives (the readable ones; nothing when `remote` is
// null, a local checkpoint), released when it goes.
class FetchedTensors {
 public:
  FetchedTensors(RemoteCheckpoint* remote, const Checkpoint& c, const std::vector<size_t>& which);
  ~FetchedTensors();
  FetchedTensors(const FetchedTensors&) = delete;
  FetchedTensors& operator=(const FetchedTensors&) = delete;

 private:
  RemoteCheckpoint* remote_;
  const Checkpoint& c_;
  std::vector<size_t> which_;
};

}  // namespace tmorph::app
