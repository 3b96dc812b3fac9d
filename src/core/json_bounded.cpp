#include "core/json_bounded.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

// A SAX consumer that builds the DOM itself, so that depth and duplicate keys are checked while parsing
// (nlohmann's callback parser re-scans the enclosing object at every end_object: quadratic in its size).
class BoundedBuilder {
 public:
  using json = nlohmann::json;
  explicit BoundedBuilder(json& root, const JsonLimits& limits) : root_(root), limits_(limits) {}

  bool null() { return place(nullptr) != nullptr; }
  bool boolean(bool v) { return place(v) != nullptr; }
  bool number_integer(json::number_integer_t v) { return place(v) != nullptr; }
  bool number_unsigned(json::number_unsigned_t v) { return place(v) != nullptr; }
  bool number_float(json::number_float_t v, const json::string_t&) { return place(v) != nullptr; }
  bool string(json::string_t& v) { return place(std::move(v)) != nullptr; }
  bool binary(json::binary_t& v) { return place(json::binary(std::move(v))) != nullptr; }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    if (stack_.back()->contains(k)) {
      failure_ = limits_.duplicate_key_message ? limits_.duplicate_key_message(k, stack_.size())
                                               : "key '" + k + "' appears twice in one object";
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    failure_ = std::string("not valid JSON: ") + e.what();
    return false;
  }

  const std::string& failure() const { return failure_; }

 private:
  // Puts v where the grammar says (the root, the open array's end, or the open object's pending key) and
  // returns where it now lives.
  json* place(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  // Pointers on the stack stay valid: a container only grows while it is the innermost open one.
  bool open(json empty) {
    if (stack_.size() + 1 > limits_.max_depth) {
      failure_ = "nested deeper than " + std::to_string(limits_.max_depth) + " levels";
      return false;
    }
    stack_.push_back(place(std::move(empty)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  const JsonLimits& limits_;
  std::vector<json*> stack_;
  std::string key_, failure_;
};

}  // namespace

nlohmann::json parse_json_bounded(std::string_view text, const std::string& where, const JsonLimits& limits) {
  if (const void* nul = std::memchr(text.data(), 0, text.size()))
    throw Error(ErrorKind::BadInput, where + ": holds a NUL byte at offset " +
                                         std::to_string(static_cast<const char*>(nul) - text.data()) +
                                         "; JSON text has none (padding must be spaces)");
  nlohmann::json root;
  BoundedBuilder builder(root, limits);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const nlohmann::json::exception& e) {  // e.g. invalid UTF-8 in a string
    throw Error(ErrorKind::BadInput, where + ": not valid JSON: " + e.what());
  }
  if (!ok) throw Error(ErrorKind::BadInput, where + ": " + (builder.failure().empty() ? "not valid JSON" : builder.failure()));
  return root;
}

std::string json_brief(const nlohmann::json& v, size_t max_chars) {
  const bool short_list = v.is_array() && v.size() <= 8 &&
                          std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) { return e.is_primitive(); });
  if (short_list) {
    std::string out = "[";
    for (const auto& e : v) out += (out.size() > 1 ? ", " : "") + json_brief(e, 16);
    return out + "]";
  }
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " values";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  if (v.is_binary()) return "binary data";
  if (v.is_string() && v.get_ref<const std::string&>().size() > max_chars) {
    std::string cut = v.get_ref<const std::string&>().substr(0, max_chars);
    return nlohmann::json(cut).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "...";
  }
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tmorph
