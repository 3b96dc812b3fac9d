#include "formats/onnx.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "core/utf8.h"
#include "formats/onnx_types.h"
#include "formats/protobuf_fields.h"
#include "tensormorph/error.h"
#include <tm_onnx.pb.h>  // generated from ONNX's onnx.proto in the build tree (src/formats/CMakeLists.txt)

namespace tmorph {

namespace {

// Field numbers of onnx.proto that are read here rather than by the generated classes.
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5, kGraphSparseInitializer = 15;
constexpr uint32_t kTensorFloatData = 4, kTensorInt32Data = 5, kTensorStringData = 6, kTensorInt64Data = 7, kTensorRawData = 9,
                   kTensorDoubleData = 10, kTensorUint64Data = 11;

const char* typed_field_name(uint32_t number) {
  switch (number) {
    case kTensorFloatData: return "float_data";
    case kTensorInt32Data: return "int32_data";
    case kTensorStringData: return "string_data";
    case kTensorInt64Data: return "int64_data";
    case kTensorDoubleData: return "double_data";
    case kTensorUint64Data: return "uint64_data";
  }
  return "";
}

[[noreturn]] void bad_onnx(const std::string& path, const std::string& what) { throw Error(ErrorKind::BadInput, path + ": " + what); }

// The fields of `fields` not in `skip`, as one serialized message, parsed into `msg`. When it does not parse,
// the first field that does not parse on its own is named.
template <typename Msg>
void parse_kept(Msg& msg, const uint8_t* bytes, const std::vector<ProtoField>& fields, const std::set<uint32_t>& skip,
                const std::string& path, const std::string& what, const char* type) {
  std::string kept;
  for (const ProtoField& f : fields)
    if (!skip.count(f.number)) kept.append(reinterpret_cast<const char*>(bytes + f.begin), f.end - f.begin);
  if (msg.ParseFromString(kept)) return;
  for (const ProtoField& f : fields) {
    if (skip.count(f.number)) continue;
    Msg one;
    if (!one.ParseFromArray(bytes + f.begin, static_cast<int>(f.end - f.begin)))
      bad_onnx(path, what + ": field " + std::to_string(f.number) + " at offset " + std::to_string(f.begin) + " does not parse as ONNX's " +
                         type + " field " + std::to_string(f.number) + " (a wrong wire type or a damaged nested message)");
  }
  bad_onnx(path, what + ": its fields do not parse as ONNX's " + type);
}

std::string quoted_name(const std::string& s) { return "'" + escape_invalid_utf8(s) + "'"; }

// A decimal, non-negative 64-bit integer (external_data's offset and length), or nullopt.
std::optional<uint64_t> decimal(const std::string& s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// Shape and element count from dims; BadInput for a negative dimension or a count that overflows.
template <typename Dims>
uint64_t read_dims(const Dims& dims, std::vector<uint64_t>& shape, const std::string& path, const std::string& what) {
  uint64_t elements = 1;
  bool zero = false;
  for (int i = 0; i < dims.size(); ++i) {
    const int64_t d = dims.Get(i);
    if (d < 0) bad_onnx(path, what + ": dims[" + std::to_string(i) + "] is " + std::to_string(d) + " (a dimension must be 0 or more)");
    shape.push_back(static_cast<uint64_t>(d));
    if (d == 0) zero = true;
    else if (!zero && elements > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      bad_onnx(path, what + ": dims " + [&] {
        std::string s;
        for (int k = 0; k < dims.size(); ++k) s += (k ? "," : "") + std::to_string(dims.Get(k));
        return s;
      }() + ": the element count overflows 64 bits");
    else elements *= static_cast<uint64_t>(d);
  }
  return zero ? 0 : elements;
}

// The occurrences of one typed field in a TensorProto.
struct TypedField {
  uint32_t number = 0;
  std::vector<ProtoField> records;
  uint64_t values = 0;
};

// Counts the values of a typed field's records (packed or not); BadInput for a wire type the field cannot have or
// a packed payload that is not a whole number of values.
void count_values(TypedField& t, const uint8_t* bytes, const std::string& path, const std::string& what) {
  const std::string name = typed_field_name(t.number);
  const uint32_t fixed = t.number == kTensorFloatData ? 4 : t.number == kTensorDoubleData ? 8 : 0;
  const uint32_t element_wire = fixed == 4 ? 5 : fixed == 8 ? 1 : t.number == kTensorStringData ? 2 : 0;
  for (const ProtoField& r : t.records) {
    if (r.wire_type == element_wire) {
      ++t.values;  // one unpacked value (a string for string_data)
    } else if (r.wire_type == 2) {
      if (fixed) {
        if (r.payload_size % fixed)
          bad_onnx(path, what + ": " + name + " at offset " + std::to_string(r.payload) + " holds " + std::to_string(r.payload_size) +
                             " bytes, not a whole number of " + std::to_string(fixed) + "-byte values");
        t.values += r.payload_size / fixed;
      } else {
        t.values += count_packed_varints(bytes, r.payload, r.payload + r.payload_size, path, what + ": " + name);
      }
    } else {
      bad_onnx(path, what + ": " + name + " at offset " + std::to_string(r.begin) + " has wire type " + std::to_string(r.wire_type) +
                         " (expected " + std::to_string(element_wire) + " or packed, 2)");
    }
  }
}

class OnnxParser {
 public:
  OnnxParser(const uint8_t* bytes, uint64_t size, const std::string& path) : bytes_(bytes), size_(size), path_(path) {}

  OnnxModel parse() {
    if (size_ > kProtobufMaxMessageBytes)
      bad_onnx(path_, std::to_string(size_) + " bytes: more than one protobuf message may hold (2 GiB - 1); ONNX writers put the "
                                              "weights of larger models in external data files");
    const auto fields = split_proto_fields(bytes_, 0, size_, path_, "ModelProto");
    tm_onnx::ModelProto model;
    parse_kept(model, bytes_, fields, {kModelGraph}, path_, "ModelProto", "ModelProto");
    model_metadata(model);
    const ProtoField* graph = nullptr;
    for (const ProtoField& f : fields)
      if (f.number == kModelGraph) {
        if (f.wire_type != 2) bad_onnx(path_, "ModelProto.graph at offset " + std::to_string(f.begin) + " is not a message (wire type " +
                                                  std::to_string(f.wire_type) + ")");
        graph = &f;  // a repeated message field merges; ONNX writers write one
      }
    if (graph) {
      for (const ProtoField& f : fields)
        if (f.number == kModelGraph && &f != graph)
          bad_onnx(path_, "ModelProto.graph appears twice (offsets " + std::to_string(f.begin) + " and " + std::to_string(graph->begin) + ")");
      read_graph(*graph);
    }
    for (const auto& [k, v] : props_) out_.metadata.emplace_back(k, v);
    out_.header_bytes = first_value_ == std::numeric_limits<uint64_t>::max() ? size_ : first_value_;
    return std::move(out_);
  }

 private:
  void meta(const std::string& key, const std::string& value) { out_.metadata.emplace_back(key, escape_invalid_utf8(value)); }

  void model_metadata(const tm_onnx::ModelProto& m) {
    if (m.has_ir_version()) meta("onnx.ir_version", std::to_string(m.ir_version()));
    if (m.has_producer_name()) meta("onnx.producer_name", m.producer_name());
    if (m.has_producer_version()) meta("onnx.producer_version", m.producer_version());
    if (m.has_domain()) meta("onnx.domain", m.domain());
    if (m.has_model_version()) meta("onnx.model_version", std::to_string(m.model_version()));
    if (m.has_doc_string()) meta("onnx.doc_string", m.doc_string());
    std::string opsets;
    for (const auto& o : m.opset_import())
      opsets += (opsets.empty() ? "" : ", ") + (o.domain().empty() ? std::string("ai.onnx") : o.domain()) + " " + std::to_string(o.version());
    if (!opsets.empty()) meta("onnx.opset_import", opsets);
    if (m.functions_size()) meta("onnx.functions", std::to_string(m.functions_size()));
    if (m.training_info_size()) meta("onnx.training_info", std::to_string(m.training_info_size()));
    // metadata_props last, under their own keys (the first of a repeated key is kept).
    for (const auto& p : m.metadata_props()) props_.emplace_back(escape_invalid_utf8(p.key()), escape_invalid_utf8(p.value()));
  }

  void read_graph(const ProtoField& g) {
    const auto fields = split_proto_fields(bytes_, g.payload, g.payload + g.payload_size, path_, "ModelProto.graph (GraphProto)");
    tm_onnx::GraphProto graph;
    parse_kept(graph, bytes_, fields, {kGraphInitializer}, path_, "ModelProto.graph", "GraphProto");
    if (graph.has_name()) meta("onnx.graph.name", graph.name());
    meta("onnx.graph.nodes", std::to_string(graph.node_size()));
    std::map<std::string, uint64_t> ops;
    for (const auto& n : graph.node())
      ++ops[n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type()];
    std::string op_types;
    for (const auto& [op, count] : ops) op_types += (op_types.empty() ? "" : ", ") + op + " " + std::to_string(count);
    if (!op_types.empty()) meta("onnx.graph.op_types", op_types);

    size_t index = 0;
    for (const ProtoField& f : fields)
      if (f.number == kGraphInitializer) read_initializer(f, index++);
    std::set<std::string> initializers;
    for (const auto& t : out_.tensors) initializers.insert(t.name);
    std::string inputs, outputs;
    for (const auto& v : graph.input())
      if (!initializers.count(v.name())) inputs += (inputs.empty() ? "" : ", ") + v.name();
    for (const auto& v : graph.output()) outputs += (outputs.empty() ? "" : ", ") + v.name();
    if (!inputs.empty()) meta("onnx.graph.inputs", inputs);
    if (!outputs.empty()) meta("onnx.graph.outputs", outputs);
    for (int i = 0; i < graph.sparse_initializer_size(); ++i) read_sparse(graph.sparse_initializer(i), static_cast<size_t>(i));
    if (graph.sparse_initializer_size()) meta("onnx.graph.sparse_initializers", std::to_string(graph.sparse_initializer_size()));
  }

  void add_name(OnnxTensor& t, const std::string& name, const std::string& what) {
    if (name.empty()) bad_onnx(path_, what + " has no name (an initializer is named by the graph's inputs and nodes)");
    if (!is_valid_utf8(name)) bad_onnx(path_, what + " " + quoted_name(name) + ": the name is not valid UTF-8");
    const auto [it, fresh] = names_.emplace(name, what);
    if (!fresh) bad_onnx(path_, what + " " + quoted_name(name) + " repeats the name of " + it->second);
    t.name = name;
  }

  void read_initializer(const ProtoField& f, size_t index) {
    std::string what = "graph.initializer[" + std::to_string(index) + "]";
    if (f.wire_type != 2) bad_onnx(path_, what + " at offset " + std::to_string(f.begin) + " is not a message (wire type " + std::to_string(f.wire_type) + ")");
    const auto fields = split_proto_fields(bytes_, f.payload, f.payload + f.payload_size, path_, what + " (TensorProto)");
    const ProtoField* raw = nullptr;
    std::map<uint32_t, TypedField> typed;
    for (const ProtoField& p : fields) {
      if (p.number == kTensorRawData) {
        if (p.wire_type != 2) bad_onnx(path_, what + ": raw_data at offset " + std::to_string(p.begin) + " has wire type " + std::to_string(p.wire_type) + " (expected 2, bytes)");
        raw = &p;  // the last occurrence wins, as in protobuf
      } else if (*typed_field_name(p.number)) {
        typed[p.number].number = p.number;
        typed[p.number].records.push_back(p);
      }
    }
    tm_onnx::TensorProto proto;
    std::set<uint32_t> bulk = {kTensorRawData};
    for (const auto& [n, _] : typed) bulk.insert(n);
    parse_kept(proto, bytes_, fields, bulk, path_, what, "TensorProto");

    OnnxTensor t;
    add_name(t, proto.name(), what);
    what += " " + quoted_name(t.name);
    t.data_type = proto.data_type();
    const auto type = onnx_type(t.data_type);
    if (t.data_type == 0) bad_onnx(path_, what + ": data_type is missing or 0 (UNDEFINED)");
    t.stored_type = type ? type->name : "data_type " + std::to_string(t.data_type);
    t.elements = read_dims(proto.dims(), t.shape, path_, what);
    const std::optional<uint64_t> raw_bytes = type ? onnx_raw_bytes(*type, t.elements) : std::nullopt;
    if (type && type->bits && !raw_bytes) bad_onnx(path_, what + ": " + std::to_string(t.elements) + " elements of " + type->name + " overflow 64 bits of bytes");
    for (auto& [n, tf] : typed) count_values(tf, bytes_, path_, what);

    // Where the values are: exactly one of raw_data, external data, one typed field (none for an empty tensor).
    std::vector<std::string> places;
    if (raw) places.push_back("raw_data");
    if (proto.data_location() == tm_onnx::TensorProto::EXTERNAL) places.push_back("external data");
    else if (proto.data_location() != tm_onnx::TensorProto::DEFAULT)
      bad_onnx(path_, what + ": data_location " + std::to_string(proto.data_location()) + " (expected 0, DEFAULT, or 1, EXTERNAL)");
    for (const auto& [n, tf] : typed)
      if (tf.values) places.push_back(typed_field_name(n));
    if (places.size() > 1) bad_onnx(path_, what + ": holds its values in both " + places[0] + " and " + places[1]);
    if (places.empty()) {
      if (t.elements) bad_onnx(path_, what + ": " + std::to_string(t.elements) + " elements but no values (no raw_data, typed field or external data)");
      t.field = "raw_data";  // empty: read as zero bytes in place
      t.dtype = type ? type->dtype : std::nullopt;
      if (!t.dtype) t.unavailable_reason = no_kernel(type, t.data_type);
    } else {
      t.field = places[0];
    }
    if (!type && !places.empty()) {
      t.unavailable_reason = no_kernel(type, t.data_type);
    } else if (raw) {
      if (!raw_bytes) bad_onnx(path_, what + ": raw_data is not allowed for " + std::string(type->name) + " (its values are in " + type->typed_field + ")");
      if (raw->payload_size != *raw_bytes)
        bad_onnx(path_, what + ": raw_data at offset " + std::to_string(raw->payload) + " holds " + std::to_string(raw->payload_size) +
                            " bytes; shape " + dims_text(t.shape) + " of " + type->name + " needs " + std::to_string(*raw_bytes));
      t.offset = raw->payload;
      t.bytes = raw->payload_size;
      if (t.bytes) first_value_ = std::min(first_value_, t.offset);
      set_dtype(t, *type);
    } else if (t.field == "external data") {
      read_external(t, proto, *type, raw_bytes, what);
    } else if (!places.empty()) {
      read_typed(t, typed.at(places_number(t.field)), *type, what);
    }
    if (proto.has_segment()) {
      t.dtype.reset();
      t.encoded.reset();
      t.unavailable_reason = "a segment (elements " + std::to_string(proto.segment().begin()) + ".." + std::to_string(proto.segment().end()) +
                             ") of a larger tensor: segments are not assembled";
    }
    out_.tensors.push_back(std::move(t));
  }

  static uint32_t places_number(const std::string& field) {
    for (uint32_t n : {kTensorFloatData, kTensorInt32Data, kTensorStringData, kTensorInt64Data, kTensorDoubleData, kTensorUint64Data})
      if (field == typed_field_name(n)) return n;
    return 0;
  }

  static std::string no_kernel(const std::optional<OnnxType>& type, int32_t code) {
    if (!type) return "data_type " + std::to_string(code) + ": not an ONNX element type this reader knows";
    return std::string("no kernel yet for ONNX ") + type->name;
  }

  static void set_dtype(OnnxTensor& t, const OnnxType& type) {
    t.dtype = type.dtype;
    if (!t.dtype) t.unavailable_reason = no_kernel(type, t.data_type);
  }

  void read_external(OnnxTensor& t, const tm_onnx::TensorProto& proto, const OnnxType& type, const std::optional<uint64_t>& raw_bytes,
                     const std::string& what) {
    if (!raw_bytes) bad_onnx(path_, what + ": external data is not allowed for " + std::string(type.name));
    t.external = true;
    bool have_location = false;
    for (const auto& e : proto.external_data()) {
      if (e.key() == "location") {
        if (const std::string why = onnx_location_problem(e.value()); !why.empty())
          bad_onnx(path_, what + ": external_data location " + quoted_name(e.value()) + ": " + why);
        t.location = e.value();
        have_location = true;
      } else if (e.key() == "offset" || e.key() == "length") {
        const auto v = decimal(e.value());
        if (!v) bad_onnx(path_, what + ": external_data " + e.key() + " " + quoted_name(e.value()) + " is not a non-negative decimal integer");
        (e.key() == "offset" ? t.offset : t.length.emplace()) = *v;
      }
    }
    if (!have_location) bad_onnx(path_, what + ": data_location is EXTERNAL but external_data has no location");
    if (t.length && *t.length != *raw_bytes)
      bad_onnx(path_, what + ": external_data length " + std::to_string(*t.length) + "; shape " + dims_text(t.shape) + " of " + type.name +
                          " needs " + std::to_string(*raw_bytes) + " bytes");
    if (t.offset > std::numeric_limits<uint64_t>::max() - *raw_bytes)
      bad_onnx(path_, what + ": external_data offset " + std::to_string(t.offset) + " + " + std::to_string(*raw_bytes) + " bytes overflows 64 bits");
    t.bytes = *raw_bytes;
    set_dtype(t, type);
  }

  void read_typed(OnnxTensor& t, const TypedField& tf, const OnnxType& type, const std::string& what) {
    const std::string name = typed_field_name(tf.number);
    if (name != type.typed_field)
      bad_onnx(path_, what + ": values in " + name + ", but " + type.name + " keeps them in " + type.typed_field);
    const uint64_t wanted = t.elements * type.typed_per_element;  // per_element is 1 or 2; elements fit raw bytes
    if (tf.values != wanted)
      bad_onnx(path_, what + ": " + name + " holds " + std::to_string(tf.values) + " values; shape " + dims_text(t.shape) + " of " + type.name +
                          " needs " + std::to_string(wanted));
    for (const ProtoField& r : tf.records) t.bytes += r.payload_size;  // as stored (varints: their encoded size)
    const bool fixed = tf.number == kTensorFloatData || tf.number == kTensorDoubleData;
    if (tf.number == kTensorStringData || !type.dtype) {
      t.unavailable_reason = no_kernel(type, t.data_type);
      return;
    }
    for (const ProtoField& r : tf.records)
      if (r.payload_size) {
        t.offset = r.payload;  // the first value's first byte
        break;
      }
    first_value_ = std::min(first_value_, t.offset);
    set_dtype(t, type);
    if (fixed && tf.records.size() == 1 && tf.records[0].wire_type == 2) return;  // packed little-endian IEEE values: in place
    // Several records (or one unpacked value), or varints: decoded from the records' payloads when read. A packed
    // varint payload and an unpacked varint alike are a run of varints; an unpacked fixed32/64 is one value.
    EncodedValues v;
    v.encoding = fixed ? ValueEncoding::LittleEndian : ValueEncoding::Varints;
    for (const ProtoField& r : tf.records)
      if (r.payload_size) v.runs.push_back({r.payload, r.payload_size});
    decode_values(bytes_, size_, v, *type.dtype, t.elements, nullptr, path_, what + ": " + name);  // every value fits its type
    t.encoded = std::move(v);
  }

  void read_sparse(const tm_onnx::SparseTensorProto& s, size_t index) {
    std::string what = "graph.sparse_initializer[" + std::to_string(index) + "]";
    OnnxTensor t;
    add_name(t, s.values().name(), what);
    what += " " + quoted_name(t.name);
    t.data_type = s.values().data_type();
    const auto type = onnx_type(t.data_type);
    t.stored_type = std::string("sparse ") + (type ? type->name : "data_type " + std::to_string(t.data_type));
    t.elements = read_dims(s.dims(), t.shape, path_, what);
    t.field = "sparse values";
    const int64_t stored = s.values().dims_size() ? s.values().dims(0) : 0;
    t.unavailable_reason = "a sparse initializer (" + std::to_string(stored) + " stored values): not densified";
    out_.tensors.push_back(std::move(t));
  }

  static std::string dims_text(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  const uint8_t* bytes_;
  uint64_t size_;
  const std::string& path_;
  OnnxModel out_;
  std::vector<std::pair<std::string, std::string>> props_;
  std::unordered_map<std::string, std::string> names_;
  uint64_t first_value_ = std::numeric_limits<uint64_t>::max();
};

}  // namespace

OnnxModel parse_onnx(const uint8_t* bytes, uint64_t size, const std::string& path) { return OnnxParser(bytes, size, path).parse(); }

std::string onnx_location_problem(const std::string& location) {
  if (location.empty()) return "empty";
  if (location.find('\0') != std::string::npos) return "holds a NUL byte";
  const std::filesystem::path p(location);
  if (p.is_absolute() || location[0] == '/' || location[0] == '\\') return "an absolute path (external data must lie in the model's folder)";
  for (const auto& part : p)
    if (part == "..") return "climbs out of the model's folder ('..')";
  if (location.find('\\') != std::string::npos) {
    // Written on Windows: a backslash separator with '..' is refused as well.
    size_t start = 0;
    while (start <= location.size()) {
      const size_t end = location.find_first_of("/\\", start);
      if (location.substr(start, end == std::string::npos ? std::string::npos : end - start) == "..") return "climbs out of the model's folder ('..')";
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

void check_onnx_external_range(const OnnxTensor& t, uint64_t file_size, const std::string& model_path, const std::string& data_path) {
  if (t.offset > file_size || t.bytes > file_size - t.offset)
    throw Error(ErrorKind::BadInput, model_path + ": tensor " + quoted_name(t.name) + ": external data offset " + std::to_string(t.offset) + " + " +
                                         std::to_string(t.bytes) + " bytes runs past the end of " + data_path + " (" +
                                         std::to_string(file_size) + " bytes)");
}

}  // namespace tmorph
