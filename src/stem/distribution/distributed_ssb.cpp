#include "stem/distribution/distributed_ssb.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "distributed/rank_exchange.h"
#include "distributed/wire.h"
#include "stem/distribution/rank_bands.h"
#include "support/large_buffer.h"
#include "tensormorph/error.h"

namespace tmorph {

// What a rank reports once its values are sent. Outside the anonymous namespace because SsbFrameSource::State (a
// member of a class with linkage) holds them.
struct SsbBandSummary {
  uint64_t positions = 0, decoded_bytes = 0, stored_bytes_read = 0, bright_field_bytes = 0;
  double seconds = 0;
  nlohmann::json provenance;
  std::string host;
};

namespace {

constexpr RankProtocol kSsbProtocol{"SSB bands", 40, 43};
enum SsbTag : int { kSsbRequest = kSsbProtocol.tag(0), kValues = kSsbProtocol.tag(1), kSummary = kSsbProtocol.tag(2), kSsbFail = kSsbProtocol.tag(3) };

constexpr uint64_t kMessageBytes = uint64_t{64} << 20;  // values per message, whole positions
constexpr uint64_t kReadBatchBytes = uint64_t{8} << 20;  // frames per read on a serving rank

double ssb_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}


std::vector<uint8_t> encode_summary(const SsbBandSummary& s) {
  WireWriter w;
  w.put(s.positions).put(s.decoded_bytes).put(s.stored_bytes_read).put(s.bright_field_bytes).put(s.seconds);
  w.put_string(s.provenance.dump()).put_string(s.host);
  return std::move(w.bytes());
}

SsbBandSummary decode_summary(const std::vector<uint8_t>& bytes, const std::string& what) {
  WireReader in(bytes, what);
  SsbBandSummary s;
  s.positions = in.get<uint64_t>(), s.decoded_bytes = in.get<uint64_t>(), s.stored_bytes_read = in.get<uint64_t>();
  s.bright_field_bytes = in.get<uint64_t>(), s.seconds = in.get<double>();
  s.provenance = nlohmann::json::parse(in.get_string(), nullptr, false);
  s.host = in.get_string();
  in.expect_end();
  if (s.provenance.is_discarded()) throw Error(ErrorKind::BadInput, what + ": the provenance is not JSON");
  return s;
}

nlohmann::json decode_json(const nlohmann::json& provenance) {
  return {{"backend", provenance.value("backend", "")}, {"device", provenance.value("device", "")},
          {"decoder", provenance.value("decoder", "")}};
}

}  // namespace

struct SsbFrameSource::State {
  const Acquisition& acq;
  LoadRequest load;
  LoadPlan plan;
  World* world = nullptr;                  // across ranks only
  std::optional<RankExchange> exchange;    // across ranks only
  std::unique_ptr<StemLoader> loader;      // the whole request here; band 0 across ranks
  // Across ranks.
  std::vector<ScanBand> bands;
  std::vector<std::optional<SsbBandSummary>> summaries;  // [0]: rank 0's band once read
  std::vector<bool> asked;                 // a request went to the rank and its answer is not all taken
  std::vector<uint32_t> pixels;
  uint64_t cursor = 0;                     // the band being taken
  RankMessage message;                     // the values being taken and how far
  uint64_t message_at = 0;
  LargeBuffer frames;                      // rank 0's own batch of frames
  double band0_seconds = 0;

  State(const Acquisition& a, const LoadRequest& l) : acq(a), load(l), plan(plan_load(a, l)) {}

  std::string rank_label(uint64_t k) const { return rank_name(static_cast<int>(k), world->size()); }

  [[noreturn]] void fail(uint64_t k, const RankFailure& f) {
    asked[k] = false;  // it sends nothing more
    throw Error(f.error.kind(), rank_label(k) + " on " + f.host + " failed reading its band of the scan: " + f.error.what());
  }

  // Rank k's next message; a failure report is thrown (fail).
  RankMessage next(uint64_t k) {
    RankExchange::Reply r;
    try {
      r = exchange->receive(static_cast<int>(k), "SSB values from " + rank_label(k));
    } catch (...) {
      asked[k] = false;  // a damaged or foreign message: nothing more is taken from it
      throw;
    }
    if (r.failure) fail(k, *r.failure);
    return std::move(r.message);
  }

