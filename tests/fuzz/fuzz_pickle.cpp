// libFuzzer harness: torch.save files (parse_torch_save, src/formats/torch_save.h: the zip format, the
// legacy stream of pickles and storages, and the refused tar format; a storage whose CRC-32 was left to a
// full pass is checked too) and, for inputs that are none of these, the restricted pickle reader alone (read_pickle with torch's allow-list, as data.pkl is
// read) and as a DCP .metadata (parse_dcp_metadata). Zip inputs are also read as DeepSpeed ZeRO model
// and optimizer states (formats/deepspeed_zero.h): every group and moment they name is one of the file's
// tensors, and every shape's element count fits 64 bits. Accepted files must describe storages inside the
// input and views inside their storages (a strided view no larger than the input is gathered, as
// Checkpoint::data does, so that a view reaching outside its storage would read out of bounds); errors
// must be valid UTF-8 whatever bytes the input's names hold.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <unordered_map>
#include <vector>

#include "checkpoint/strided_view.h"
#include "core/utf8.h"
#include "formats/dcp.h"
#include "formats/deepspeed_zero.h"
#include "formats/pickle_reader.h"
#include "formats/torch_save.h"
#include "formats/zip_archive.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

namespace {

// The distinct values reachable from v, each visited once (shared references are legal and can make
// exponentially many paths); a cycle, or nesting beyond the reader's limit, aborts.
void count_values(const tmorph::PickleValue& v, uint32_t depth, std::unordered_map<const void*, bool>& done, uint64_t& n) {
  TM_FUZZ_CHECK(depth <= 201);
  auto [it, fresh] = done.emplace(&v, false);  // false: in progress
  if (!fresh) {
    TM_FUZZ_CHECK(it->second);  // reached again while in progress: a cycle
    return;
  }
  ++n;
  for (const auto& x : v.items) count_values(*x, depth + 1, done, n);
  for (const auto& [k, x] : v.entries) count_values(*k, depth + 1, done, n), count_values(*x, depth + 1, done, n);
  done[&v] = true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const bool zip = tmorph::looks_like_zip(data, size);
    if (zip || tmorph::looks_like_legacy_torch(data, size) || tmorph::looks_like_torch_tar(data, size)) {
      const tmorph::TorchSaveFile f = tmorph::parse_torch_save(data, size, "fuzz.pt");
      TM_FUZZ_CHECK(f.header_bytes <= size);
      for (const auto& s : f.storages) {
        TM_FUZZ_CHECK(s.element_bytes > 0 && s.file_offset <= size);
        TM_FUZZ_CHECK(s.elements <= (size - s.file_offset) / s.element_bytes);
        TM_FUZZ_CHECK(zip || s.crc_checked);
        try {
          tmorph::check_storage_crc(f, s, data, "fuzz.pt");
        } catch (const tmorph::Error& e) {
          TM_FUZZ_CHECK(tmorph::is_valid_utf8(e.what()));
        }
      }
      for (const auto& t : f.tensors) {
        TM_FUZZ_CHECK(t.storage < f.storages.size());
        const auto& s = f.storages[t.storage];
        if (t.contiguous && t.elements) TM_FUZZ_CHECK(t.storage_offset + t.elements <= s.elements);
        if (!t.contiguous && t.elements && t.elements <= size / s.element_bytes) {
          std::vector<uint8_t> out(t.elements * s.element_bytes);
          tmorph::gather_strided(data + s.file_offset + t.storage_offset * s.element_bytes, s.element_bytes, t.shape, t.strides,
                                 out.data());
        }
      }
      if (tmorph::fuzz::verbose()) std::fprintf(stderr, "torch.save: %zu tensors, %zu storages\n", f.tensors.size(), f.storages.size());
      if (!zip) return 0;  // DeepSpeed's files are zips
      try {
        const tmorph::ZeroOptimStates o = tmorph::parse_zero_optim_states(data, size, "fuzz_optim_states.pt", false);
        TM_FUZZ_CHECK(o.stage >= 1 && o.stage <= 3 && o.world_size > 0 && o.moments.size() == o.fp32_groups.size());
        for (size_t g : o.fp32_groups) TM_FUZZ_CHECK(g < o.file.tensors.size());
        for (const auto& m : o.moments)
          for (const auto& [k, t] : m) TM_FUZZ_CHECK(t < o.file.tensors.size());
      } catch (const tmorph::Error& e) {
        TM_FUZZ_CHECK(tmorph::is_valid_utf8(e.what()));
      }
      try {
        const tmorph::ZeroModelStates m = tmorph::parse_zero_model_states(data, size, "fuzz_model_states.pt");
        for (const auto& g : m.param_shapes)
          for (const auto& p : g) {
            uint64_t n = 1;
            for (uint64_t d : p.shape) {
              TM_FUZZ_CHECK(d == 0 || n <= UINT64_MAX / d);
              n *= d;
            }
            TM_FUZZ_CHECK(n == p.elements);
          }
      } catch (const tmorph::Error& e) {
        TM_FUZZ_CHECK(tmorph::is_valid_utf8(e.what()));
      }
    } else {
      tmorph::PickleOptions o;
      for (const auto& g : tmorph::torch_allowed_globals()) o.allowed_globals.insert(g);
      o.allowed_what = "torch";
      try {
        // The same bytes as a DCP .metadata: every chunk it accepts has as many offsets and sizes as
        // its tensor has dimensions.
        const tmorph::DcpMetadata m = tmorph::parse_dcp_metadata(data, size, "fuzz/.metadata");
        for (const auto& t : m.tensors)
          for (const auto& c : t.chunks) TM_FUZZ_CHECK(c.offsets.size() == t.size.size() && c.sizes.size() == t.size.size());
      } catch (const tmorph::Error& e) {
        TM_FUZZ_CHECK(tmorph::is_valid_utf8(e.what()));
      }
      const tmorph::PickleRef v = tmorph::read_pickle(data, size, "fuzz.pkl", o);
      std::unordered_map<const void*, bool> done;
      uint64_t n = 0;
      count_values(*v, 1, done, n);
      if (tmorph::fuzz::verbose()) std::fprintf(stderr, "pickle: %llu values\n", static_cast<unsigned long long>(n));
    }
  } catch (const tmorph::Error& e) {
    TM_FUZZ_CHECK(tmorph::is_valid_utf8(e.what()));  // names from the file are escaped in messages
  }
  return 0;
}
