#include "stem/load.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>

#include "compute/resident_copy.h"
#include "ops/kernel_call.h"
#include "support/cancel.h"
#include "support/thread_pool.h"
#include "support/bitshuffle.h"
#include "stem/frame_reader.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"

#ifndef TM_VERSION
#define TM_VERSION "dev"
#endif
#ifndef TM_REVISION
#define TM_REVISION "unknown"
#endif

namespace tmorph {

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }


bool is_float_frames(DType t) { return t == DType::F32 || t == DType::F64; }

DType parse_output_dtype(const std::string& s) {
  if (s == "float32") return DType::F32;
  if (s == "float64") return DType::F64;
  if (s == "uint8") return DType::U8;
  if (s == "uint16") return DType::U16;
  if (s == "uint32") return DType::U32;
  if (s == "uint64") return DType::U64;
  throw Error(ErrorKind::InvalidArgument, "--dtype " + s + ": expected auto, uint8, uint16, uint32, uint64, float32 or float64");
}

Box check_box(const std::optional<Box>& given, uint64_t rows, uint64_t cols, const char* flag) {
  if (!given) return Box{0, rows, 0, cols};
  const Box b = *given;
  if (!(b.r0 < b.r1 && b.r1 <= rows && b.c0 < b.c1 && b.c1 <= cols))
    throw Error(ErrorKind::InvalidArgument, std::string(flag) + " " + std::to_string(b.r0) + "," + std::to_string(b.r1) + "," +
                                                std::to_string(b.c0) + "," + std::to_string(b.c1) + ": need 0 <= r0 < r1 <= " +
                                                std::to_string(rows) + " and 0 <= c0 < c1 <= " + std::to_string(cols) + " (half-open)");
  return b;
}

std::string human_bytes(uint64_t b) {
  char text[32];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return text;
}

// Zeroes sentinel values (the dtype's maximum) and the listed bad pixels of one frame; returns how
// many sentinel values it zeroed.
template <class T>
uint64_t zero_bad_pixels(T* px, uint64_t n, const std::vector<uint32_t>& bad) {
  const T sentinel = std::numeric_limits<T>::max();
  uint64_t zeroed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const bool s = px[i] == sentinel;
    zeroed += s;
    px[i] = s ? T{0} : px[i];
  }
  for (uint32_t i : bad) px[i] = 0;
  return zeroed;
}

// Adds the detector region of one frame into acc (out_cols accumulators per output row), binned.
template <class T>
void accumulate(const T* px, uint64_t cols, const Box& det, uint64_t bin_r, uint64_t bin_c, uint64_t out_cols, uint64_t* acc) {
  for (uint64_t k = det.r0; k < det.r1; ++k) {
    uint64_t* row = acc + ((k - det.r0) / bin_r) * out_cols;
    const T* src = px + k * cols;
    if (bin_c == 1) {
      for (uint64_t l = det.c0; l < det.c1; ++l) row[l - det.c0] += src[l];
    } else {
      uint64_t o = 0, in_bin = 0;
      for (uint64_t l = det.c0; l < det.c1; ++l) {
        row[o] += src[l];
        if (++in_bin == bin_c) in_bin = 0, ++o;
      }
    }
  }
}

// Float frames: each output pixel's members are added in float64 in the order they arrive (member frames in
// row-major scan order, then detector pixels row-major), one accumulator per output pixel.
template <class T>
void accumulate_float(const uint8_t* frame, uint64_t cols, const Box& det, uint64_t bin_r, uint64_t bin_c, uint64_t out_cols,
                      double* acc) {
  const T* px = reinterpret_cast<const T*>(frame);
  for (uint64_t k = det.r0; k < det.r1; ++k) {
    double* row = acc + ((k - det.r0) / bin_r) * out_cols;
    const T* src = px + k * cols;
    for (uint64_t l = det.c0; l < det.c1; ++l) row[(l - det.c0) / bin_c] += static_cast<double>(src[l]);
  }
}

template <class Out>
void store(const uint64_t* acc, uint64_t n, uint8_t* out_bytes, bool check, uint64_t position, uint64_t out_cols, DType out_dtype) {
  Out* out = reinterpret_cast<Out*>(out_bytes);
  if (check) {
    for (uint64_t i = 0; i < n; ++i)
      if (acc[i] > std::numeric_limits<Out>::max())
        throw Error(ErrorKind::InvalidArgument,
                    "--dtype " + std::string(dtype_name(out_dtype)) + ": the value " + std::to_string(acc[i]) + " at output scan position " +
                        std::to_string(position) + ", detector (" + std::to_string(i / out_cols) + "," + std::to_string(i % out_cols) +
                        ") does not fit; nothing was narrowed (use --dtype auto)");
  }
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(acc[i]);
}

