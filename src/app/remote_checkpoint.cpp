#include "app/remote_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <tuple>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/openers/open_checkpoint.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/zip_archive.h"
#include "remote/header_cache.h"
#include "remote/http_ranges.h"
#include "remote/mirror_file.h"
#include "remote/remote_url.h"
#include "tensormorph/error.h"

namespace tmorph::app {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxIndexJson = 64ull << 20;   // a sharded index's JSON, whole
constexpr uint64_t kMaxSidecarJson = 4ull << 20;  // config.json, quantize_config.json
constexpr uint64_t kGgufFirstPrefix = 64ull << 10;
constexpr uint64_t kGgufMaxHeader = 1ull << 30;   // a GGUF header (vocabulary included) larger than this is refused
// A torch.save zip: its tail holds the end records (the 32-bit one within 65,557 bytes of the end, the zip64 ones
// just before it) and usually the central directory; its entries other than storages (data.pkl, version,
// byteorder) are what the reader parses, refused past this many bytes together.
constexpr uint64_t kZipTail = 65557 + 20 + 56 + 4096;
constexpr uint64_t kZipShortTail = 4096;
constexpr uint64_t kZipMaxHeaderEntries = 1ull << 30;
// The first 8 bytes of a legacy torch.save file: pickle's PROTO 2, then LONG1 of torch's magic number (as a safetensors
// header length it would exceed any file).
constexpr uint8_t kLegacyTorchPrefix[8] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46};
constexpr uint64_t kZipLocalSlack = 30 + 256;  // a local header's fixed part and a torch writer's alignment padding

std::string normal(const std::string& p) { return fs::path(p).lexically_normal().string(); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string file_name(const remote::RemoteUrl& u) { return u.path.substr(u.path.rfind('/') + 1); }

// Byte ranges of tensor t, by file index.
void tensor_ranges(const Checkpoint& c, const CheckpointTensor& t, std::map<size_t, std::vector<remote::ByteRange>>& out) {
  if (t.chunked() || t.encoded())
    throw Error(ErrorKind::Unavailable, t.name + " (" + t.stored_type + "): its storage (chunks or encoded values) is not read remotely yet");
  if (t.strided()) {  // a torch view: every byte from its first element to its last (the opener checked they are in the file)
    uint64_t last = 0;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] == 0) return;
      last += (t.shape[d] - 1) * t.strides()[d];
    }
    out[t.file_index].push_back({t.file_offset, (last + 1) * dtype_size(*t.dtype)});
    return;
  }
  if (t.packed()) {
    for (const auto& part : t.packed()->parts) out[part.file_index].push_back({part.file_offset, part.bytes});
    return;
  }
  (void)c;
  out[t.file_index].push_back({t.file_offset, t.bytes});
}

// Byte ranges fetched into one stand-in, merged: what a later step still needs of a range.
class Fetched {
 public:
  std::vector<remote::ByteRange> missing(uint64_t offset, uint64_t bytes) const {
    std::vector<remote::ByteRange> out;
    uint64_t at = offset;
    const uint64_t end = offset + bytes;
    for (auto it = have_.upper_bound(at); at < end;) {
      if (it != have_.begin()) {
        auto prev = std::prev(it);
        if (prev->second > at) at = std::min(end, prev->second);
      }
      if (at >= end) break;
      const uint64_t stop = it == have_.end() ? end : std::min(end, it->first);
      if (stop > at) out.push_back({at, stop - at});
      at = stop;
      if (it != have_.end()) ++it;
    }
    return out;
  }
  void add(uint64_t offset, uint64_t bytes) {
    uint64_t begin = offset, end = offset + bytes;
    auto it = have_.lower_bound(begin);
    if (it != have_.begin() && std::prev(it)->second >= begin) --it;
    while (it != have_.end() && it->first <= end) {
      begin = std::min(begin, it->first), end = std::max(end, it->second);
      it = have_.erase(it);
    }
    have_[begin] = end;
  }

 private:
  std::map<uint64_t, uint64_t> have_;  // begin -> end
};

