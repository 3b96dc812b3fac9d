#include "index/distributed_indexer.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "checkpoint/openers/open_checkpoint.h"
#include "distributed/rank_exchange.h"
#include "distributed/wire.h"
#include "index/rank_plan.h"
#include "index/tensor_result_codec.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

using Clock = std::chrono::steady_clock;

constexpr RankProtocol kProtocol{"indexing", 16, 20};
enum Tag : int { kPlan = kProtocol.tag(0), kResult = kProtocol.tag(1), kProgress = kProtocol.tag(2), kDone = kProtocol.tag(3),
                 kFail = kProtocol.tag(4) };

bool g_ranks_working = false;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string rank_name(int rank, int size) { return "rank " + std::to_string(rank) + " of " + std::to_string(size); }

// What rank 0 asks one rank to compute. The tensors' names, sizes and offsets travel with their indexes so
// that a rank whose files differ from rank 0's says so instead of computing other tensors.
struct RankPlan {
  std::string checkpoint_path;  // absolute
  uint64_t checkpoint_tensors = 0;
  bool pyramids = true;
  uint64_t max_bytes_per_s = 0;  // per rank; 0: unlimited
  std::vector<std::string> allowed_approx_steps;
  struct Item {
    uint64_t tensor = 0, bytes = 0, file_offset = 0;
    std::string name;
  };
  std::vector<Item> items;
};

std::vector<uint8_t> encode_plan(const RankPlan& p) {
  WireWriter w;
  w.put_string(p.checkpoint_path).put(p.checkpoint_tensors).put<uint8_t>(p.pyramids).put(p.max_bytes_per_s);
  w.put<uint64_t>(p.allowed_approx_steps.size());
  for (const auto& s : p.allowed_approx_steps) w.put_string(s);
  w.put<uint64_t>(p.items.size());
  for (const auto& it : p.items) w.put(it.tensor).put(it.bytes).put(it.file_offset).put_string(it.name);
  return std::move(w.bytes());
}

RankPlan decode_plan(const std::vector<uint8_t>& bytes) {
  WireReader in(bytes, "plan from rank 0");
  RankPlan p;
  p.checkpoint_path = in.get_string();
  p.checkpoint_tensors = in.get<uint64_t>();
  p.pyramids = in.get<uint8_t>() != 0;
  p.max_bytes_per_s = in.get<uint64_t>();
  for (uint64_t k = 0, n = in.get<uint64_t>(); k < n; ++k) p.allowed_approx_steps.push_back(in.get_string());
  for (uint64_t k = 0, n = in.get<uint64_t>(); k < n; ++k) {
    RankPlan::Item it;
    it.tensor = in.get<uint64_t>(), it.bytes = in.get<uint64_t>(), it.file_offset = in.get<uint64_t>();
    it.name = in.get_string();
    p.items.push_back(std::move(it));
  }
  in.expect_end();
  return p;
}

// A rank's own report, sent when its run is complete.
std::vector<uint8_t> encode_done(const IndexingReport& r) {
  WireWriter w;
  w.put<uint64_t>(r.computed).put(r.bytes).put(r.workers);
  return std::move(w.bytes());
}

std::vector<uint8_t> encode_progress(uint64_t bytes_done) {
  WireWriter w;
  w.put(bytes_done);
  return std::move(w.bytes());
}



