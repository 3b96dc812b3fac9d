// Loading a 4D-STEM acquisition (or a region of it) into memory as a 4-D array
// [scan row, scan col, detector row, detector col], with exact count-preserving binning.
//
// Contract:
// - Regions are half-open [r0, r1) × [c0, c1), resolved to frames before anything is read: only the
//   chunks of frames inside the scan region are located, read and decoded.
// - Binning sums: I_b[R, Q] = Σ I[r, c, k, l] over the bin's members, in an integer accumulator wide
//   enough for the bin (no wrap-around). Partial edge bins are kept (output size = ceil(n / bin)).
// - Bad pixels (pixel_mask > 0) and sentinel values (the source dtype's maximum, which Dectris writes
//   for masked pixels) are set to 0 before binning, unless mask_bad_pixels is false.
// - Output dtype "auto" is the narrowest of {source, uint32, uint64} that holds bin_count × source max.
//   A narrower explicit dtype is the caller's permission to narrow: it is applied only when every value
//   fits (else Error(InvalidArgument) naming the first value that does not), and the provenance says so.
// - Float frames (float32, e.g. EMPAD; float64): no sentinel (only pixel_mask pixels are zeroed); unbinned
//   output keeps the source dtype, bit for bit; a bin's members are added in one float64 accumulator per output
//   pixel, member frames in row-major scan order, each frame's detector pixels row-major, and the output is
//   float64 ("auto" or "float64"; an integer --dtype is refused). Integer frames never become floats.
// - Memory admission: when the output plus working buffers exceed the budget, nothing is allocated and
//   Error(PrecisionRefused) lists the fallback ladder (crop, bin) with what each would need.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "support/large_buffer.h"
#include "stem/acquisition.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

// The largest value of an unsigned integer dtype (U8, U16, U32, U64), e.g. the Dectris sentinel of masked
// pixels; UINT64_MAX for any other dtype.
uint64_t unsigned_max(DType t);

struct Box {  // half-open [r0, r1) × [c0, c1)
  uint64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
};

struct LoadRequest {
  std::optional<std::array<uint64_t, 2>> scan_shape;  // required when the frame count is not a square
  std::optional<Box> scan_region, detector_region;    // default: everything
  std::array<uint64_t, 2> scan_bin{1, 1}, detector_bin{1, 1};
  std::string dtype = "auto";  // auto, uint8, uint16, uint32, uint64; float32, float64 for float frames
  bool mask_bad_pixels = true;
  unsigned threads = 1;
  uint64_t memory_budget = 0;  // bytes; 0 = no limit
  // Checked before each batch of frames is read (support/cancel.h): when set and true, the read throws
  // Cancelled. Not part of what is read (nor of any cache key).
  const std::atomic<bool>* cancel = nullptr;
  // Called after each batch of frames is read and decoded (about 32 frames on the CPU; one call's batch when decoding
  // is placed elsewhere), from whichever loading thread did it, calls serialised: the frames this loader has read so
  // far and the frames it reads in all (LoadPlan::frames; a product of several passes reports each pass from 0).
  // A caller wanting a rate limit applies its own. Not part of what is read (nor of any cache key).
  std::function<void(uint64_t frames_done, uint64_t frames_total)> progress;
};

// What a request resolves to before reading (shapes, output dtype, memory), for admission and reports.
struct LoadPlan {
  std::array<uint64_t, 2> scan_shape{};
  Box scan_region, detector_region;
  std::array<uint64_t, 4> output_shape{};
  DType safe_dtype = DType::U16;    // the dtype that holds every possible value
  DType output_dtype = DType::U16;  // what the caller gets
  uint64_t output_bytes = 0;
  uint64_t working_bytes = 0;       // per-thread decode buffers
  uint64_t frames = 0;              // frames to read
};

struct StemArray {
  std::array<uint64_t, 4> shape{};
  DType dtype = DType::U16;
  LargeBuffer data;  // bytes of row-major output
  uint64_t bytes = 0;
  nlohmann::json provenance;
  // Measured while loading.
  double seconds = 0;
  uint64_t stored_bytes_read = 0;  // compressed chunk bytes read
  uint64_t decoded_bytes = 0;      // frames × frame bytes decoded
};