// A storage of a torch.save zip ("ARCHIVE/data/KEY"): tensor bytes, fetched when read, not with the headers.
bool is_torch_storage(const std::string& entry) {
  const size_t slash = entry.find('/');
  return slash != std::string::npos && entry.compare(slash, 6, "/data/") == 0 && entry.find('/', slash + 6) == std::string::npos;
}

}  // namespace

RemoteCheckpoint::RemoteCheckpoint(const std::string& remote_path) {
  const remote::RemoteUrl u = remote::parse_remote_url(remote_path);
  host_ = u.host;
  remote::FetchOptions o = remote::FetchOptions::from_settings();
  if (u.hf)
    if (const char* token = std::getenv("HF_TOKEN"); token && *token) o.bearer_token = token;
  if (u.s3) {
    const char* key = std::getenv("AWS_ACCESS_KEY_ID");
    const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
    if (key && *key && secret && *secret) {  // else unsigned requests: a public bucket
      o.aws_sigv4 = "aws:amz:" + u.s3_region + ":s3";
      o.aws_credentials = std::string(key) + ":" + secret;
      if (const char* token = std::getenv("AWS_SESSION_TOKEN"); token && *token) o.aws_session_token = token;
    }
  }
  http_ = std::make_unique<remote::HttpRanges>(std::move(o));
  local_path_ = remote::mirror_path(u);
  const std::string folder = fs::path(local_path_).parent_path().string();
  use_lock_ = std::make_unique<remote::MirrorLock>(folder, remote::MirrorLock::Kind::Use);
  const remote::MirrorLock writing(folder, remote::MirrorLock::Kind::Write);  // until the headers are written
  remote::mark_open(local_path_, true);
  const std::string name = file_name(u);
  // Fresh cached headers: the stand-ins as they are, no request.
  if (auto record = remote::fresh_header_record(local_path_); record && fs::is_regular_file(local_path_)) {
    for (const auto& f : record->files) {
      auto file = std::make_unique<remote::MirrorFile>(f.path, f.id);
      urls_[normal(file->path())] = f.given;
      files_[normal(file->path())] = std::move(file);
    }
    header_bytes_ = record->header_bytes;
    cached_at_ = record->fetched_at_ms / 1000;
    return;
  }
  if (ends_with(name, ".index.json")) {
    auto body = http_->get_small(u.url, kMaxIndexJson, false);
    header_bytes_ += body->size();
    const nlohmann::json index = nlohmann::json::parse(body->begin(), body->end(), nullptr, false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw Error(ErrorKind::BadInput, u.given + ": expected a JSON object with a weight_map");
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) throw Error(ErrorKind::BadInput, u.given + ": weight_map['" + tensor + "'] must be a file name");
      shards.insert(shard.get<std::string>());
    }
    remote::write_mirror_sidecar(local_path_, *body);
    for (const auto& shard : shards) add_file(remote::sibling(u, shard).given);
  } else {
    add_file(u.given);
  }
  // What the safetensors opener reads beside the files: stand-ins of those present, none of those absent.
  if (!ends_with(name, ".gguf")) {
    for (const char* sidecar : {"config.json", "quantize_config.json"}) {
      const remote::RemoteUrl s = remote::sibling(u, sidecar);
      const std::string local = remote::mirror_path(s);
      auto body = http_->get_small(s.url, kMaxSidecarJson, true);
      std::error_code ec;
      if (!body) fs::remove(local, ec);
      else header_bytes_ += body->size(), remote::write_mirror_sidecar(local, *body);
    }
  }
  remote::HeaderRecord record;
  record.header_bytes = header_bytes_;
  for (const auto& [path, file] : files_) record.files.push_back({urls_.at(path), file->path(), file->identity()});
  remote::write_header_record(local_path_, record);
  try {
    remote::prune_header_cache();
  } catch (const std::exception&) {  // pruning is housekeeping: a failure leaves the cache larger, nothing wrong
  }
}

RemoteCheckpoint::~RemoteCheckpoint() { remote::mark_open(local_path_, false); }