// Checks that `c` (this rank's view of the checkpoint) holds the tensors rank 0 planned with.
void check_same_checkpoint(const Checkpoint& c, const RankPlan& p) {
  const std::string same = " (every rank must see the same files)";
  if (c.tensors.size() != p.checkpoint_tensors)
    throw Error(ErrorKind::BadInput, p.checkpoint_path + ": " + std::to_string(c.tensors.size()) + " tensors here, rank 0 read " +
                                         std::to_string(p.checkpoint_tensors) + same);
  for (const auto& it : p.items) {
    if (it.tensor >= c.tensors.size())
      throw Error(ErrorKind::Internal, "the plan from rank 0 names tensor " + std::to_string(it.tensor) + " of " +
                                           std::to_string(c.tensors.size()));
    const CheckpointTensor& t = c.tensors[static_cast<size_t>(it.tensor)];
    if (t.name != it.name || t.bytes != it.bytes || t.file_offset != it.file_offset)
      throw Error(ErrorKind::BadInput, p.checkpoint_path + ": tensor " + std::to_string(it.tensor) + " is '" + t.name + "' (" +
                                           std::to_string(t.bytes) + " bytes at offset " + std::to_string(t.file_offset) +
                                           ") here but '" + it.name + "' (" + std::to_string(it.bytes) + " bytes at offset " +
                                           std::to_string(it.file_offset) + ") on rank 0" + same);
  }
}

// Rank 0's view of the job while it runs.
class Coordinator {
 public:
  Coordinator(CheckpointIndex& index, const IndexingOptions& options, World& world, std::vector<std::vector<size_t>> shares,
              IndexingProgress progress)
      : index_(index), options_(options), world_(world), exchange_(world, kProtocol, kPlan, kFail), shares_(std::move(shares)),
        progress_(std::move(progress)), ranks_(static_cast<size_t>(world.size())) {
    for (size_t r = 0; r < shares_.size(); ++r)
      for (size_t i : shares_[r]) owner_[i] = static_cast<int>(r);
  }

  // Stores rank `rank`'s result for one tensor: its bytes count as read by that rank from now on, even before
  // the rank's own (throttled) progress message says so.
  void store(TensorResult&& d, int rank) {
    index_.store_stats(d.tensor, d.stats, d.seconds, d.pyramid ? &*d.pyramid : nullptr);
    ++progress_.tensors_done;
    stored_bytes_[static_cast<size_t>(rank)] += index_.checkpoint().tensors[d.tensor].bytes;
  }

  // Handles every message that has arrived.
  void poll() {
    RankExchange::Reply r;
    while (exchange_.poll(r, [&](int source) { return "failure report from " + rank_name(source, world_.size()); })) handle(r);
  }

  void own_bytes(uint64_t bytes) { progress_.ranks[0].bytes_done = bytes; }
  void own_failure(const Error& e) { ranks_[0].failure = e, ranks_[0].finished = true; }
  void own_done(const IndexingReport& r) {
    ranks_[0].finished = true, ranks_[0].workers = r.workers, ranks_[0].bytes = r.bytes;
    progress_.ranks[0].bytes_done = r.bytes;
  }

  bool all_finished() const {
    for (const auto& r : ranks_)
      if (!r.finished) return false;
    return true;
  }

  void report_progress(Clock::time_point start) {
    progress_.bytes_done = 0;
    for (size_t r = 0; r < progress_.ranks.size(); ++r) {
      auto& rank = progress_.ranks[r];
      rank.bytes_done = std::max(rank.bytes_done, stored_bytes_[r]);
      progress_.bytes_done += rank.bytes_done;
    }
    progress_.seconds = since(start);
    if (options_.progress) options_.progress(progress_);
  }

  // Totals of the run; throws the first failed rank's error (lowest rank first).
  IndexingReport finish(IndexingReport report) const {
    report.computed = progress_.tensors_done;
    report.bytes = 0, report.workers = 0;
    for (const auto& r : ranks_) report.bytes += r.bytes, report.workers += r.workers;
    report.ranks = static_cast<unsigned>(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r)
      if (ranks_[r].failure) {
        std::string text = rank_name(static_cast<int>(r), world_.size()) + " on " +
                           (r == 0 ? world_.host() : ranks_[r].host) + " failed: " + ranks_[r].failure->what();
        size_t others = 0;
        for (size_t k = 0; k < ranks_.size(); ++k) others += k != r && ranks_[k].failure;
        if (others) text += " (and " + std::to_string(others) + " other rank(s) failed)";
        text += "; " + std::to_string(progress_.tensors_done) + " of " + std::to_string(progress_.tensors_total) +
                " tensors were committed, a new run computes the rest";
        throw Error(ranks_[r].failure->kind(), text);
      }
    return report;
  }