template <class T>
uint64_t zero_bad(uint8_t* frame, uint64_t n, const std::vector<uint32_t>& bad) {
  return zero_bad_pixels(reinterpret_cast<T*>(frame), n, bad);
}

template <class T>
void accumulate_bytes(const uint8_t* frame, uint64_t cols, const Box& det, uint64_t br, uint64_t bc, uint64_t oc, uint64_t* acc) {
  accumulate(reinterpret_cast<const T*>(frame), cols, det, br, bc, oc, acc);
}

std::string ladder_message(const Acquisition& acq, const LoadRequest& req, const LoadPlan& plan) {
  std::ostringstream msg;
  const uint64_t need = plan.output_bytes + plan.working_bytes;
  msg << "loading " << acq.master << " needs " << human_bytes(need) << " (output " << human_bytes(plan.output_bytes) << " + working "
      << human_bytes(plan.working_bytes) << "), over the memory budget of " << human_bytes(req.memory_budget)
      << "; nothing was allocated, cropped or binned.\nfallback ladder (ask for one explicitly):";
  const auto fits = [&](const LoadRequest& r) {
    const LoadPlan p = plan_load(acq, r);
    return p.output_bytes + p.working_bytes <= req.memory_budget ? std::optional<LoadPlan>(p) : std::nullopt;
  };
  // Crop: the most scan rows that fit.
  const uint64_t row_bytes = plan.output_bytes / plan.output_shape[0];
  if (req.memory_budget > plan.working_bytes && (req.memory_budget - plan.working_bytes) / row_bytes >= 1) {
    const uint64_t out_rows = (req.memory_budget - plan.working_bytes) / row_bytes;
    const Box& s = plan.scan_region;
    const uint64_t rows = std::min(out_rows * req.scan_bin[0], s.r1 - s.r0);
    msg << "\n  crop: --scan-region " << s.r0 << "," << s.r0 + rows << "," << s.c0 << "," << s.c1 << " (" << rows << " of "
        << s.r1 - s.r0 << " scan rows, " << human_bytes(out_rows * row_bytes) << ")";
  }
  for (const bool scan : {true, false}) {
    for (uint64_t f = 2; f <= 64; f *= 2) {
      LoadRequest r = req;
      auto& bin = scan ? r.scan_bin : r.detector_bin;
      bin = {bin[0] * f, bin[1] * f};
      if (auto p = fits(r)) {
        msg << "\n  bin: " << (scan ? "--scan-bin " : "--detector-bin ") << bin[0] << "," << bin[1] << " (exact sums, "
            << human_bytes(p->output_bytes) << " as " << dtype_name(p->output_dtype) << ")";
        break;
      }
    }
  }
  msg << "\n  product-first: `tensormorph stem bf|abf|adf|haadf|df|mask|com|dpc|idpc|mean-dp` compute virtual images, "
         "centre of mass and patterns while streaming, without holding the 4-D array";
  return msg.str();
}

}  // namespace

uint64_t unsigned_max(DType t) {
  switch (t) {
    case DType::U8: return 0xFF;
    case DType::U16: return 0xFFFF;
    case DType::U32: return 0xFFFFFFFFull;
    default: return std::numeric_limits<uint64_t>::max();
  }
}