void RemoteCheckpoint::add_file(const std::string& given) {
  const remote::RemoteUrl u = remote::parse_remote_url(given);
  std::vector<uint8_t> first;
  const remote::RemoteIdentity id = http_->open(u.url, 8, first);
  auto file = std::make_unique<remote::MirrorFile>(remote::mirror_path(u), id);
  file->write_header(0, first.data(), first.size());
  auto fetch_into = [&](uint64_t offset, uint64_t bytes) {
    http_->read(id, {{offset, bytes}}, [&](uint64_t at, const uint8_t* d, size_t n) { file->write_header(at, d, n); });
  };
  if (first.size() >= 4 && std::memcmp(first.data(), "GGUF", 4) == 0) {
    // The header's length is known only once it is parsed: a growing prefix, parsed over the stand-in (zeros past
    // the prefix); a parse is trusted only when everything it read lay in the prefix (its tensor data starts there).
    uint64_t have = first.size(), header = 0;
    for (uint64_t want = std::min(id.size, kGgufFirstPrefix);; want = std::min(id.size, want * 2)) {
      if (want > kGgufMaxHeader) throw Error(ErrorKind::BadInput, u.given + ": a GGUF header longer than " + std::to_string(kGgufMaxHeader) + " bytes");
      if (want > have) fetch_into(have, want - have), have = want;
      file->restamp();
      uint64_t data_at = 0;
      try {
        const MappedFile view(file->path());
        data_at = parse_gguf(view.data(), view.size(), u.given, GgufArrays::Summary).data_section_offset;
      } catch (const Error&) {
        if (have >= id.size) throw;
        continue;
      }
      if (data_at <= have) {
        header = data_at;
        break;
      }
      if (data_at > kGgufMaxHeader) throw Error(ErrorKind::BadInput, u.given + ": a GGUF header longer than " + std::to_string(kGgufMaxHeader) + " bytes");
      want = data_at / 2 + 1;  // doubled next: at least the tensor data's offset
    }
    header_bytes_ += header;  // the prefix fetched may run past it, into the first tensors (at most twice the header)
    // A split's first shard names its siblings: NAME-0000i-of-0000N.gguf, each a stand-in beside it.
    static const std::regex split(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
    std::smatch m;
    const std::string name = file_name(u);
    if (std::regex_match(name, m, split) && m[2].str() == "00001") {
      const int count = std::stoi(m[3].str());
      for (int i = 2; i <= count && i <= 99999; ++i) {
        char tail[32];
        std::snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", i, count);
        add_file(remote::sibling(u, m[1].str() + tail).given);
      }
    }
  } else if (looks_like_zip(first.data(), first.size())) {
    header_bytes_ += fetch_zip_headers(u.given, id, *file);
  } else if (first.size() == 8 && std::memcmp(first.data(), kLegacyTorchPrefix, 8) == 0) {
    throw Error(ErrorKind::Unavailable, u.given + ": a torch.save file in the legacy (pre-1.6, not zip) format is not read remotely "
                                                  "(its pickle interleaves the storages); download it, or re-save it with torch >= 1.6");
  } else if (first.size() == 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | first[static_cast<size_t>(i)];
    if (n > kSafetensorsMaxHeaderBytes || n > id.size - 8)
      throw Error(ErrorKind::BadInput, u.given + ": offset 0: a safetensors header length of " + std::to_string(n) + " bytes, but the file holds " +
                                           std::to_string(id.size) + " bytes (at most " + std::to_string(kSafetensorsMaxHeaderBytes) + ")");
    fetch_into(8, n);
    header_bytes_ += 8 + n;
  } else {
    throw Error(ErrorKind::BadInput, u.given + ": " + std::to_string(id.size) + " bytes: too short for a safetensors, GGUF or torch.save file");
  }
  file->restamp();
  urls_[normal(file->path())] = given;
  files_[normal(file->path())] = std::move(file);
}

uint64_t RemoteCheckpoint::fetch_zip_headers(const std::string& given, const remote::RemoteIdentity& id, remote::MirrorFile& file) {
  Fetched fetched;
  fetched.add(0, std::min<uint64_t>(8, id.size));
  uint64_t bytes = 0;
  auto fetch = [&](const std::vector<remote::ByteRange>& wanted) {
    std::vector<remote::ByteRange> ranges;
    for (const auto& w : wanted)
      for (const auto& r : fetched.missing(w.offset, w.bytes)) ranges.push_back(r), fetched.add(r.offset, r.bytes), bytes += r.bytes;
    if (ranges.empty()) return;
    http_->read(id, ranges, [&](uint64_t at, const uint8_t* d, size_t n) { file.write_header(at, d, n); });
    file.restamp();
  };
  // The end records: in the last few KiB unless a long comment follows them, then in the longest tail a comment
  // allows. A record a tail missed (a zip64 end record far from its locator) reads as zeros and is refused by its
  // signature check, naming the offset. Then the central directory, where the tail did not hold it.
  ZipSpan central;
  for (const uint64_t want : {kZipShortTail, kZipTail}) {
    const uint64_t tail = std::min(id.size, want);
    fetch({{id.size - tail, tail}});
    try {
      const MappedFile view(file.path());
      central = locate_zip_central_directory(view.data(), view.size(), given);
      break;
    } catch (const Error&) {
      if (want == kZipTail || tail == id.size) throw;
    }
  }
  fetch({{central.offset, central.bytes}});
  ZipDirectory directory;
  {
    const MappedFile view(file.path());
    directory = read_zip_central_directory(view.data(), view.size(), given);
  }
  // Every local header (its fixed part, name and usual padding; a longer extra field in a second round), then the
  // data of every entry that is not a storage.
  auto local_span = [&](const ZipEntry& e, uint64_t want) {
    return remote::ByteRange{e.header_offset, std::min(want, directory.central_directory_offset - e.header_offset)};
  };
  std::vector<remote::ByteRange> locals;
  for (const auto& e : directory.entries) locals.push_back(local_span(e, kZipLocalSlack + e.name.size()));
  fetch(locals);
  locals.clear();
  {
    const MappedFile view(file.path());
    for (const auto& e : directory.entries) {
      const uint8_t* l = view.data() + e.header_offset;
      const uint64_t whole = 30 + (l[26] | uint64_t{l[27]} << 8) + (l[28] | uint64_t{l[29]} << 8);
      if (whole > kZipLocalSlack + e.name.size()) locals.push_back(local_span(e, whole));
    }
  }
  fetch(locals);
  std::vector<remote::ByteRange> entries;
  uint64_t entry_bytes = 0;
  {
    const MappedFile view(file.path());
    directory = read_zip_directory(view.data(), view.size(), given);
  }
  for (const auto& e : directory.entries) {
    if (is_torch_storage(e.name)) continue;
    entry_bytes += e.compressed_size;
    if (entry_bytes > kZipMaxHeaderEntries)
      throw Error(ErrorKind::BadInput, given + ": the entries other than storages (data.pkl, ...) hold more than " +
                                           std::to_string(kZipMaxHeaderEntries) + " bytes");
    entries.push_back({e.data_offset, e.compressed_size});
  }
  fetch(entries);
  return bytes + std::min<uint64_t>(8, id.size);
}

std::string RemoteCheckpoint::shown(const std::string& local) const {
  const auto it = urls_.find(normal(local));
  return it == urls_.end() ? local : it->second;
}

void RemoteCheckpoint::show_urls(nlohmann::json& doc) const {
  if (doc.is_string()) {
    if (auto it = urls_.find(normal(doc.get<std::string>())); it != urls_.end()) doc = it->second;
  } else if (doc.is_structured()) {
    for (auto& v : doc) show_urls(v);
  }
}

uint64_t RemoteCheckpoint::fetch_bytes(const Checkpoint& c, const std::vector<size_t>& which) {
  std::map<size_t, std::vector<remote::ByteRange>> ranges;
  for (size_t i : which) tensor_ranges(c, c.tensors.at(i), ranges);
  uint64_t total = 0;
  for (const auto& [f, rs] : ranges)
    for (const auto& r : rs) total += r.bytes;
  return total;
}

remote::MirrorFile& RemoteCheckpoint::stand_in(const Checkpoint& c, size_t file_index) {
  const auto it = files_.find(normal(c.files.at(file_index)->path()));
  if (it == files_.end()) throw Error(ErrorKind::Internal, c.files[file_index]->path() + ": not a stand-in of this remote checkpoint");
  return *it->second;
}

void RemoteCheckpoint::fetch_ranges(const Checkpoint& c, const std::vector<size_t>& which) {
  std::map<size_t, std::vector<remote::ByteRange>> ranges;
  for (size_t i : which) tensor_ranges(c, c.tensors.at(i), ranges);
  for (const auto& [f, rs] : ranges) {
    remote::MirrorFile& file = stand_in(c, f);
    try {
      http_->read(file.identity(), rs, [&](uint64_t at, const uint8_t* d, size_t n) { file.write(at, d, n); });
    } catch (const Error& e) {
      if (!cached_at_) throw;
      // The server's file may have changed since the headers were cached: the next command fetches them again.
      remote::drop_header_record(local_path_);
      throw Error(e.kind(), std::string(e.what()) + " (the headers came from the cache, fetched " + std::to_string(std::max<int64_t>(0, std::time(nullptr) - cached_at_)) +
                                " s ago; they are dropped, so the next command fetches them again)");
    }
  }
}

void RemoteCheckpoint::release_ranges(const Checkpoint& c, size_t tensor) {
  std::map<size_t, std::vector<remote::ByteRange>> ranges;
  tensor_ranges(c, c.tensors.at(tensor), ranges);
  // Span reads' blocks of the tensor keep their pages (they are freed when the blocks are evicted).
  Fetched keep;
  for (const remote::ByteRange& b : span_blocks_locked(c.tensors[tensor].name)) keep.add(b.offset, b.bytes);
  for (const auto& [f, rs] : ranges) {
    const auto it = files_.find(normal(c.files.at(f)->path()));
    if (it == files_.end()) continue;
    for (const auto& r : rs)
      for (const remote::ByteRange& gap : keep.missing(r.offset, r.bytes)) it->second->release(gap.offset, gap.bytes);
  }
}

void RemoteCheckpoint::fetch(const Checkpoint& c, const std::vector<size_t>& which) {
  {
    std::lock_guard<std::mutex> guard(held_mutex_);
    for (size_t i : which) ++held_[c.tensors.at(i).name].count;
  }
  try {
    for (;;) {
      std::vector<size_t> mine;
      {
        std::unique_lock<std::mutex> lock(held_mutex_);
        bool waiting = false;
        for (size_t i : which) {
          Held& h = held_[c.tensors[i].name];
          if (h.valid) continue;
          if (h.loading) waiting = true;
          else h.loading = true, mine.push_back(i);
        }
        if (mine.empty()) {
          if (!waiting) return;
          held_changed_.wait(lock);  // another thread fetches some of them
          continue;
        }
      }
      try {
        fetch_ranges(c, mine);
      } catch (...) {
        std::lock_guard<std::mutex> guard(held_mutex_);
        for (size_t i : mine) held_[c.tensors[i].name].loading = false;
        held_changed_.notify_all();
        throw;
      }
      std::lock_guard<std::mutex> guard(held_mutex_);
      for (size_t i : mine) {
        Held& h = held_[c.tensors[i].name];
        h.loading = false, h.valid = true;
      }
      held_changed_.notify_all();
    }
  } catch (...) {
    release(c, which);  // bytes half written are freed with the rest: never read
    throw;
  }
}

void RemoteCheckpoint::release(const Checkpoint& c, const std::vector<size_t>& which) {
  std::lock_guard<std::mutex> guard(held_mutex_);
  for (size_t i : which) {
    const auto it = held_.find(c.tensors.at(i).name);
    if (it == held_.end() || --it->second.count > 0) continue;
    // Under the lock: a fetch of the same tensor starting now must not have its bytes freed under it. (No fetch is
    // under way: a fetching call holds a count.)
    release_ranges(c, i);
    held_.erase(it);
  }
}

void RemoteCheckpoint::serve_reads(const Checkpoint& c, uint64_t keep_bytes) {
  keep_budget_ = keep_bytes;
  served_ = &c;
  c.before_reading = [this, &c](size_t tensor) { hold_for_reads(c, tensor); };
  c.before_reading_span = [this, &c](size_t tensor, uint64_t offset, uint64_t bytes) { return hold_span(c, tensor, offset, bytes); };
}

void RemoteCheckpoint::hold_for_reads(const Checkpoint& c, size_t tensor) {
  if (!c.tensors.at(tensor).readable()) return;  // the reader refuses it with the reason
  {
    std::lock_guard<std::mutex> guard(held_mutex_);
    if (const auto k = std::find(kept_.begin(), kept_.end(), tensor); k != kept_.end()) {
      kept_.splice(kept_.begin(), kept_, k);  // most recently read
      return;
    }
    const auto it = held_.find(c.tensors[tensor].name);
    if (it != held_.end() && it->second.valid) return;  // held by a fetch (an indexing batch): read as it is
  }
  fetch(c, {tensor});
  std::vector<size_t> evicted;
  {
    std::lock_guard<std::mutex> guard(held_mutex_);
    kept_.push_front(tensor);
    kept_bytes_ += fetch_bytes(c, {tensor});
    evicted = evict_over_budget_locked();
  }
  release(c, evicted);
}

uint64_t RemoteCheckpoint::bytes_received() const { return http_->bytes_received(); }
uint64_t RemoteCheckpoint::requests() const { return http_->requests(); }
uint64_t RemoteCheckpoint::retries() const { return http_->retries(); }

std::string RemoteCheckpoint::transfer_text() const {
  return "fetched " + std::to_string(bytes_received()) + " bytes in " + std::to_string(requests()) + " requests (" +
         std::to_string(retries()) + " retries) from " + host_ + "; the files' headers are " + std::to_string(header_bytes_) + " bytes" +
         (cached_at_ ? ", from the header cache (fetched " + std::to_string(std::max<int64_t>(0, std::time(nullptr) - cached_at_)) + " s ago)" : "");
}

IndexingReport index_remote(const CheckpointIndex& index, RemoteCheckpoint& remote, uint64_t memory_budget,
                            const std::function<IndexingReport(const std::vector<size_t>&)>& fill) {
  const Checkpoint& c = index.checkpoint();
  std::vector<size_t> todo;
  for (size_t i = 0; i < c.tensors.size(); ++i)
    if (c.tensors[i].readable() && !index.has_stats(i)) todo.push_back(i);
  return index_remote(c, std::move(todo), remote, memory_budget, fill);
}

IndexingReport index_remote(const Checkpoint& c, std::vector<size_t> order, RemoteCheckpoint& remote, uint64_t memory_budget,
                            const std::function<IndexingReport(const std::vector<size_t>&)>& fill) {
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return std::tie(c.tensors[x].file_index, c.tensors[x].file_offset) < std::tie(c.tensors[y].file_index, c.tensors[y].file_offset);
  });
  const uint64_t budget = std::clamp<uint64_t>(memory_budget / 4, 16ull << 20, 256ull << 20);
  std::vector<std::vector<size_t>> batches;
  uint64_t in_batch = 0;
  for (size_t i : order) {
    const uint64_t b = RemoteCheckpoint::fetch_bytes(c, {i});
    if (batches.empty() || in_batch + b > budget) batches.emplace_back(), in_batch = 0;
    batches.back().push_back(i), in_batch += b;
  }
  const auto start = std::chrono::steady_clock::now();
  IndexingReport sum;
  std::future<void> next;
  if (!batches.empty()) next = std::async(std::launch::async, [&] { remote.fetch(c, batches[0]); });
  for (size_t k = 0; k < batches.size(); ++k) {
    next.get();
    if (k + 1 < batches.size()) next = std::async(std::launch::async, [&, k] { remote.fetch(c, batches[k + 1]); });
    IndexingReport r;
    try {
      r = fill(batches[k]);
    } catch (...) {
      if (next.valid()) next.wait();  // the prefetch writes into stand-ins this run still owns
      throw;
    }
    remote.release(c, batches[k]);
    sum.computed += r.computed, sum.bytes += r.bytes, sum.workers = std::max(sum.workers, r.workers);
    sum.window_bytes = r.window_bytes, sum.readahead_bytes = r.readahead_bytes;
    if (r.cancelled) {
      sum.cancelled = true;
      if (next.valid()) next.wait();
      break;
    }
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sum;
}

