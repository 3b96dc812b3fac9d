// One split op's calls (split_run.h).
#include "ops/split_run.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "tensormorph/error.h"

namespace tmorph {

void SplitRun::call(std::vector<SplitShare>& shares, uint64_t units, const ShareRunner& run, const std::string& op) {
  assigned_.resize(shares.size(), 0);
  std::vector<size_t> live;
  double total = 0;
  for (size_t i = 0; i < shares.size(); ++i)
    if (shares[i].failed.empty()) live.push_back(i), total += shares[i].fraction;
  if (live.empty()) throw Error(ErrorKind::Unavailable, op + ": every backend of the split failed");
  // Each live share is given what it lacks of its part of all units so far, the rest one unit at a time to the
  // share furthest behind (the first on ties): calls of a few units still divide as planned.
  planned_ += units;
  std::vector<uint64_t> count(live.size(), 0);
  std::vector<double> shortfall(live.size(), 0);
  uint64_t left = units;
  for (size_t k = 0; k < live.size(); ++k) {
    const double want = std::max(0.0, shares[live[k]].fraction / total * static_cast<double>(planned_) -
                                          static_cast<double>(assigned_[live[k]]));
    count[k] = std::min<uint64_t>(left, static_cast<uint64_t>(want));
    shortfall[k] = want - static_cast<double>(count[k]);
    left -= count[k];
  }
  for (; left; --left) {
    const size_t k = static_cast<size_t>(std::max_element(shortfall.begin(), shortfall.end()) - shortfall.begin());
    ++count[k], shortfall[k] -= 1;
  }
  std::vector<uint64_t> first(live.size() + 1, 0);
  for (size_t k = 0; k < live.size(); ++k) first[k + 1] = first[k] + count[k], assigned_[live[k]] += count[k];

  // One range on one share, timed and counted there (each share's counters are touched by its own thread only).
  const auto run_on = [&](size_t share, uint64_t u0, uint64_t u1) -> std::string {
    if (u0 >= u1) return {};
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t bytes = 0;
    std::string error;
    try {  // nothing may escape a worker thread (std::terminate): a failure of any kind is this share's failure
      error = run(share, u0, u1, &bytes);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "an unknown exception";
    }
    if (!error.empty()) return error;
    shares[share].units += u1 - u0;
    shares[share].bytes += bytes;
    shares[share].seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {};
  };
  std::vector<std::string> errors(live.size());
  std::vector<std::thread> workers;
  for (size_t k = 1; k < live.size(); ++k)
    workers.emplace_back([&, k] { errors[k] = run_on(live[k], first[k], first[k + 1]); });
  errors[0] = run_on(live[0], first[0], first[1]);
  for (auto& w : workers) w.join();

  for (size_t k = 0; k < live.size(); ++k) {
    if (errors[k].empty()) continue;
    shares[live[k]].failed = errors[k];
    std::string last = errors[k];
    for (;;) {  // to the next share (in order, wrapping round) that has not failed
      size_t next = shares.size();
      for (size_t step = 1; step < shares.size() && next == shares.size(); ++step) {
        const size_t j = (live[k] + step) % shares.size();
        if (shares[j].failed.empty()) next = j;
      }
      if (next == shares.size()) throw Error(ErrorKind::Unavailable, op + ": every backend of the split failed; the last: " + last);
      shares[live[k]].handed_to = shares[next].placement.backend;
      last = run_on(next, first[k], first[k + 1]);
      if (last.empty()) break;
      shares[next].failed = last;
    }
  }
}

}  // namespace tmorph