  void start(const std::vector<uint32_t>& bf) {
    pixels = bf;
    const uint64_t frame_pixels = plan.output_shape[2] * plan.output_shape[3];
    exchange->scatter(
        static_cast<int>(bands.size()),
        [&](int k) {
          const ScanBand& band = bands[static_cast<size_t>(k)];
          WireWriter w;
          put_load_request(w, acq, band.load);
          w.put_vector(pixels).put<uint8_t>(static_cast<uint8_t>(plan.output_dtype)).put(frame_pixels);
          w.put<uint64_t>((band.rows[1] - band.rows[0]) * plan.output_shape[1]);
          return std::move(w.bytes());
        },
        [&](int k) { asked[static_cast<size_t>(k)] = true; });
    loader = std::make_unique<StemLoader>(acq, bands[0].load);
  }

  // Positions [first, first + n) of band 0 (band-local), read here.
  void read_own(uint64_t first, uint64_t n, float* out) {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t frame_bytes = loader->position_bytes();
    if (frames.size() < n * frame_bytes) frames = LargeBuffer(n * frame_bytes);
    loader->fill(first, n, frames.get());
    ssb_extract_bright_field(frames.get(), plan.output_dtype, n, plan.output_shape[2] * plan.output_shape[3], pixels, out);
    band0_seconds += ssb_since(t0);
  }

  // The next n positions' values of band k (> 0), from its messages.
  void take(uint64_t k, uint64_t n, float* out) {
    const uint64_t row_bytes = pixels.size() * sizeof(float);
    while (n) {
      if (message_at == message.bytes.size()) {
        message = next(k), message_at = 0;
        if (message.tag == kSummary) asked[k] = false;  // it sends nothing more
        if (message.tag != kValues || message.bytes.empty() || message.bytes.size() % row_bytes)
          throw Error(ErrorKind::Internal, "SSB values from " + rank_label(k) + ": a message with tag " + std::to_string(message.tag) +
                                               " and " + std::to_string(message.bytes.size()) + " bytes where values of whole positions were expected");
      }
      const uint64_t m = std::min(n, (message.bytes.size() - message_at) / row_bytes);
      std::memcpy(out, message.bytes.data() + message_at, m * row_bytes);
      message_at += m * row_bytes, out += m * pixels.size(), n -= m;
    }
  }

  // Band k is all taken: its summary.
  void finish(uint64_t k) {
    const uint64_t positions = (bands[k].rows[1] - bands[k].rows[0]) * plan.output_shape[1];
    if (k == 0) {
      SsbBandSummary s;
      s.positions = positions, s.decoded_bytes = loader->decoded_bytes(), s.stored_bytes_read = loader->stored_bytes_read();
      s.bright_field_bytes = positions * pixels.size() * sizeof(float), s.seconds = band0_seconds;
      s.provenance = loader->provenance(), s.host = world->host();
      summaries[0] = std::move(s);
      return;
    }
    const std::string what = "SSB summary from " + rank_label(k);
    if (message_at != message.bytes.size()) throw Error(ErrorKind::Internal, what + ": more values than its band has");
    message = RankMessage{}, message_at = 0;
    const RankMessage m = next(k);
    if (m.tag != kSummary) throw Error(ErrorKind::Internal, what + ": unexpected message tag " + std::to_string(m.tag));
    asked[k] = false;
    SsbBandSummary s = decode_summary(m.bytes, what);
    if (s.positions != positions)
      throw Error(ErrorKind::Internal, what + ": " + std::to_string(s.positions) + " positions, its band has " + std::to_string(positions));
    summaries[k] = std::move(s);
  }