RemotePair::RemotePair(const std::string& a, const std::string& b)
    : RemotePair(a, b, nullptr, nullptr) {}

RemotePair::RemotePair(const std::string& a, const std::string& b, RemoteCheckpoint* open_a, RemoteCheckpoint* open_b)
    : given_a_(a), given_b_(b) {
  if (!open_a) own_a_ = open_remote_if_url(a), open_a = own_a_.get();
  if (!open_b) own_b_ = open_remote_if_url(b), open_b = own_b_.get();
  ra_ = open_a, rb_ = open_b;
  path_a_ = ra_ ? ra_->local_path() : a;
  path_b_ = rb_ ? rb_->local_path() : b;
  if (ra_) ca_ = std::make_unique<Checkpoint>(open_checkpoint(path_a_));
  if (rb_) cb_ = std::make_unique<Checkpoint>(open_checkpoint(path_b_));
}

RemotePair::~RemotePair() = default;

std::function<void(size_t, size_t, bool)> RemotePair::around_pair() {
  if (!ra_ && !rb_) return {};
  return [this](size_t ia, size_t ib, bool fetch) {
    for (auto [remote, c, i] : {std::tuple{ra_, ca_.get(), ia}, std::tuple{rb_, cb_.get(), ib}}) {
      if (!remote || i == kNoTensor || !c->tensors.at(i).readable()) continue;
      if (fetch) remote->fetch(*c, {i});
      else remote->release(*c, {i});
    }
  };
}