LoadPlan plan_load(const Acquisition& acq, const LoadRequest& req) {
  if (acq.frames_present == 0) throw Error(ErrorKind::BadInput, acq.master + ": no readable frames");
  LoadPlan p;
  p.scan_shape = resolve_scan_shape(acq, req.scan_shape);
  p.scan_region = check_box(req.scan_region, p.scan_shape[0], p.scan_shape[1], "--scan-region");
  p.detector_region = check_box(req.detector_region, acq.detector_rows, acq.detector_cols, "--detector-region");
  for (uint64_t b : {req.scan_bin[0], req.scan_bin[1], req.detector_bin[0], req.detector_bin[1]})
    if (b == 0 || b > (uint64_t{1} << 32)) throw Error(ErrorKind::InvalidArgument, "bin factors must be between 1 and 2^32");
  const Box &s = p.scan_region, &d = p.detector_region;
  p.output_shape = {ceil_div(s.r1 - s.r0, req.scan_bin[0]), ceil_div(s.c1 - s.c0, req.scan_bin[1]),
                    ceil_div(d.r1 - d.r0, req.detector_bin[0]), ceil_div(d.c1 - d.c0, req.detector_bin[1])};
  // The largest bin actually summed (edge bins may be smaller), times the largest value that survives masking.
  const unsigned __int128 members = static_cast<unsigned __int128>(std::min(req.scan_bin[0], s.r1 - s.r0)) *
                                    std::min(req.scan_bin[1], s.c1 - s.c0) * std::min(req.detector_bin[0], d.r1 - d.r0) *
                                    std::min(req.detector_bin[1], d.c1 - d.c0);
  if (is_float_frames(acq.dtype)) {
    // Float frames (EMPAD): unbinned frames keep their dtype; a bin's members are summed in float64.
    p.safe_dtype = members == 1 ? acq.dtype : DType::F64;
    p.output_dtype = req.dtype == "auto" ? p.safe_dtype : parse_output_dtype(req.dtype);
    if (p.output_dtype != p.safe_dtype && p.output_dtype != DType::F64)
      throw Error(ErrorKind::InvalidArgument, "--dtype " + req.dtype + ": the frames are " + std::string(dtype_name(acq.dtype)) +
                                                  (members == 1 ? "" : " summed in float64 bins") + "; expected auto or float64");
  } else {
    const uint64_t source_max = unsigned_max(acq.dtype) - (req.mask_bad_pixels ? 1 : 0);
    const unsigned __int128 bound = members * source_max;
    p.safe_dtype = DType::U64;
    for (DType t : {DType::U8, DType::U16, DType::U32})
      if (dtype_size(t) >= acq.element_size && bound <= unsigned_max(t)) {
        p.safe_dtype = t;
        break;
      }
    p.output_dtype = req.dtype == "auto" ? p.safe_dtype : parse_output_dtype(req.dtype);
    if (is_float_frames(p.output_dtype))
      throw Error(ErrorKind::InvalidArgument, "--dtype " + req.dtype + ": the frames are " + std::string(dtype_name(acq.dtype)) +
                                                  " counts, summed exactly in integers; expected auto, uint8, uint16, uint32 or uint64");
  }
  unsigned __int128 elements = 1;
  for (uint64_t e : p.output_shape) elements *= e;
  const unsigned __int128 bytes = elements * dtype_size(p.output_dtype);
  if (bytes > (static_cast<unsigned __int128>(1) << 62)) throw Error(ErrorKind::InvalidArgument, "the requested output exceeds 2^62 bytes");
  p.output_bytes = static_cast<uint64_t>(bytes);
  const uint64_t frame_bytes = acq.detector_rows * acq.detector_cols * acq.element_size;
  const uint64_t acc_bytes = p.output_shape[2] * p.output_shape[3] * 8;  // uint64 or float64 accumulators
  p.working_bytes = std::max<uint64_t>(req.threads, 1) * (2 * frame_bytes + acc_bytes);
  p.frames = (s.r1 - s.r0) * (s.c1 - s.c0);
  return p;
}

struct StemLoader::State {
  const Acquisition& acq;
  LoadRequest req;
  LoadPlan plan;
  std::vector<uint64_t> frames, group_start;  // frames grouped by output position, row-major inside a group
  std::unique_ptr<FrameReader> reader;
  std::vector<uint32_t> bad;                  // pixels zeroed (pixel_mask > 0), when masking
  bool direct = false;                        // output frames are decoded frames as they are
  bool narrowing = false;
  uint64_t zeroed = 0, stored = 0, decoded = 0;
  Placement decode_at;                        // decode.bitshuffle_lz4's placement (empty: this CPU's threads)
  std::atomic<uint64_t> frames_done{0};       // for req.progress
  std::mutex progress_mutex;                  // serialises req.progress
  State(const Acquisition& a, const LoadRequest& r) : acq(a), req(r) {}

  // n more frames read and decoded: tells req.progress (when set) the running count of frames.size().
  void advance(uint64_t n) {
    const uint64_t done = frames_done.fetch_add(n) + n;
    if (!req.progress) return;
    std::lock_guard<std::mutex> lock(progress_mutex);
    req.progress(std::min<uint64_t>(done, frames.size()), frames.size());
  }

  // Reads the stored chunks of frames [g0, g0 + n) into `batch` (counting their bytes); the ones the op takes
  // are appended to `input`, `offsets` (starting at 0) marking them and `taken` holding their indices in the batch.
  void gather_chunks(uint64_t g0, uint64_t n, std::vector<FrameReader::Stored>& batch, std::vector<uint8_t>& input,
                     std::vector<uint64_t>& offsets, std::vector<uint64_t>& taken) {
    batch.resize(n);
    reader->read_batch(&frames[g0], n, batch.data());
    input.clear(), offsets.assign(1, 0), taken.clear();
    for (uint64_t i = 0; i < n; ++i) {
      stored += batch[i].size();
      if (!reader->takes_lz4_op(frames[g0 + i], batch[i])) continue;
      input.insert(input.end(), batch[i].bytes.begin(), batch[i].bytes.end());
      offsets.push_back(input.size()), taken.push_back(i);
    }
  }

