#include "app/compare_document.h"

#include <algorithm>
#include <map>

#include "app/result_json.h"
#include "checkpoint/openers/open_checkpoint.h"
#include "checkpoint/compare.h"
#include "tensormorph/error.h"

namespace tmorph::app {

namespace {

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return "[" + s + "]";
}

}  // namespace

nlohmann::json compare_document(const std::string& a, const std::string& b, const std::vector<std::string>& tensors,
                                const Planner& planner, unsigned threads,
                                const std::function<void(const nlohmann::json& row)>& on_row,
                                const std::function<void(size_t, size_t, bool)>& around_pair) {
  const Checkpoint ca = open_checkpoint(a), cb = open_checkpoint(b);
  std::map<std::string, const CheckpointTensor*> in_b;
  for (const auto& t : cb.tensors) in_b[t.name] = &t;
  for (const auto& name : tensors)
    if (!in_b.count(name) || std::none_of(ca.tensors.begin(), ca.tensors.end(), [&](const auto& t) { return t.name == name; }))
      throw Error(ErrorKind::InvalidArgument, "tensor '" + name + "' is not in both checkpoints");
  nlohmann::json rows = nlohmann::json::array(), only_a = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (const auto& ta : ca.tensors) {
    if (!tensors.empty() && std::find(tensors.begin(), tensors.end(), ta.name) == tensors.end()) continue;
    auto it = in_b.find(ta.name);
    if (it == in_b.end()) {
      only_a.push_back(ta.name);
      continue;
    }
    const CheckpointTensor& tb = *it->second;
    in_b.erase(it);
    if (ta.shape != tb.shape) {
      skipped.push_back({{"name", ta.name}, {"reason", "shape " + shape_text(ta.shape) + " against " + shape_text(tb.shape)}});
      continue;
    }
    if (around_pair) around_pair(static_cast<size_t>(&ta - ca.tensors.data()), static_cast<size_t>(&tb - cb.tensors.data()), true);
    nlohmann::json row;
    try {
      row = compare_json(compare_tensors(ca, ta, cb, tb, planner, threads));
    } catch (...) {
      if (around_pair) around_pair(static_cast<size_t>(&ta - ca.tensors.data()), static_cast<size_t>(&tb - cb.tensors.data()), false);
      throw;
    }
    if (around_pair) around_pair(static_cast<size_t>(&ta - ca.tensors.data()), static_cast<size_t>(&tb - cb.tensors.data()), false);
    row.update({{"name", ta.name}, {"type_a", ta.stored_type}, {"type_b", tb.stored_type}, {"shape", ta.shape}});
    if (on_row) on_row(row);
    rows.push_back(std::move(row));
  }
  nlohmann::json only_b = nlohmann::json::array();
  if (tensors.empty())
    for (const auto& [name, t] : in_b) only_b.push_back(name);
  return {{"a", a}, {"b", b}, {"tensors", rows}, {"only_in_a", only_a}, {"only_in_b", only_b}, {"skipped", skipped}};
}

}  // namespace tmorph::app