namespace {
void replace_string(nlohmann::json& doc, const std::string& from, const std::string& to) {
  if (doc.is_string() && doc.get<std::string>() == from) doc = to;
  else if (doc.is_structured())
    for (auto& v : doc) replace_string(v, from, to);
}
}  // namespace

void RemoteCheckpoint::show_given(nlohmann::json& doc, const std::string& given) const {
  show_urls(doc);
  replace_string(doc, local_path_, given);
}

void RemotePair::show_given(nlohmann::json& doc) const {
  for (const auto& [remote, given] : {std::tuple{ra_, &given_a_}, std::tuple{rb_, &given_b_}})
    if (remote) remote->show_given(doc, *given);
}

IndexingReport remote_indexing_report(IndexingReport whole, const IndexingReport& batches) {
  whole.already_indexed -= std::min(whole.already_indexed, batches.computed);
  whole.computed = batches.computed, whole.bytes = batches.bytes, whole.workers = std::max(whole.workers, batches.workers);
  whole.window_bytes = batches.window_bytes, whole.readahead_bytes = batches.readahead_bytes;
  whole.seconds = batches.seconds;
  return whole;
}

FetchedTensors::FetchedTensors(RemoteCheckpoint* remote, const Checkpoint& c, const std::vector<size_t>& which)
    : remote_(remote), c_(c) {
  if (!remote_) return;
  for (size_t i : which)
    if (c.tensors.at(i).readable()) which_.push_back(i);
  remote_->fetch(c_, which_);
}

FetchedTensors::~FetchedTensors() {
  if (!remote_) return;
  try {
    remote_->release(c_, which_);
  } catch (...) {  // releasing frees disk blocks early; the stand-in is valid either way
  }
}

std::unique_ptr<RemoteCheckpoint> open_remote_if_url(const std::string& path) {
  if (!remote::is_remote_path(path)) return nullptr;
  return std::make_unique<RemoteCheckpoint>(path);
}

}  // namespace tmorph::app