  // Runs decode.bitshuffle_lz4 where it is placed over the chunks gathered from frames g0…, into host_out or
  // device memory; a damaged chunk's error names its file, frame and block, and the backend.
  void run_decode(uint64_t g0, const std::vector<uint64_t>& taken, tm_decode_bitshuffle_lz4_params_v1& params,
                  const std::vector<uint8_t>& input, void* host_out, const ResidentCopy* device_out) {
    const uint64_t pixels = acq.detector_rows * acq.detector_cols, elements = taken.size() * pixels;
    uint64_t failed = UINT64_MAX;
    params.failed_chunk = &failed;
    const KernelArgs args{acq.dtype, input.data(), elements, &params, sizeof params, host_out,
                          host_out ? elements * acq.element_size : 0, std::max(1u, req.threads)};
    try {
      if (device_out) run_placed_kernel_on_device(decode_at, TM_OP_DECODE_BITSHUFFLE_LZ4, args, {nullptr, 0, device_out, 0});
      else run_placed_kernel(decode_at, TM_OP_DECODE_BITSHUFFLE_LZ4, args);
    } catch (const Error& e) {  // "... chunk <i>: what": chunk i (failed) is a frame of this batch
      if (failed >= taken.size()) throw;
      const std::string text = e.what(), tag = "chunk " + std::to_string(failed) + ": ";
      const size_t at = text.find(tag);
      throw Error(ErrorKind::BadInput, reader->where(frames[g0 + taken[failed]]) + ": bitshuffle/LZ4 chunk: " +
                                           (at == std::string::npos ? text : text.substr(at + tag.size())) + " (decoded on " +
                                           decode_at.backend + ")");
    }
  }
};

StemLoader::StemLoader(const Acquisition& acq, const LoadRequest& req) : s_(std::make_unique<State>(acq, req)) {
  State& st = *s_;
  st.plan = plan_load(acq, req);
  const LoadPlan& plan = st.plan;
  const Box &s = plan.scan_region, &d = plan.detector_region;
  const uint64_t out_rows = plan.output_shape[0], out_cols = plan.output_shape[1];
  st.frames.reserve(plan.frames);
  st.group_start.reserve(out_rows * out_cols + 1);
  st.group_start.push_back(0);
  for (uint64_t orow = 0; orow < out_rows; ++orow)
    for (uint64_t ocol = 0; ocol < out_cols; ++ocol) {
      const uint64_t r_begin = s.r0 + orow * req.scan_bin[0], r_end = std::min(s.r1, r_begin + req.scan_bin[0]);
      const uint64_t c_begin = s.c0 + ocol * req.scan_bin[1], c_end = std::min(s.c1, c_begin + req.scan_bin[1]);
      for (uint64_t r = r_begin; r < r_end; ++r)
        for (uint64_t c = c_begin; c < c_end; ++c) st.frames.push_back(r * plan.scan_shape[1] + c);
      st.group_start.push_back(st.frames.size());
    }
  st.reader = std::make_unique<FrameReader>(acq);
  st.reader->check(st.frames);
  if (req.mask_bad_pixels)
    for (uint32_t i = 0; i < acq.pixel_mask.size(); ++i)
      if (acq.pixel_mask[i] > 0) st.bad.push_back(i);
  st.direct = d.r0 == 0 && d.r1 == acq.detector_rows && d.c0 == 0 && d.c1 == acq.detector_cols && req.detector_bin[0] == 1 &&
              req.detector_bin[1] == 1 && req.scan_bin[0] == 1 && req.scan_bin[1] == 1 && plan.output_dtype == acq.dtype;
  st.narrowing = !is_float_frames(acq.dtype) && dtype_size(plan.output_dtype) < dtype_size(plan.safe_dtype);
}

StemLoader::~StemLoader() = default;

const LoadPlan& StemLoader::plan() const { return s_->plan; }

uint64_t StemLoader::positions() const { return s_->plan.output_shape[0] * s_->plan.output_shape[1]; }

uint64_t StemLoader::position_bytes() const {
  return s_->plan.output_shape[2] * s_->plan.output_shape[3] * dtype_size(s_->plan.output_dtype);
}

uint64_t StemLoader::stored_bytes_read() const { return s_->stored; }
uint64_t StemLoader::decoded_bytes() const { return s_->decoded; }