  void fill(uint64_t first, uint64_t count, const std::vector<uint32_t>& bf, float* out) {
    if (!loader) start(bf);
    if (bf != pixels) throw Error(ErrorKind::Internal, "SSB across ranks: the bright-field pixels changed between batches");
    const uint64_t cols = plan.output_shape[1];
    while (count) {
      if (cursor >= bands.size()) throw Error(ErrorKind::Internal, "SSB across ranks: positions beyond the scan were asked for");
      const uint64_t begin = bands[cursor].rows[0] * cols, end = bands[cursor].rows[1] * cols;
      if (first < begin) throw Error(ErrorKind::Internal, "SSB across ranks: positions asked for out of order");
      const uint64_t n = std::min(count, end - first);
      if (cursor == 0) read_own(first - begin, n, out);
      else take(cursor, n, out);
      first += n, count -= n, out += n * pixels.size();
      if (first == end) finish(cursor++);
    }
  }
};

SsbFrameSource::SsbFrameSource(const Acquisition& acq, const LoadRequest& load) : s_(std::make_unique<State>(acq, load)) {
  World& world = World::instance();
  State& S = *s_;
  if (!world.distributed() || world.rank() != 0) {
    S.loader = std::make_unique<StemLoader>(acq, load);
    return;
  }
  S.world = &world;
  S.exchange.emplace(world, kSsbProtocol, kSsbRequest, kSsbFail);
  const uint64_t n = band_count(S.plan.output_shape[0], world.size());
  for (uint64_t k = 0; k < n; ++k) S.bands.push_back(scan_band(S.plan, load, k, n));
  S.summaries.resize(n), S.asked.assign(n, false);
}

SsbFrameSource::~SsbFrameSource() {
  if (!s_->world) return;
  for (uint64_t k = 1; k < s_->asked.size(); ++k) {
    try {
      while (s_->asked[k]) {
        const RankExchange::Reply r = s_->exchange->receive(static_cast<int>(k), "SSB values from " + s_->rank_label(k));
        if (r.message.tag == kSummary || r.failure) s_->asked[k] = false;
      }
    } catch (...) {  // MPI failed: mpirun ends the job
      s_->asked[k] = false;
    }
  }
}

SsbFrames SsbFrameSource::frames() {
  State& S = *s_;
  if (!S.world) return ssb_frames_from_loader(*S.loader);
  SsbFrames f;
  f.dtype = S.plan.output_dtype;
  f.fill_bright_field = [&S](uint64_t first, uint64_t count, const std::vector<uint32_t>& pixels, float* out) {
    S.fill(first, count, pixels, out);
  };
  return f;
}

nlohmann::json SsbFrameSource::provenance() const {
  const State& S = *s_;
  if (!S.world) return S.loader->provenance();
  if (!S.summaries[0]) return nullptr;
  nlohmann::json p = S.summaries[0]->provenance;
  uint64_t zeroed = 0;
  for (const auto& s : S.summaries) zeroed += s ? zeroed_sentinels(s->provenance) : 0;
  describe_whole_request(p, S.plan, zeroed);
  return p;
}

nlohmann::json SsbFrameSource::ranks() const {
  const State& S = *s_;
  if (!S.world) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (uint64_t k = 0; k < S.bands.size(); ++k) {
    if (!S.summaries[k]) continue;
    const SsbBandSummary& s = *S.summaries[k];
    out.push_back({{"rank", k}, {"host", s.host}, {"output_scan_rows", S.bands[k].rows}, {"positions", s.positions},
                   {"seconds", s.seconds}, {"decoded_bytes", s.decoded_bytes}, {"stored_bytes_read", s.stored_bytes_read},
                   {"bright_field_bytes", s.bright_field_bytes}, {"decode", decode_json(s.provenance)}});
  }
  return out;
}

