// Tree-structured Parzen Estimator search. Contract: tpe.h.
#include "optimize/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

double rank_key(double loss) { return std::isfinite(loss) ? loss : std::numeric_limits<double>::infinity(); }

// Trial indices ordered by (loss, index).
std::vector<size_t> ranked(const std::vector<Trial>& trials) {
  std::vector<size_t> order(trials.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rank_key(trials[a].loss) < rank_key(trials[b].loss); });
  return order;
}

// One dimension's Parzen estimator: a weighted mixture of Gaussians truncated to [low, high].
struct Parzen {
  double low = 0, high = 1;
  std::vector<double> mu, sigma, weight, log_norm;  // log_norm: log(weight / (σ·√(2π)·Z)) − log Σ weight
  std::vector<double> cumulative;                   // running sum of weight, for sampling a component

  Parzen(const std::vector<double>& observations, double lo, double hi, double prior_weight) : low(lo), high(hi) {
    const double range = high - low;
    std::vector<std::pair<double, double>> points;  // (μ, weight), the prior included
    for (double o : observations) points.emplace_back(o, 1.0);
    points.emplace_back(low + range / 2, prior_weight);
    std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const double min_sigma = range / std::min(100.0, 1.0 + static_cast<double>(points.size()));
    double total = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      const double left = i == 0 ? points[i].first - low : points[i].first - points[i - 1].first;
      const double right = i + 1 == points.size() ? high - points[i].first : points[i + 1].first - points[i].first;
      double s = std::max(left, right);
      s = std::clamp(s, min_sigma, range);
      mu.push_back(points[i].first);
      sigma.push_back(s);
      weight.push_back(points[i].second);
      total += points[i].second;
      cumulative.push_back(total);
    }
    for (size_t i = 0; i < mu.size(); ++i) {
      const double z = 0.5 * (std::erf((high - mu[i]) / (sigma[i] * M_SQRT2)) - std::erf((low - mu[i]) / (sigma[i] * M_SQRT2)));
      log_norm.push_back(std::log(weight[i] / total) - std::log(sigma[i] * std::sqrt(2 * M_PI) * std::max(z, 1e-300)));
    }
  }

  double log_pdf(double x) const {
    double top = -std::numeric_limits<double>::infinity();
    std::vector<double> terms(mu.size());
    for (size_t i = 0; i < mu.size(); ++i) {
      const double d = (x - mu[i]) / sigma[i];
      terms[i] = log_norm[i] - 0.5 * d * d;
      top = std::max(top, terms[i]);
    }
    double sum = 0;
    for (double t : terms) sum += std::exp(t - top);
    return top + std::log(sum);
  }

  double sample(SeededRandom& rng) const {
    const double pick = rng.uniform() * cumulative.back();
    const size_t i = std::min<size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), pick) - cumulative.begin(),
                                      mu.size() - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {  // truncation by rejection (Box–Muller normals)
      const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
      const double x = mu[i] + sigma[i] * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
      if (x >= low && x <= high) return x;
    }
    return std::clamp(mu[i], low, high);
  }
};

}  // namespace

size_t best_trial(const std::vector<Trial>& trials) {
  if (trials.empty()) throw Error(ErrorKind::InvalidArgument, "best_trial: no trials");
  return ranked(trials).front();
}

std::vector<Trial> tpe_search(const std::vector<SearchDimension>& box, const std::function<double(const Point&)>& objective,
                              const TpeOptions& options) {
  if (box.empty()) throw Error(ErrorKind::InvalidArgument, "TPE: the search space has no dimension");
  for (const auto& d : box)
    if (!std::isfinite(d.low) || !std::isfinite(d.high) || !(d.low < d.high))
      throw Error(ErrorKind::InvalidArgument, "TPE: dimension '" + d.name + "' needs finite bounds low < high");
  if (options.trials == 0) throw Error(ErrorKind::InvalidArgument, "TPE: the number of trials must be at least 1");
  SeededRandom rng(options.seed);
  std::vector<Trial> trials;
  trials.reserve(options.trials);
  for (unsigned t = 0; t < options.trials; ++t) {
    Point x(box.size());
    if (t < std::max(1u, options.startup_trials)) {
      for (size_t d = 0; d < box.size(); ++d) x[d] = box[d].low + rng.uniform() * (box[d].high - box[d].low);
    } else {
      const std::vector<size_t> order = ranked(trials);
      const auto n_good = static_cast<size_t>(std::min<double>(std::ceil(options.gamma * static_cast<double>(trials.size())),
                                                               options.max_good));
      std::vector<Parzen> good, bad;
      for (size_t d = 0; d < box.size(); ++d) {
        std::vector<double> g, b;
        for (size_t r = 0; r < order.size(); ++r) (r < n_good ? g : b).push_back(trials[order[r]].x[d]);
        good.emplace_back(g, box[d].low, box[d].high, options.prior_weight);
        bad.emplace_back(b, box[d].low, box[d].high, options.prior_weight);
      }
      double best_score = -std::numeric_limits<double>::infinity();
      for (unsigned c = 0; c < std::max(1u, options.candidates); ++c) {
        Point candidate(box.size());
        double score = 0;
        for (size_t d = 0; d < box.size(); ++d) {
          candidate[d] = good[d].sample(rng);
          score += good[d].log_pdf(candidate[d]) - bad[d].log_pdf(candidate[d]);
        }
        if (score > best_score) best_score = score, x = candidate;
      }
    }
    trials.push_back({x, objective(x)});
  }
  return trials;
}

}  // namespace tmorph
