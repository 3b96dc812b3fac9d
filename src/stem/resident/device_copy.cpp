#include "stem/resident/device_copy.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/utc_time.h"
#include "ops/kernel_call.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

// Words of a page holding `positions` positions and `entries` entries with keys of `key_bytes` bytes.
uint64_t page_words(uint64_t positions, uint64_t entries, uint32_t key_bytes) {
  return 3 + positions + (key_bytes == 2 ? (entries + 1) / 2 : entries) + entries;
}

// Cuts the copy's positions into pages (page_first, as the contract says) and returns the image's bytes.
uint64_t plan_pages(const CompactFrames& frames, uint32_t key_bytes, std::vector<uint64_t>* page_first) {
  constexpr uint64_t kPageWords = TM_STEM_COMPACT_PAGE_BYTES / 4;
  page_first->assign(1, 0);
  uint64_t n = 0, e = 0;
  for (uint64_t q = 0; q < frames.appended(); ++q) {
    const uint64_t count = frames.entries(q).count;
    if (page_words(1, count, key_bytes) > kPageWords)
      throw Error(ErrorKind::InvalidArgument, "resident copy: the frame at position " + std::to_string(q) + " has " + std::to_string(count) +
                                                  " non-zero pixels, more than one page of the device image holds");
    if (n > 0 && page_words(n + 1, e + count, key_bytes) > kPageWords) page_first->push_back(q), n = 0, e = 0;
    ++n, e += count;
  }
  page_first->push_back(frames.appended());
  return (page_first->size() - 2) * uint64_t{TM_STEM_COMPACT_PAGE_BYTES} + page_words(n, e, key_bytes) * 4;
}

}  // namespace

uint64_t compact_image_bytes(const CompactFrames& frames) {
  std::vector<uint64_t> page_first;
  return plan_pages(frames, frames.wide_keys() ? 4 : 2, &page_first);
}

CompactImage compact_image(const CompactFrames& frames) {
  CompactImage image;
  image.key_bytes = frames.wide_keys() ? 4 : 2;
  image.size = plan_pages(frames, image.key_bytes, &image.page_first);
  image.bytes = LargeBuffer(image.size, LargeBuffer::Populate::yes);
  std::memset(image.bytes.get(), 0, image.size);
  for (size_t page = 0; page + 1 < image.page_first.size(); ++page) {
    const uint64_t first = image.page_first[page], last = image.page_first[page + 1];
    uint8_t* base = image.bytes.get() + page * uint64_t{TM_STEM_COMPACT_PAGE_BYTES};
    uint64_t e = 0;
    for (uint64_t q = first; q < last; ++q) e += frames.entries(q).count;
    auto* w = reinterpret_cast<uint32_t*>(base);  // LargeBuffer pages are aligned
    const uint64_t n = last - first, keys_at = 3 + n, totals_at = keys_at + (image.key_bytes == 2 ? (e + 1) / 2 : e);
    w[0] = static_cast<uint32_t>(n), w[1] = static_cast<uint32_t>(e), w[2] = 0;
    uint64_t at = 0;
    for (uint64_t q = first; q < last; ++q) {
      const CompactFrames::Entries x = frames.entries(q);
      std::memcpy(base + keys_at * 4 + at * image.key_bytes, x.keys, uint64_t{x.count} * image.key_bytes);
      std::memcpy(w + totals_at + at, x.totals, uint64_t{x.count} * 4);
      at += x.count;
      w[3 + (q - first)] = static_cast<uint32_t>(at);
    }
  }
  return image;
}

nlohmann::json DeviceCopy::to_json() const {
  return {{"location", location}, {"device", device},       {"bytes", bytes},
          {"positions", positions}, {"built_at", built_at}, {"build_seconds", build_seconds}};
}

std::unique_ptr<DeviceCopy> make_device_copy(const CompactFrames& frames, const Placement& placement, uint64_t memory_budget,
                                             std::string* why) {
  const auto t0 = std::chrono::steady_clock::now();
  const CompactImage image = compact_image(frames);
  auto copy = std::make_unique<DeviceCopy>();
  copy->memory = ResidentCopy::make(placement, image.bytes.get(), image.size, memory_budget);
  if (!copy->memory) {
    *why = placement.backend + " cannot keep the " + std::to_string(image.size) + "-byte copy on " + placement.device +
           " (no residency extension, a device reading host memory, over the budget or half the device's memory, or out of memory)";
    return nullptr;
  }
  copy->page_first = image.page_first;
  copy->key_bytes = image.key_bytes;
  copy->bytes = image.size;
  copy->positions = frames.appended();
  copy->location = copy->memory->location();
  copy->device = placement.device;
  copy->built_at = utc_now_iso8601();
  copy->build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return copy;  // the host image is freed here: the copy lives on the device
}

OpRequest compact_sums_request(const CompactFrames& frames, const std::set<std::string>& devices) {
  OpRequest r;
  r.op = TM_OP_STEM_COMPACT_SUMS;
  r.dtype = DType::U8;
  r.bytes = r.elements = compact_image_bytes(frames);
  r.residency.on_host = true;  // the host copy (CompactFrames) is always there
  r.residency.devices = devices;
  return r;
}