 private:
  struct RankState {
    bool finished = false;
    uint64_t bytes = 0;
    unsigned workers = 0;
    std::optional<Error> failure;
    std::string host;  // where it failed
  };

  void handle(RankExchange::Reply& reply) {
    const RankMessage& m = reply.message;
    const std::string from = rank_name(m.source, world_.size());
    if (m.source <= 0 || m.source >= world_.size())
      throw Error(ErrorKind::Internal, "a message from unknown rank " + std::to_string(m.source));
    RankState& s = ranks_[static_cast<size_t>(m.source)];
    switch (m.tag) {
      case kResult: {
        TensorResult d = decode_tensor_result(m.bytes, "result from " + from);
        const auto it = owner_.find(d.tensor);
        if (it == owner_.end() || it->second != m.source)
          throw Error(ErrorKind::Internal, from + " sent tensor " + std::to_string(d.tensor) + ", which is not in its plan");
        owner_.erase(it);  // a second copy would be refused above
        store(std::move(d), m.source);
        return;
      }
      case kProgress: {
        WireReader in(m.bytes, "progress from " + from);
        progress_.ranks[static_cast<size_t>(m.source)].bytes_done = in.get<uint64_t>();
        in.expect_end();
        return;
      }
      case kDone: {
        WireReader in(m.bytes, "report from " + from);
        const uint64_t computed = in.get<uint64_t>();
        s.bytes = in.get<uint64_t>(), s.workers = in.get<unsigned>();
        in.expect_end();
        if (computed != shares_[static_cast<size_t>(m.source)].size())
          throw Error(ErrorKind::Internal, from + " reports " + std::to_string(computed) + " tensors computed of " +
                                               std::to_string(shares_[static_cast<size_t>(m.source)].size()) + " planned");
        s.finished = true;
        progress_.ranks[static_cast<size_t>(m.source)].bytes_done = s.bytes;
        return;
      }
      case kFail: {
        RankFailure& f = *reply.failure;  // decoded by the exchange
        s.failure = std::move(f.error), s.host = std::move(f.host);
        s.finished = true;
        return;
      }
      default:
        throw Error(ErrorKind::Internal, from + " sent a message with unknown tag " + std::to_string(m.tag));
    }
  }

  CheckpointIndex& index_;
  const IndexingOptions& options_;
  World& world_;
  RankExchange exchange_;
  std::vector<std::vector<size_t>> shares_;
  IndexingProgress progress_;
  std::vector<RankState> ranks_;
  std::map<size_t, int> owner_;  // tensors still expected from other ranks
  std::vector<uint64_t> stored_bytes_ = std::vector<uint64_t>(static_cast<size_t>(world_.size()));  // per rank
};

}  // namespace

bool ranks_are_working() { return g_ranks_working; }

