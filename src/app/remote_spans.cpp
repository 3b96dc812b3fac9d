// RemoteCheckpoint's span reads (remote_checkpoint.h, serve_reads): a dense tensor's bytes fetched by the blocks a
// ValueReader touches, pinned while it reads them, kept under the same budget as whole tensors and freed least
// recently read first. Page safety: a block's pages are not freed while a fetch() holds its tensor whole, and a
// whole tensor's release keeps the pages of its blocks that are valid or loading (release_ranges).
#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include "app/remote_checkpoint.h"
#include "remote/http_ranges.h"
#include "remote/mirror_file.h"
#include "tensormorph/error.h"

namespace tmorph::app {

namespace {

// Unpins its blocks when the last reader holding it goes.
class BlockPins {
 public:
  explicit BlockPins(std::function<void()> unpin) : unpin_(std::move(unpin)) {}
  ~BlockPins() { unpin_(); }
  BlockPins(const BlockPins&) = delete;
  BlockPins& operator=(const BlockPins&) = delete;

 private:
  std::function<void()> unpin_;
};

}  // namespace

Checkpoint::SpanRead RemoteCheckpoint::hold_span(const Checkpoint& c, size_t tensor, uint64_t offset, uint64_t bytes) {
  const CheckpointTensor& t = c.tensors.at(tensor);
  if (!Checkpoint::spanned_reads(t) || offset + bytes > t.bytes)
    throw Error(ErrorKind::Internal, t.name + ": a span read outside the tensor or of a tensor not read by spans");
  const uint64_t first = offset / kSpanBlockBytes, last = (offset + std::max<uint64_t>(bytes, 1) - 1) / kSpanBlockBytes;
  remote::MirrorFile& file = stand_in(c, t.file_index);
  std::vector<BlockKey> keys;
  {
    std::lock_guard<std::mutex> guard(held_mutex_);
    const auto whole = held_.find(t.name);
    const bool held_whole = whole != held_.end() && whole->second.valid;
    for (uint64_t b = first; b <= last; ++b) {
      Block& block = blocks_[keys.emplace_back(t.name, b)];
      ++block.pins;  // from here on never freed until the reader goes
      block.file = &file;
      block.offset = t.file_offset + b * kSpanBlockBytes;
      block.bytes = std::min(kSpanBlockBytes, t.bytes - b * kSpanBlockBytes);
      if (held_whole && !block.valid && !block.loading) {  // the bytes are there: a fetch holds the tensor whole
        block.valid = true;
        kept_blocks_.push_front(keys.back());
        kept_bytes_ += block.bytes;
      }
    }
  }
  Checkpoint::SpanRead span;
  span.covered_offset = first * kSpanBlockBytes;
  span.covered_bytes = std::min(t.bytes, (last + 1) * kSpanBlockBytes) - span.covered_offset;
  span.pin = std::make_shared<BlockPins>([this, &c, keys] { unpin(c, keys); });
  for (;;) {
    std::vector<BlockKey> mine;
    std::vector<remote::ByteRange> ranges;
    {
      std::unique_lock<std::mutex> lock(held_mutex_);
      bool waiting = false;
      for (const BlockKey& key : keys) {
        Block& block = blocks_[key];
        if (block.valid) {
          if (const auto k = std::find(kept_blocks_.begin(), kept_blocks_.end(), key); k != kept_blocks_.end())
            kept_blocks_.splice(kept_blocks_.begin(), kept_blocks_, k);  // most recently read
          continue;
        }
        if (block.loading) waiting = true;
        else block.loading = true, mine.push_back(key), ranges.push_back({block.offset, block.bytes});
      }
      if (mine.empty()) {
        if (!waiting) break;
        held_changed_.wait(lock);  // another reader fetches some of them
        continue;
      }
    }
    try {
      http_->read(file.identity(), ranges, [&](uint64_t at, const uint8_t* d, size_t n) { file.write(at, d, n); });
    } catch (...) {
      std::lock_guard<std::mutex> guard(held_mutex_);
      for (const BlockKey& key : mine) blocks_[key].loading = false;
      held_changed_.notify_all();
      throw;  // the pins go with `span`
    }
    std::lock_guard<std::mutex> guard(held_mutex_);
    for (const BlockKey& key : mine) {
      Block& block = blocks_[key];
      block.loading = false, block.valid = true;
      kept_blocks_.push_front(key);
      kept_bytes_ += block.bytes;
    }
    held_changed_.notify_all();
  }
  return span;
}

void RemoteCheckpoint::unpin(const Checkpoint& c, const std::vector<BlockKey>& keys) {
  std::vector<size_t> evicted;
  {
    std::lock_guard<std::mutex> guard(held_mutex_);
    for (const BlockKey& key : keys) {
      const auto it = blocks_.find(key);
      if (it == blocks_.end()) continue;
      Block& block = it->second;
      if (--block.pins == 0 && !block.valid && !block.loading) blocks_.erase(it);  // its fetch failed: forgotten
    }
    evicted = evict_over_budget_locked();
  }
  release(c, evicted);
}

std::vector<size_t> RemoteCheckpoint::evict_over_budget_locked() {
  for (auto k = kept_blocks_.end(); kept_bytes_ > keep_budget_ && k != kept_blocks_.begin();) {
    --k;
    const auto it = blocks_.find(*k);
    if (it == blocks_.end() || it->second.pins > 0) continue;  // being read: kept
    const Block& block = it->second;
    const auto whole = held_.find(k->first);
    if (whole == held_.end() || whole->second.count == 0) block.file->release(block.offset, block.bytes);
    kept_bytes_ -= block.bytes;
    blocks_.erase(it);
    k = kept_blocks_.erase(k);
  }
  std::vector<size_t> evicted;
  while (kept_bytes_ > keep_budget_ && kept_.size() > 1) {
    evicted.push_back(kept_.back());
    kept_bytes_ -= fetch_bytes(*served_, {kept_.back()});
    kept_.pop_back();
  }
  return evicted;
}

std::vector<remote::ByteRange> RemoteCheckpoint::span_blocks_locked(const std::string& name) const {
  std::vector<remote::ByteRange> out;
  for (auto it = blocks_.lower_bound({name, 0}); it != blocks_.end() && it->first.first == name; ++it)
    if (it->second.valid || it->second.loading) out.push_back({it->second.offset, it->second.bytes});
  return out;
}

}  // namespace tmorph::app