namespace {

// Ranks > 0: reads the band that message m (from rank 0) asks for with this rank's threads and memory budget, and
// sends its bright-field values, then the summary, or the failure, to rank 0.
void serve_ssb_band_request(const RankMessage& m, unsigned threads, uint64_t memory_budget, World& world) {
  const RankExchange exchange(world, kSsbProtocol, kSsbRequest, kSsbFail);
  exchange.serve([&] {
    const auto t0 = std::chrono::steady_clock::now();
    WireReader in(m.bytes, "SSB band request from rank 0");
    RankLoad r = get_load_request(in);
    const std::vector<uint32_t> pixels = in.get_vector<uint32_t>();
    const auto dtype = static_cast<DType>(in.get<uint8_t>());
    const uint64_t frame_pixels = in.get<uint64_t>(), positions = in.get<uint64_t>();
    in.expect_end();
    const Acquisition acq = open_rank0_acquisition(r);
    r.load.threads = threads, r.load.memory_budget = memory_budget;
    StemLoader loader(acq, r.load);
    const LoadPlan& plan = loader.plan();
    const std::string here = rank_name(world.rank(), world.size());
    if (plan.output_dtype != dtype || plan.output_shape[2] * plan.output_shape[3] != frame_pixels || loader.positions() != positions)
      throw Error(ErrorKind::BadInput, r.master + ": " + here + " plans " + std::to_string(loader.positions()) + " positions of " +
                                           std::to_string(plan.output_shape[2] * plan.output_shape[3]) + " " + std::string(dtype_name(plan.output_dtype)) +
                                           " pixels for its band, rank 0 " + std::to_string(positions) + " of " + std::to_string(frame_pixels) +
                                           " " + std::string(dtype_name(dtype)));
    for (uint32_t p : pixels)
      if (p >= frame_pixels) throw Error(ErrorKind::BadInput, "SSB band request from rank 0: a bright-field pixel outside the frame");
    const uint64_t B = pixels.size(), row_bytes = B * sizeof(float), frame_bytes = loader.position_bytes();
    const uint64_t batch = std::max<uint64_t>(1, std::min(positions, kReadBatchBytes / std::max<uint64_t>(frame_bytes, 1)));
    const uint64_t need = positions * row_bytes + batch * frame_bytes;
    if (B == 0 || positions > (UINT64_MAX / 2) / std::max<uint64_t>(row_bytes, 1))
      throw Error(ErrorKind::InvalidArgument, "SSB band request from rank 0: no bright-field pixel, or a band too large");
    if (memory_budget && need > memory_budget)
      throw Error(ErrorKind::PrecisionRefused, here + " would hold its band's " + std::to_string(B) + " bright-field values of " +
                                                   std::to_string(positions) + " positions (" + std::to_string(need >> 20) +
                                                   " MiB with its read buffer), over its memory budget of " +
                                                   std::to_string(memory_budget >> 20) + " MiB; run more ranks or raise the budget");
    LargeBuffer values(positions * row_bytes), frames(batch * frame_bytes);
    auto* v = reinterpret_cast<float*>(values.get());
    for (uint64_t first = 0; first < positions; first += batch) {
      const uint64_t n = std::min(batch, positions - first);
      loader.fill(first, n, frames.get());
      ssb_extract_bright_field(frames.get(), dtype, n, frame_pixels, pixels, v + first * B);
    }
    const double seconds = ssb_since(t0);
    // At most 64 MiB, and at least four messages per band when it has the positions (so that the framing rank 0
    // reassembles is exercised by every band, a test's small ones included).
    const uint64_t per_message = std::max<uint64_t>(1, std::min(kMessageBytes / row_bytes, (positions + 3) / 4));
    for (uint64_t first = 0; first < positions; first += per_message) {
      const uint64_t n = std::min(per_message, positions - first);
      const uint8_t* at = values.get() + first * row_bytes;
      exchange.reply(kValues, std::vector<uint8_t>(at, at + n * row_bytes));
    }
    SsbBandSummary s;
    s.positions = positions, s.decoded_bytes = loader.decoded_bytes(), s.stored_bytes_read = loader.stored_bytes_read();
    s.bright_field_bytes = positions * row_bytes, s.seconds = seconds, s.provenance = loader.provenance(), s.host = world.host();
    exchange.reply(kSummary, encode_summary(s));
  });
}

}  // namespace

RankService ssb_band_rank_service(unsigned threads, uint64_t memory_budget) {
  return {kSsbProtocol, kSsbRequest,
          [threads, memory_budget](const RankMessage& m, World& world) { serve_ssb_band_request(m, threads, memory_budget, world); }};
}

}  // namespace tmorph