IndexingReport index_checkpoint_across_ranks(CheckpointIndex& index, const Planner& planner, const IndexingOptions& options,
                                             World& world) {
  const auto start = Clock::now();
  const Checkpoint& c = index.checkpoint();
  IndexingReport report;
  const std::vector<size_t> todo = tensors_to_index(index, planner, options, report);
  std::vector<uint64_t> bytes;
  for (size_t i : todo) bytes.push_back(c.tensors[i].bytes);
  std::vector<std::vector<size_t>> shares = plan_ranks(bytes, world.size());
  IndexingProgress progress;
  progress.tensors_total = todo.size();
  progress.ranks.resize(shares.size());
  for (size_t r = 0; r < shares.size(); ++r)
    for (size_t& k : shares[r]) {
      k = todo[k];  // positions into todo -> tensor indexes
      progress.ranks[r].bytes_total += c.tensors[k].bytes;
      progress.bytes_total += c.tensors[k].bytes;
    }

  RankPlan plan;
  plan.checkpoint_path = index.checkpoint_path();
  plan.checkpoint_tensors = c.tensors.size();
  plan.pyramids = options.pyramids;
  plan.max_bytes_per_s = options.max_bytes_per_s;
  plan.allowed_approx_steps.assign(options.allowed_approx_steps.begin(), options.allowed_approx_steps.end());
  RankExchange(world, kProtocol, kPlan, kFail).scatter(world.size(), [&](int r) {
    plan.items.clear();
    for (size_t i : shares[static_cast<size_t>(r)])
      plan.items.push_back({i, c.tensors[i].bytes, c.tensors[i].file_offset, c.tensors[i].name});
    return encode_plan(plan);
  });
  g_ranks_working = true;

  Coordinator job(index, options, world, shares, std::move(progress));
  IndexingOptions own = options;
  own.progress = nullptr;
  try {
    const IndexingReport mine = compute_tensors(
        c, planner, own, shares[0], [&](TensorResult&& d) { job.store(std::move(d), 0); },
        [&](uint64_t bytes_done) {
          job.own_bytes(bytes_done);
          job.poll();
          job.report_progress(start);
        });
    job.own_done(mine);
    report.window_bytes = mine.window_bytes, report.readahead_bytes = mine.readahead_bytes;
  } catch (const Error& e) {
    job.own_failure(e);
  } catch (const std::bad_alloc&) {
    job.own_failure(Error(ErrorKind::Io, "out of memory"));
  }
  // The other ranks' results keep arriving until each has reported.
  auto last = Clock::now();
  while (!job.all_finished()) {
    job.poll();
    if (since(last) > 0.1) job.report_progress(start), last = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  g_ranks_working = false;
  job.report_progress(start);
  report = job.finish(report);
  report.seconds = since(start);
  return report;
}

namespace {

// Ranks > 0: computes the run that message m (from rank 0) asks for, sending each tensor's result as it completes and
// then the rank's report, or the failure, to rank 0.
void serve_indexing_request(const RankMessage& m, const Planner& planner, const IndexingOptions& base, World& world) {
  // The checkpoint of the last request stays open: a command may send several (render's one tensor, then more).
  static std::unique_ptr<Checkpoint> checkpoint;
  static std::string open_path;
  const RankExchange exchange(world, kProtocol, kPlan, kFail);
  exchange.serve([&] {
    const RankPlan plan = decode_plan(m.bytes);
    if (!checkpoint || open_path != plan.checkpoint_path) {
      checkpoint.reset();
      checkpoint = std::make_unique<Checkpoint>(open_checkpoint(plan.checkpoint_path));
      open_path = plan.checkpoint_path;
    }
    check_same_checkpoint(*checkpoint, plan);
    IndexingOptions options = base;
    options.pyramids = plan.pyramids;
    options.max_bytes_per_s = plan.max_bytes_per_s;
    options.allowed_approx_steps = {plan.allowed_approx_steps.begin(), plan.allowed_approx_steps.end()};
    options.progress = nullptr;
    std::vector<size_t> tensors;
    for (const auto& it : plan.items) tensors.push_back(static_cast<size_t>(it.tensor));
    auto last = Clock::now();
    const IndexingReport r = compute_tensors(
        *checkpoint, planner, options, tensors, [&](TensorResult&& d) { exchange.reply(kResult, encode_tensor_result(d)); },
        [&](uint64_t bytes_done) {
          if (since(last) < 0.2) return;
          exchange.reply(kProgress, encode_progress(bytes_done));
          last = Clock::now();
        });
    exchange.reply(kDone, encode_done(r));
  });
}

}  // namespace

RankService indexing_rank_service(const Planner& planner, const IndexingOptions& base) {
  return {kProtocol, kPlan, [&planner, &base](const RankMessage& m, World& world) { serve_indexing_request(m, planner, base, world); }};
}



}  // namespace tmorph