CompactFrames::Sums compact_sums(const Placement& placement, const CompactFrames& frames, const DeviceCopy* device,
                                 const CompactImage* host_image, const std::vector<std::vector<uint32_t>>& detectors,
                                 const std::vector<uint32_t>* com_pixels, bool fixed, const std::vector<uint64_t>& positions,
                                 unsigned threads) {
  const uint64_t pixels = frames.rows() * frames.cols();
  const bool with_com = fixed && com_pixels;
  const uint64_t lists = detectors.size() + (with_com ? 1 : 0);
  if (lists > TM_STEM_COMPACT_MAX_LISTS)
    throw Error(ErrorKind::InvalidArgument, "resident copy: " + std::to_string(detectors.size()) + " detectors in one pass on " +
                                                placement.backend + " (at most " + std::to_string(TM_STEM_COMPACT_MAX_LISTS - (with_com ? 1 : 0)) + ")");
  std::vector<uint64_t> key_lists(lists ? pixels : 0, 0);
  const auto add = [&](const std::vector<uint32_t>& list, uint64_t bit, const char* what) {
    for (uint32_t p : list) {
      if (p >= pixels) throw Error(ErrorKind::InvalidArgument, std::string("products: a ") + what + " pixel lies outside the frame");
      key_lists[frames.key_of_pixel(p)] |= uint64_t{1} << bit;
    }
  };
  // A detector that is a range of keys (an annulus about a radially ordered copy's centre) is summed from two running
  // totals; the others through their bits, entry by entry.
  std::vector<uint32_t> ranges(2 * lists, 0);
  bool any_range = false;
  for (size_t d = 0; d < detectors.size(); ++d) {
    if (const auto r = frames.rank_range(detectors[d])) {
      ranges[2 * d] = (*r)[0], ranges[2 * d + 1] = (*r)[1], any_range = true;
      continue;
    }
    add(detectors[d], d, "detector");
  }
  if (with_com) add(*com_pixels, detectors.size(), "centre-of-mass");
  std::vector<uint32_t> wanted(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] >= frames.appended())
      throw Error(ErrorKind::InvalidArgument, "resident copy: position " + std::to_string(positions[i]) + " is not resident");
    wanted[i] = static_cast<uint32_t>(positions[i]);
  }
  const std::vector<uint64_t>& page_first = device ? device->page_first : host_image->page_first;
  tm_stem_compact_sums_params_v1 p{};
  p.pixels_per_frame = pixels;
  p.cols = static_cast<uint32_t>(frames.cols());
  p.key_bytes = device ? device->key_bytes : host_image->key_bytes;
  p.page_count = static_cast<uint32_t>(page_first.size() - 1);
  p.list_count = static_cast<uint32_t>(lists);
  p.page_first = page_first.data();
  p.positions = wanted.data();
  p.position_count = wanted.size();
  p.key_lists = key_lists.empty() ? nullptr : key_lists.data();
  p.pixel_of_key = frames.pixel_of_key().empty() ? nullptr : frames.pixel_of_key().data();
  p.com_list = with_com ? static_cast<uint32_t>(detectors.size()) : TM_STEM_ALL_PIXELS;
  p.flags = fixed ? 0 : TM_STEM_LISTS_ONLY;
  p.list_ranges = any_range ? ranges.data() : nullptr;
  const uint64_t row_values = TM_STEM_FRAME_SUMS_FIXED + lists;
  std::vector<uint64_t> out(positions.size() * row_values, 0);
  KernelArgs args{DType::U8, nullptr, device ? device->bytes : host_image->size, &p, sizeof p, out.data(), out.size() * 8, threads};
  if (device) {
    if (!device->serves(placement))
      throw Error(ErrorKind::Internal, "stem.compact_sums: the device copy is not on " + placement.backend + "/" + placement.device);
    DeviceOperands on;
    on.input = device->memory.get();
    run_placed_kernel_on_device(placement, TM_OP_STEM_COMPACT_SUMS, args, on);
  } else {
    args.input = host_image->bytes.get();
    run_placed_kernel(placement, TM_OP_STEM_COMPACT_SUMS, args);
  }
  CompactFrames::Sums s;
  const uint64_t n = positions.size();
  if (fixed) s.totals.resize(n), s.com_weight.resize(n), s.com_row.resize(n), s.com_col.resize(n);
  s.images.assign(detectors.size(), std::vector<uint64_t>(n, 0));
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t* r = out.data() + i * row_values;
    if (fixed) s.totals[i] = r[0], s.com_weight[i] = r[1], s.com_row[i] = r[2], s.com_col[i] = r[3];
    for (size_t d = 0; d < detectors.size(); ++d) s.images[d][i] = r[TM_STEM_FRAME_SUMS_FIXED + d];
  }
  for (size_t d = 0; d < detectors.size(); ++d)
    s.evaluated_as.push_back((ranges[2 * d] < ranges[2 * d + 1] ? "rank range on " : "entry by entry on ") + placement.backend);
  return s;
}

}  // namespace tmorph