// What becomes of each decoded frame, for one run of output positions: its bad pixels zeroed, then added
// into its output position's bin (or, direct, it is the output position). Frames arrive in order.
class StemLoader::FrameSink {
 public:
  FrameSink(const State& st, uint64_t first, uint8_t* out)
      : st_(st), first_(first), out_(out), out_frame_bytes_(st.plan.output_shape[2] * st.plan.output_shape[3] *
                                                            dtype_size(st.plan.output_dtype)) {
    if (st.direct) return;
    frame_.resize(st.acq.detector_rows * st.acq.detector_cols * st.acq.element_size);
    if (floating_) facc_.resize(st.plan.output_shape[2] * st.plan.output_shape[3]);
    else acc_.resize(st.plan.output_shape[2] * st.plan.output_shape[3]);
  }
  // Where frame g (of output position `position`) is to be decoded: its output bytes when direct.
  uint8_t* target(uint64_t g, uint64_t position) {
    if (st_.direct) return out_ + (position - first_) * out_frame_bytes_;
    if (g == st_.group_start[position]) clear();
    return frame_.data();
  }
  // Frame g's pixels are at px (target(g, position), or the caller's copy): masks and bins them. Returns the
  // position the next frame belongs to.
  uint64_t take(uint64_t g, uint64_t position, uint8_t* px) {
    const Acquisition& acq = st_.acq;
    const uint64_t frame_pixels = acq.detector_rows * acq.detector_cols;
    const uint32_t es = acq.element_size;
    const Box& d = st_.plan.detector_region;
    const std::array<uint64_t, 2>& bin = st_.req.detector_bin;
    const uint64_t oc = st_.plan.output_shape[3];
    if (st_.direct && px != target(g, position)) std::memcpy(target(g, position), px, out_frame_bytes_);
    if (st_.direct) px = target(g, position);
    if (st_.req.mask_bad_pixels && floating_) {  // float frames have no sentinel value: only the listed pixels
      if (es == 4) for (uint32_t i : st_.bad) reinterpret_cast<float*>(px)[i] = 0.0f;
      else for (uint32_t i : st_.bad) reinterpret_cast<double*>(px)[i] = 0.0;
    } else if (st_.req.mask_bad_pixels) {
      zeroed += es == 1 ? zero_bad<uint8_t>(px, frame_pixels, st_.bad)
                : es == 2 ? zero_bad<uint16_t>(px, frame_pixels, st_.bad)
                          : zero_bad<uint32_t>(px, frame_pixels, st_.bad);
    }
    if (!st_.direct) {
      if (g == st_.group_start[position] && px != frame_.data()) clear();
      if (floating_ && es == 4) accumulate_float<float>(px, acq.detector_cols, d, bin[0], bin[1], oc, facc_.data());
      else if (floating_) accumulate_float<double>(px, acq.detector_cols, d, bin[0], bin[1], oc, facc_.data());
      else if (es == 1) accumulate_bytes<uint8_t>(px, acq.detector_cols, d, bin[0], bin[1], oc, acc_.data());
      else if (es == 2) accumulate_bytes<uint16_t>(px, acq.detector_cols, d, bin[0], bin[1], oc, acc_.data());
      else accumulate_bytes<uint32_t>(px, acq.detector_cols, d, bin[0], bin[1], oc, acc_.data());
    }
    if (g + 1 < st_.group_start[position + 1]) return position;  // more frames in this output position's bin
    if (!st_.direct) {
      uint8_t* dst = out_ + (position - first_) * out_frame_bytes_;
      const uint64_t n = floating_ ? facc_.size() : acc_.size();
      switch (st_.plan.output_dtype) {
        case DType::F32:  // one member per output pixel (plan_load): the value as read
          for (uint64_t i = 0; i < n; ++i) reinterpret_cast<float*>(dst)[i] = static_cast<float>(facc_[i]);
          break;
        case DType::F64: std::memcpy(dst, facc_.data(), n * sizeof(double)); break;
        case DType::U8: store<uint8_t>(acc_.data(), n, dst, st_.narrowing, position, oc, DType::U8); break;
        case DType::U16: store<uint16_t>(acc_.data(), n, dst, st_.narrowing, position, oc, DType::U16); break;
        case DType::U32: store<uint32_t>(acc_.data(), n, dst, st_.narrowing, position, oc, DType::U32); break;
        default: store<uint64_t>(acc_.data(), n, dst, false, position, oc, st_.plan.output_dtype); break;
      }
    }
    return position + 1;
  }
  uint64_t zeroed = 0;

 private:
  void clear() {
    if (floating_) std::fill(facc_.begin(), facc_.end(), 0.0);
    else std::fill(acc_.begin(), acc_.end(), 0);
  }
  const State& st_;
  uint64_t first_;
  uint8_t* out_;
  uint64_t out_frame_bytes_;
  std::vector<uint8_t> frame_;
  std::vector<uint64_t> acc_;
  std::vector<double> facc_;  // float frames' accumulators
  const bool floating_ = is_float_frames(st_.acq.dtype);
};