// Resolves and checks a request (regions inside the acquisition, bins >= 1, dtype known) without
// reading pixel data. Throws InvalidArgument for a malformed request.
LoadPlan plan_load(const Acquisition& acq, const LoadRequest& req);

// Loads per the contract above.
StemArray load_stem(const Acquisition& acq, const LoadRequest& req);

class StemLoader;
class ResidentCopy;
// Places decode.bitshuffle_lz4 for the loader's frames when the acquisition stores bitshuffle+LZ4 chunks and
// tells the loader where it runs; nullopt for other codecs (the loader decodes those itself). Decoding is
// input preparation: under --backend NAME it runs on NAME when NAME has the kernel, else where the planner
// places it with NAME preferred (the CPU), reported like every placement.
std::optional<Placement> place_decode(const Acquisition& acq, StemLoader& loader, const Planner& planner);

// The loading machinery, a batch of output positions at a time (products stream through it without
// holding the 4-D array). Construction plans the request and checks that every frame it needs is
// readable; no memory admission (load_stem does that for the whole output).
class StemLoader {
 public:
  StemLoader(const Acquisition& acq, const LoadRequest& req);
  ~StemLoader();
  StemLoader(const StemLoader&) = delete;
  StemLoader& operator=(const StemLoader&) = delete;

  const LoadPlan& plan() const;
  uint64_t positions() const;       // output scan positions (rows × cols)
  uint64_t position_bytes() const;  // bytes of one output frame
  // Writes output positions [first, first + count) (row-major) into out, count × position_bytes() bytes,
  // on the request's threads. Exactly what load_stem returns for those positions.
  void fill(uint64_t first, uint64_t count, uint8_t* out);
  // Decodes output positions [first, first + count) one frame at a time on the request's threads, masked as fill
  // writes them, and hands each frame to `take` while it is still in cache (nothing is written out for the caller to
  // read back): run(part, begin, end) once per thread's contiguous run of positions, then take(part, position,
  // frame) for each of its positions in order, on that thread. Only when the output frames are the decoded frames
  // as they are (whole detector, unbinned, the stored dtype) and decoding runs on this CPU: returns false, having
  // read nothing, otherwise (the caller fills batches instead). Damaged chunks are fill's errors.
  bool fill_each(uint64_t first, uint64_t count, const std::function<void(unsigned, uint64_t, uint64_t)>& run,
                 const std::function<void(unsigned, uint64_t, const uint8_t*)>& take);
  // Decode bitshuffle+LZ4 chunks where `placement` (of TM_OP_DECODE_BITSHUFFLE_LZ4) says: on another backend,
  // fill reads a batch of chunks and decodes them in one call there; on the CPU (the default) each thread
  // decodes its own frames. The output is the same bytes either way.
  void decode_with(const Placement& placement);
  // The placement decode_with was given when it is another backend's and the output frames are the decoded
  // frames as they are (whole detector, no binning, the stored dtype), so fill_device can decode them into
  // that backend's memory; null otherwise.
  const Placement* device_decode() const;
  // Decodes output positions [first, first + count) into `frames` (device memory on device_decode()'s
  // backend and device, from byte 0), masked there as fill masks: exactly fill's bytes, never on the host.
  // Returns false, having read nothing, when a frame of the run is not a bitshuffle+LZ4 chunk the op takes
  // (stored raw, another codec): the caller fills those positions on the host instead.
  bool fill_device(uint64_t first, uint64_t count, const ResidentCopy& frames);
  // The provenance of the request (bad-pixel counts and bytes cover every fill so far).
  nlohmann::json provenance() const;
  uint64_t stored_bytes_read() const;
  uint64_t decoded_bytes() const;

 private:
  struct State;
  class FrameSink;
  void fill_placed(uint64_t first, uint64_t count, uint8_t* out);
  std::unique_ptr<State> s_;
};

}  // namespace tmorph