void StemLoader::decode_with(const Placement& placement) { s_->decode_at = placement; }

void StemLoader::fill(uint64_t first, uint64_t count, uint8_t* out_bytes) {
  State& st = *s_;
  if (!st.decode_at.backend.empty() && st.decode_at.backend != "cpu") return fill_placed(first, count, out_bytes);
  const FrameReader& reader = *st.reader;
  const std::vector<uint64_t>& frames = st.frames;
  const std::vector<uint64_t>& group_start = st.group_start;
  ThreadPool& pool = ThreadPool::shared(std::max(1u, st.req.threads));
  std::vector<uint64_t> zeroed(pool.size(), 0), stored(pool.size(), 0);
  // Each task owns a contiguous run of output positions (so integer sums need no atomics); it reads the
  // stored chunks of its frames kReadBatch at a time under one HDF5 lock, then decodes them unlocked.
  constexpr size_t kReadBatch = 32;
  pool.parallel_for(count, [&](uint64_t begin, uint64_t end, unsigned part) {
    begin += first, end += first;
    FrameSink sink(st, first, out_bytes);
    std::vector<uint8_t> scratch;
    std::vector<FrameReader::Stored> batch(kReadBatch);
    uint64_t pos = begin;
    for (uint64_t g = group_start[begin]; g < group_start[end];) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadBatch, group_start[end] - g));
      check_cancel(st.req.cancel);
      reader.read_batch(&frames[g], n, batch.data());
      for (size_t i = 0; i < n; ++i, ++g) {
        uint8_t* px = sink.target(g, pos);
        reader.decode(frames[g], batch[i], px, scratch);
        stored[part] += batch[i].size();
        pos = sink.take(g, pos, px);
      }
      st.advance(n);
    }
    zeroed[part] = sink.zeroed;
  });
  for (unsigned i = 0; i < pool.size(); ++i) st.zeroed += zeroed[i], st.stored += stored[i];
  st.decoded += (group_start[first + count] - group_start[first]) * reader.frame_bytes();
}

bool StemLoader::fill_each(uint64_t first, uint64_t count, const std::function<void(unsigned, uint64_t, uint64_t)>& run,
                           const std::function<void(unsigned, uint64_t, const uint8_t*)>& take) {
  State& st = *s_;
  if (!st.direct || (!st.decode_at.backend.empty() && st.decode_at.backend != "cpu")) return false;
  const FrameReader& reader = *st.reader;
  const std::vector<uint64_t>& frames = st.frames;
  const std::vector<uint64_t>& group_start = st.group_start;
  ThreadPool& pool = ThreadPool::shared(std::max(1u, st.req.threads));
  std::vector<uint64_t> zeroed(pool.size(), 0), stored(pool.size(), 0);
  constexpr size_t kReadBatch = 32;  // as fill: stored chunks read under one HDF5 lock, decoded unlocked
  pool.parallel_for(count, [&](uint64_t begin, uint64_t end, unsigned part) {
    begin += first, end += first;
    run(part, begin, end);
    std::vector<uint8_t> frame(reader.frame_bytes()), scratch;  // one decoded frame: still in cache when taken
    std::vector<FrameReader::Stored> batch(kReadBatch);
    uint64_t pos = begin;
    for (uint64_t g = group_start[begin]; g < group_start[end];) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadBatch, group_start[end] - g));
      check_cancel(st.req.cancel);
      reader.read_batch(&frames[g], n, batch.data());
      for (size_t i = 0; i < n; ++i, ++g) {
        FrameSink sink(st, pos, frame.data());  // direct: position pos's frame is written at frame.data()
        uint8_t* px = sink.target(g, pos);
        reader.decode(frames[g], batch[i], px, scratch);
        stored[part] += batch[i].size();
        const uint64_t next = sink.take(g, pos, px);
        zeroed[part] += sink.zeroed;
        take(part, pos, frame.data());
        pos = next;
      }
      st.advance(n);
    }
  });
  for (unsigned i = 0; i < pool.size(); ++i) st.zeroed += zeroed[i], st.stored += stored[i];
  st.decoded += (group_start[first + count] - group_start[first]) * reader.frame_bytes();
  return true;
}

// Decoding placed on another backend (decode.bitshuffle_lz4): the stored chunks of up to kPlacedBatchBytes
// of frames are read under the HDF5 lock and decoded in one call; chunks the op does not take (stored raw,
// or another codec) are decoded here. Masking and binning follow on this thread.
void StemLoader::fill_placed(uint64_t first, uint64_t count, uint8_t* out_bytes) {
  State& st = *s_;
  const FrameReader& reader = *st.reader;
  const uint64_t frame_bytes = reader.frame_bytes(), frame_pixels = st.acq.detector_rows * st.acq.detector_cols;
  constexpr uint64_t kPlacedBatchBytes = 256ull << 20;
  const uint64_t per_call = std::max<uint64_t>(1, kPlacedBatchBytes / std::max<uint64_t>(frame_bytes, 1));
  FrameSink sink(st, first, out_bytes);
  std::vector<uint8_t> scratch, input, decoded;
  std::vector<uint64_t> offsets, chunk_frames;
  std::vector<FrameReader::Stored> batch;
  uint64_t pos = first;
  const uint64_t g_end = st.group_start[first + count];
  for (uint64_t g0 = st.group_start[first]; g0 < g_end;) {
    check_cancel(st.req.cancel);
    const uint64_t n = std::min(per_call, g_end - g0);
    st.gather_chunks(g0, n, batch, input, offsets, chunk_frames);
    const uint64_t chunks = chunk_frames.size();
    decoded.resize(chunks * frame_bytes);
    if (chunks) {
      tm_decode_bitshuffle_lz4_params_v1 params = decode_params(chunks, frame_pixels, offsets.data());
      st.run_decode(g0, chunk_frames, params, input, decoded.data(), nullptr);
    }
    for (uint64_t i = 0, k = 0; i < n; ++i) {
      const uint64_t g = g0 + i;
      uint8_t* px;
      if (k < chunks && chunk_frames[k] == i) {
        px = decoded.data() + k++ * frame_bytes;
      } else {
        px = sink.target(g, pos);
        reader.decode(st.frames[g], batch[i], px, scratch);
      }
      pos = sink.take(g, pos, px);
    }
    g0 += n;
    st.advance(n);
  }
  st.zeroed += sink.zeroed;
  st.decoded += (g_end - st.group_start[first]) * frame_bytes;
}

const Placement* StemLoader::device_decode() const {
  const State& st = *s_;
  const bool elsewhere = !st.decode_at.backend.empty() && st.decode_at.backend != "cpu" && st.decode_at.backend_ref &&
                         st.decode_at.backend_ref->can_allocate;
  return elsewhere && st.direct ? &st.decode_at : nullptr;
}

bool StemLoader::fill_device(uint64_t first, uint64_t count, const ResidentCopy& frames) {
  State& st = *s_;
  if (!device_decode()) throw Error(ErrorKind::Internal, "fill_device: decoding is not placed on a device");
  const uint64_t g0 = st.group_start[first], n = st.group_start[first + count] - g0;
  const uint64_t frame_bytes = st.reader->frame_bytes(), stored_before = st.stored;
  if (n * frame_bytes > frames.bytes()) throw Error(ErrorKind::Internal, "fill_device: the device buffer is too small");
  check_cancel(st.req.cancel);
  std::vector<FrameReader::Stored> batch;
  std::vector<uint8_t> input;
  std::vector<uint64_t> offsets, taken;
  st.gather_chunks(g0, n, batch, input, offsets, taken);
  if (taken.size() != n) {
    st.stored = stored_before;  // fill reads them again
    return false;
  }
  tm_decode_bitshuffle_lz4_params_v1 params = decode_params(n, st.acq.detector_rows * st.acq.detector_cols, offsets.data());
  uint64_t zeroed = 0;
  if (st.req.mask_bad_pixels) {
    params.flags = TM_DECODE_ZERO_ALL_ONES, params.all_ones_zeroed = &zeroed;
    params.zero_elements = st.bad.data(), params.zero_element_count = st.bad.size();
  }
  st.run_decode(g0, taken, params, input, nullptr, &frames);
  st.zeroed += zeroed;
  st.decoded += n * frame_bytes;
  st.advance(n);
  return true;
}

namespace {

// What decodes the acquisition's frames on the CPU, by the codecs of its readable parts.
std::string cpu_decoder_text(const Acquisition& acq) {
  std::vector<std::string> parts;
  const auto add = [&parts](const std::string& text) {
    if (std::find(parts.begin(), parts.end(), text) == parts.end()) parts.push_back(text);
  };
  for (const DataPart& d : acq.parts) {
    if (!d.present) continue;
    switch (d.codec) {
      case ChunkCodec::BitshuffleLz4: add(std::string("tensormorph bit-unshuffle (") + bit_unshuffle_simd_target() + ") + liblz4"); break;
      case ChunkCodec::BitshufflePlain: add(std::string("tensormorph bit-unshuffle (") + bit_unshuffle_simd_target() + ")"); break;
      case ChunkCodec::Uncompressed: add("copied as stored (uncompressed)"); break;
      case ChunkCodec::Hdf5Pipeline: add("the HDF5 library's filter pipeline (serial)"); break;
      case ChunkCodec::FileRecords: add("tensormorph pread + unpack (" + (d.records ? d.records->encoding : std::string("?")) + ")"); break;
    }
  }
  std::string text;
  for (const auto& p : parts) text += (text.empty() ? "" : "; ") + p;
  return text.empty() ? "none (no readable frames)" : text;
}

}  // namespace

nlohmann::json StemLoader::provenance() const {
  const State& st = *s_;
  const Acquisition& acq = st.acq;
  const LoadPlan& plan = st.plan;
  const auto box_json = [](const Box& b) { return nlohmann::json::array({b.r0, b.r1, b.c0, b.c1}); };
  nlohmann::json codecs = st.reader->codecs();
  const bool placed = !st.decode_at.backend.empty() && st.decode_at.backend != "cpu";
  return {{"source",
           {{"signature", acq.signature},
            {"format", acq.format},
            {"master", acq.master},
            {"layout", acq.layout},
            {"shape", {plan.scan_shape[0], plan.scan_shape[1], acq.detector_rows, acq.detector_cols}},
            {"dtype", dtype_name(acq.dtype)},
            {"codecs", codecs}}},
          {"scan_region", box_json(plan.scan_region)},
          {"detector_region", box_json(plan.detector_region)},
          {"scan_bin", st.req.scan_bin},
          {"detector_bin", st.req.detector_bin},
          {"output",
           {{"shape", plan.output_shape},
            {"dtype", dtype_name(plan.output_dtype)},
            {"narrowed_from", st.narrowing ? nlohmann::json(dtype_name(plan.safe_dtype)) : nlohmann::json()}}},
          {"bad_pixels",
           {{"zeroed", st.req.mask_bad_pixels},
            {"pixel_mask", acq.pixel_mask_path.empty() ? nlohmann::json() : nlohmann::json(acq.pixel_mask_path)},
            {"pixel_mask_pixels", st.bad.size()},
            {"sentinel", is_float_frames(acq.dtype) ? nlohmann::json() : nlohmann::json(unsigned_max(acq.dtype))},
            {"sentinel_values_zeroed", st.zeroed}}},
          {"backend", placed ? st.decode_at.backend : "cpu"},
          {"device", placed ? st.decode_at.device
                            : "host CPU, " + std::to_string(ThreadPool::shared(std::max(1u, st.req.threads)).size()) + " threads"},
          {"decoder", placed ? "decode.bitshuffle_lz4 on " + st.decode_at.backend + " (chunks it does not take: tensormorph on the CPU)"
                             : cpu_decoder_text(acq)},
          {"software", {{"name", "tensormorph"}, {"version", TM_VERSION}, {"revision", TM_REVISION}}}};
}

std::optional<Placement> place_decode(const Acquisition& acq, StemLoader& loader, const Planner& planner) {
  const bool lz4 = std::any_of(acq.parts.begin(), acq.parts.end(),
                               [](const DataPart& d) { return d.present && d.codec == ChunkCodec::BitshuffleLz4; });
  if (!lz4) return std::nullopt;
  OpRequest op;
  op.op = TM_OP_DECODE_BITSHUFFLE_LZ4;
  op.dtype = acq.dtype;
  op.elements = loader.plan().frames * acq.detector_rows * acq.detector_cols;
  op.bytes = op.elements * acq.element_size;  // decoded bytes (the op's throughput is counted in them)
  Placement at;
  const Constraints& c = planner.constraints();
  try {
    at = planner.place(op);
  } catch (const Error&) {
    if (c.strict_backend.empty()) throw;
    Constraints relaxed = c;
    relaxed.prefer.insert(relaxed.prefer.begin(), c.strict_backend);
    relaxed.strict_backend.clear();
    at = planner.with(relaxed).place(op);
  }
  loader.decode_with(at);
  return at;
}

StemArray load_stem(const Acquisition& acq, const LoadRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  StemLoader loader(acq, req);
  const LoadPlan& plan = loader.plan();
  if (req.memory_budget && plan.output_bytes + plan.working_bytes > req.memory_budget)
    throw Error(ErrorKind::PrecisionRefused, ladder_message(acq, req, plan));
  StemArray out;
  out.shape = plan.output_shape;
  out.dtype = plan.output_dtype;
  out.bytes = plan.output_bytes;
  out.data = LargeBuffer(out.bytes);
  loader.fill(0, loader.positions(), out.data.get());
  out.stored_bytes_read = loader.stored_bytes_read();
  out.decoded_bytes = loader.decoded_bytes();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.provenance = loader.provenance();
  return out;
}

}  // namespace tmorph
