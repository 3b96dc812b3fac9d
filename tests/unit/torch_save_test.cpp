// torch.save files: the fixtures written by torch 1.13 (tests/tools/torch_write.py) against the values
// torch computed for them (tests/fixtures/torch/expected.json), and one malformed input per failure mode
// of the pickle reader, the zip directory reader and the torch.save layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "checkpoint/openers/open_checkpoint.h"
#include "formats/deepspeed_zero.h"
#include "formats/pickle_reader.h"
#include "formats/torch_save.h"
#include "formats/zip_archive.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

using namespace std::string_literals;

const std::string kDir = TM_TORCH_FIXTURES_DIR;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

nlohmann::json expected() {
  std::ifstream in(kDir + "/expected.json");
  return nlohmann::json::parse(in);
}

// The message of the BadInput error f throws (fails the test if it throws nothing or something else).
template <class F>
std::string torch_error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

// ---- the fixtures, against torch's values ----

void check_file(const std::string& name) {
  SCOPED_TRACE(name);
  const nlohmann::json want = expected()["files"][name];
  const Checkpoint c = open_checkpoint(kDir + "/" + name);
  EXPECT_EQ(c.format, "torch");
  ASSERT_EQ(c.tensors.size(), want["tensors"].size());
  for (const auto& t : c.tensors) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(want["tensors"].contains(t.name));
    const auto& w = want["tensors"][t.name];
    EXPECT_EQ(t.shape, w["shape"].get<std::vector<uint64_t>>());
    EXPECT_EQ(t.stored_type, w["stored_type"].get<std::string>());
    EXPECT_EQ(t.elements, w["elements"].get<uint64_t>());
    if (!w["contiguous"].get<bool>()) {
      EXPECT_EQ(t.strides(), w["stride"].get<std::vector<uint64_t>>());
      if (!w.contains("values")) {  // expanded beyond its file: listed, not read
        EXPECT_FALSE(t.dtype.has_value());
        EXPECT_NE(t.unavailable_reason.find("more than its file holds"), std::string::npos) << t.unavailable_reason;
        continue;
      }
    } else {
      EXPECT_TRUE(t.strides().empty());
    }
    ASSERT_TRUE(t.dtype.has_value()) << t.unavailable_reason;
    ASSERT_EQ(t.bytes, t.elements * dtype_size(*t.dtype));
    const uint8_t* p = c.data(t);  // a strided view: its values gathered in row-major order
    const bool is_int = !dtype_is_float(*t.dtype);
    std::vector<double> values;
    for (uint64_t i = 0; i < t.elements; ++i) values.push_back(element_to_double(*t.dtype, p + i * dtype_size(*t.dtype)));
    if (w.contains("values")) {
      EXPECT_EQ(values, w["values"].get<std::vector<double>>());
    }
    for (size_t i = 0; i < w["first"].size(); ++i) {
      if (*t.dtype == DType::I64) {  // exact, beyond what a double holds
        int64_t v;
        std::memcpy(&v, p + 8 * i, 8);
        EXPECT_EQ(v, w["first"][i].get<int64_t>());
      } else {
        EXPECT_EQ(values[i], w["first"][i].get<double>()) << "element " << i;
      }
    }
    if (t.elements == 0) continue;
    double lo = values[0], hi = values[0], sum = 0;
    for (double v : values) lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
    EXPECT_EQ(lo, w["min"].get<double>());
    EXPECT_EQ(hi, w["max"].get<double>());
    EXPECT_NEAR(sum, w["sum"].get<double>(), std::abs(w["sum"].get<double>()) * 1e-12 + (is_int ? 0 : 1e-9));
  }
  for (const auto& [k, v] : want["metadata"].items()) EXPECT_EQ(c.metadata.at(k), v.get<std::string>()) << k;
  EXPECT_EQ(c.metadata.size(), want["metadata"].size());
}

TEST(TorchSave, StateDictEveryDtypeAndViewsMatchTorch) { check_file("state_dict.pt"); }
TEST(TorchSave, Protocol4MatchesTorch) { check_file("protocol4.pt"); }
TEST(TorchSave, StridedViewsOfEveryWidthMatchTorch) { check_file("strided.pt"); }
TEST(TorchSave, BareTensorAndParameters) {
  check_file("tensor.pt");
  check_file("parameter.pt");
  EXPECT_EQ(open_checkpoint(kDir + "/tensor.pt").tensors[0].name, "tensor");
}

TEST(TorchSave, ViewsShareOneStorageInPlace) {
  const auto f = read_all(kDir + "/state_dict.pt");
  const TorchSaveFile t = parse_torch_save(f.data(), f.size(), "state_dict.pt");
  EXPECT_EQ(t.archive, "state_dict");
  std::map<std::string, const TorchTensorView*> by;
  for (const auto& v : t.tensors) by[v.name] = &v;
  for (const char* n : {"views.rows", "views.tail", "views.transposed", "views.column"}) EXPECT_EQ(by.at(n)->storage, by.at("views.base")->storage) << n;
  EXPECT_EQ(by.at("views.rows")->storage_offset, 6u);
  EXPECT_TRUE(by.at("views.rows")->contiguous);
  EXPECT_FALSE(by.at("views.transposed")->contiguous);
  EXPECT_EQ(by.at("views.column")->strides, (std::vector<uint64_t>{6}));
  // The contiguous view is read in place: its first byte is 6 elements into the storage's entry.
  const Checkpoint c = open_checkpoint(kDir + "/state_dict.pt");
  uint64_t base = 0, rows = 0;
  for (const auto& ct : c.tensors) {
    if (ct.name == "views.base") base = ct.file_offset;
    if (ct.name == "views.rows") rows = ct.file_offset;
  }
  EXPECT_EQ(rows, base + 6 * 4);
  EXPECT_EQ(c.header_bytes[0], t.header_bytes);
}

// The legacy format (torch < 1.6, or _use_new_zipfile_serialization=False): torch 1.13's files, and one of
// our own writer's mimicking a Windows file (sys_info: long is 4 bytes) that torch reads with these values.
TEST(TorchSave, LegacyFilesMatchTorch) {
  for (const char* name : {"legacy.pt", "legacy_state_dict.pt", "legacy_tuple.pt", "legacy_windows.pt"}) check_file(name);
}

TEST(TorchSave, LegacyStoragesLieInPlace) {
  const auto f = read_all(kDir + "/legacy_windows.pt");
  const TorchSaveFile t = parse_torch_save(f.data(), f.size(), "legacy_windows.pt");
  EXPECT_TRUE(t.archive.empty());
  ASSERT_EQ(t.storages.size(), 3u);
  std::map<std::string, const TorchTensorView*> by;
  for (const auto& v : t.tensors) by[v.name] = &v;
  EXPECT_EQ(by.at("embed.weight_t")->storage, by.at("embed.weight")->storage);
  EXPECT_EQ(by.at("embed.row")->storage_offset, 8u);
  EXPECT_FALSE(by.at("embed.weight_t")->contiguous);
  // Each storage's bytes are its 8-byte element count's neighbours in the file (no copy), in key order.
  const TorchStorage& w = t.storages[by.at("embed.weight")->storage];
  EXPECT_EQ(w.type, "FloatStorage");
  EXPECT_EQ(w.file_offset + w.elements * 4, f.size());  // "w" is the last key
  uint64_t count = 0;
  std::memcpy(&count, f.data() + w.file_offset - 8, 8);
  EXPECT_EQ(count, 12u);
  float first = 0;
  std::memcpy(&first, f.data() + w.file_offset, 4);
  EXPECT_EQ(first, -5.5f / 4);
  EXPECT_LT(t.header_bytes, t.storages[by.at("counts")->storage].file_offset);
  EXPECT_EQ(t.metadata.at("epoch"), "3");
}

// ---- legacy files made byte by byte ----

std::string legacy_u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string legacy_str(const std::string& s) {  // BINUNICODE
  std::string out = "X";
  const uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  return out += s;
}
std::string legacy_int(uint32_t v) {  // BININT
  std::string out = "J";
  return out.append(reinterpret_cast<const char*>(&v), 4);
}
// The legacy header pickles: magic number, protocol 1001, sys_info with these values.
std::string legacy_header(const std::string& little = "\x88", int64_t long_size = 4, uint32_t protocol = 1001) {
  std::string h("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
  h += "\x80\x02" + legacy_int(protocol) + ".";
  h += "\x80\x02}(" + legacy_str("protocol_version") + legacy_int(1001) + legacy_str("little_endian") + little + legacy_str("type_sizes") + "}(" +
       legacy_str("short") + legacy_int(2) + legacy_str("int") + legacy_int(4) + legacy_str("long") + legacy_int(static_cast<uint32_t>(long_size)) +
       "uu.";
  return h;
}
// {name: f32 tensor of `size` elements on storage `key` of `elements`}, its persistent id's last item `view`.
std::string legacy_object(const std::string& name, uint32_t size, uint32_t elements, const std::string& key = "k", const std::string& view = "N") {
  return "\x80\x02}(" + legacy_str(name) + "ctorch._utils\n_rebuild_tensor_v2\n((" + legacy_str("storage") + "ctorch\nFloatStorage\n" +
         legacy_str(key) + legacy_str("cpu") + legacy_int(elements) + view + "tQ" + legacy_int(0) + "(" + legacy_int(size) + "t(" + legacy_int(1) +
         "t\x89" "ccollections\nOrderedDict\n)RtRu.";
}
std::string legacy_keys(const std::vector<std::string>& keys) {
  std::string out = "\x80\x02(";
  for (const auto& k : keys) out += legacy_str(k);
  return out + "l.";
}
// A whole file: header, {"w": 3 floats on storage "k" of 4}, the key list, storage "k" (count, bytes).
std::string legacy_file(const std::string& header = legacy_header(), const std::string& keys = legacy_keys({"k"}), uint64_t count = 4,
                        size_t bytes = 16) {
  return header + legacy_object("w", 3, 4) + keys + legacy_u64(count) + std::string(bytes, '\x01');
}
std::string legacy_error(const std::string& b) {
  return torch_error_of([&] { parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "old.pt"); });
}

TEST(TorchSave, LegacyHandMadeFileReads) {
  const std::string b = legacy_file();
  const TorchSaveFile t = parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "old.pt");
  ASSERT_EQ(t.tensors.size(), 1u);
  EXPECT_EQ(t.tensors[0].name, "w");
  EXPECT_EQ(t.storages[0].file_offset, b.size() - 16);
  EXPECT_EQ(t.header_bytes, b.size() - 24);
  // A Linux file (long is 8 bytes) reads the same: storages' counts are 8 bytes whatever sys_info says.
  const std::string linux_file = legacy_file(legacy_header("\x88", 8));
  EXPECT_EQ(parse_torch_save(reinterpret_cast<const uint8_t*>(linux_file.data()), linux_file.size(), "old.pt").tensors.size(), 1u);
}

TEST(TorchSave, LegacyRefusalsNameTheProblem) {
  auto has = [](const std::string& e, const std::string& what) {
    EXPECT_NE(e.find(what), std::string::npos) << "expected '" << what << "' in: " << e;
  };
  has(legacy_error(legacy_file(legacy_header("\x89"))), "says the file was written big-endian");
  has(legacy_error(legacy_file(legacy_header("\x88", 16))), "type_sizes['long'] is 16, expected 4 or 8");
  has(legacy_error(legacy_file(legacy_header("\x88", 4, 1000))), "legacy torch.save protocol version 1000, expected 1001");
  // Storages: a lying element count, one past the end of the file, a huge one, trailing bytes.
  has(legacy_error(legacy_file(legacy_header(), legacy_keys({"k"}), 5)), "storage 'k' at file offset");
  has(legacy_error(legacy_file(legacy_header(), legacy_keys({"k"}), 5)), "its element count says 5, the object pickle says 4");
  has(legacy_error(legacy_file(legacy_header(), legacy_keys({"k"}), 4, 15)), "run past the end of the file (15 bytes remain; truncated)");
  has(legacy_error(legacy_file(legacy_header(), legacy_keys({"k"}), 4, 17)), "1 bytes follow the last storage");
  const std::string huge = legacy_header() + legacy_object("w", 3, 0x7FFFFFFF) + legacy_keys({"k"}) + legacy_u64(0x7FFFFFFF) + "xx";
  has(legacy_error(huge), "2147483647 elements of 4 bytes run past the end of the file");
  // The key list against the storages the object uses.
  has(legacy_error(legacy_file(legacy_header(), legacy_keys({"k", "other"}))), "names storage 'other', which no tensor of the object uses");
  has(legacy_error(legacy_file(legacy_header(), legacy_keys({"k", "k"}))), "names storage 'k' twice");
  has(legacy_error(legacy_file(legacy_header(), legacy_keys({}))), "storage 'k' (used by the object) is not in the storage key list");
  has(legacy_error(legacy_file(legacy_header(), "\x80\x02" + legacy_str("k") + ".")), "the storage key list is a str, expected a list");
  // A storage view (torch 0.x), a persistent id of the zip format's length.
  has(legacy_error(legacy_header() + legacy_object("w", 3, 4, "k", "(" + legacy_str("v") + legacy_int(0) + legacy_int(4) + "t") +
                   legacy_keys({"k"}) + legacy_u64(4) + std::string(16, '\0')),
      "its storage is a view on another storage");
  // Every truncation of a good file is a clear error.
  const std::string good = legacy_file();
  for (size_t n = 0; n < good.size(); ++n) legacy_error(good.substr(0, n));
  const auto real = read_all(kDir + "/legacy_tuple.pt");
  for (size_t n = 0; n < real.size(); ++n) torch_error_of([&] { parse_torch_save(real.data(), n, "legacy_tuple.pt"); });
}

TEST(TorchSave, TarFormatOfTorch03RefusedByName) {
  std::string tar(1024, '\0');
  std::memcpy(&tar[0], "sys_info", 8);
  std::memcpy(&tar[257], "ustar\x00" "00", 8);
  EXPECT_TRUE(looks_like_torch_tar(reinterpret_cast<const uint8_t*>(tar.data()), tar.size()));
  EXPECT_NE(legacy_error(tar).find("torch.save's format of torch 0.3 and earlier, which is not supported"), std::string::npos);
  std::memcpy(&tar[0], "notes.txt", 9);  // another tar is no torch file
  EXPECT_FALSE(looks_like_torch_tar(reinterpret_cast<const uint8_t*>(tar.data()), tar.size()));
}

// ---- the pickle reader: hand-made pickles ----

PickleOptions torch_options() {
  PickleOptions o;
  for (const auto& g : torch_allowed_globals()) o.allowed_globals.insert(g);
  o.allowed_what = "torch";
  return o;
}

std::string pickle_error(const std::string& bytes, const PickleOptions& o = torch_options()) {
  return torch_error_of([&] { read_pickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.pkl", o); });
}

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
// BINUNICODE s and BININT v (built by appending: GCC 12 warns falsely on "X" + std::string&&).
std::string pstr(const std::string& s) {
  std::string out = "X";
  out += u32(static_cast<uint32_t>(s.size()));
  return out += s;
}
std::string pint(uint32_t v) {
  std::string out = "J";
  return out += u32(v);
}

TEST(Pickle, ReadsScalarsContainersAndMemo) {
  // {'a': [1, -2, 3.5, 'x', b'yz', None, True], 'b': (the list again, through the memo,)}
  const std::string p = "\x80\x02}q\x00("s + pstr("a") + "]q\x01(K\x01J\xfe\xff\xff\xff" + "G\x40\x0c\x00\x00\x00\x00\x00\x00"s + pstr("x") +
                        "C\x02yzN\x88" "e" + pstr("b") + "h\x01\x85u.";
  const PickleRef v = read_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "t.pkl", torch_options());
  ASSERT_EQ(v->kind, PickleKind::Dict);
  ASSERT_EQ(v->entries.size(), 2u);
  const auto& list = v->entries[0].second;
  ASSERT_EQ(list->items.size(), 7u);
  EXPECT_EQ(list->items[1]->integer, -2);
  EXPECT_EQ(list->items[2]->real, 3.5);
  EXPECT_EQ(list->items[4]->text, "yz");
  EXPECT_TRUE(list->items[6]->boolean);
  EXPECT_EQ(v->entries[1].second->items[0], list);  // the memo shares, never copies
}

TEST(Pickle, GlobalsOutsideTheAllowListAreRefusedNeverCalled) {
  std::string e = pickle_error("\x80\x02" "cos\nsystem\n" + pstr("id") + "\x85R.");
  EXPECT_NE(e.find("global 'os.system' is not on the allow-list"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 2 "), std::string::npos) << e;
  e = pickle_error("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x08"s + "builtins\x8c\x04" "eval\x93.");
  EXPECT_NE(e.find("global 'builtins.eval'"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 27 "), std::string::npos) << e;
  EXPECT_NE(e.find("STACK_GLOBAL"), std::string::npos) << e;
}

TEST(Pickle, StringsMustBeUtf8AsPythonDemands) {
  // BINUNICODE, SHORT_BINUNICODE and BINUNICODE8 holding a stray 0xE1 (a lead byte with no continuation).
  std::string e = pickle_error("\x80\x02" + pstr("m\xe1sk") + ".");
  EXPECT_NE(e.find("byte 2 (file offset 2), opcode 0x58 BINUNICODE: the string of 4 bytes is not valid UTF-8 ('m\\xE1sk')"), std::string::npos) << e;
  e = pickle_error(std::string("\x80\x04\x8c\x02\xe1x.", 7));
  EXPECT_NE(e.find("opcode 0x8c SHORT_BINUNICODE: the string of 2 bytes is not valid UTF-8"), std::string::npos) << e;
  e = pickle_error(std::string("\x80\x04\x8d\x01\0\0\0\0\0\0\0\xff.", 14));
  EXPECT_NE(e.find("opcode 0x8d BINUNICODE8"), std::string::npos) << e;
  // Valid multi-byte text is kept; bytes (BINBYTES) are not text and may hold anything.
  const std::string ok = "\x80\x02" + pstr("m\xc3\xa1sk") + ".";
  EXPECT_EQ(read_pickle(reinterpret_cast<const uint8_t*>(ok.data()), ok.size(), "t.pkl", torch_options())->text, "m\xc3\xa1sk");
  const std::string bytes = std::string("\x80\x03" "C\x01\xe1.", 6);
  EXPECT_EQ(read_pickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.pkl", torch_options())->text, "\xe1");
}

TEST(Pickle, NamesInErrorsAreMadeUtf8AndBounded) {
  // A module name that is not UTF-8 is refused as a string, before it names a global; the message shows it escaped.
  std::string e = pickle_error("\x80\x04\x8c\x03o\xffs\x8c\x06system\x93.");
  EXPECT_NE(e.find("is not valid UTF-8 ('o\\xFFs')"), std::string::npos) << e;
  EXPECT_NE(pickle_error("\x80\x02" + pstr(std::string(300, 'm')) + pstr("n") + "\x93.").find("longer than 256 bytes"), std::string::npos);
}

TEST(Pickle, EveryOpcodeOutOfPlaceGivesAClearError) {
  // Each byte as the first opcode, after a MARK, and at the end of the input: never a crash, and any
  // error names the offset and the opcode.
  for (int op = 0; op < 256; ++op) {
    for (const std::string& prefix : {std::string("\x80\x02"), std::string("\x80\x02("), std::string("\x80\x02N")}) {
      for (const std::string& suffix : {std::string("."), std::string()}) {
        const std::string p = prefix + static_cast<char>(op) + suffix;
        try {
          read_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "t.pkl", torch_options());
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::BadInput);
          const std::string m = e.what();
          EXPECT_TRUE(m.find("opcode 0x") != std::string::npos || m.find("without STOP") != std::string::npos) << m;
        }
      }
    }
  }
}

TEST(Pickle, EveryTruncationOfARealPickleIsAnError) {
  const auto f = read_all(kDir + "/state_dict.pt");
  const ZipDirectory z = read_zip_directory(f.data(), f.size(), "state_dict.pt");
  const ZipEntry* pkl = z.find("state_dict/data.pkl");
  ASSERT_NE(pkl, nullptr);
  for (uint64_t n = 0; n < pkl->size; ++n) torch_error_of([&] { read_pickle(f.data() + pkl->data_offset, n, "t.pkl", torch_options()); });
  read_pickle(f.data() + pkl->data_offset, pkl->size, "t.pkl", torch_options());
}

TEST(Pickle, LyingLengthsMemoAndIntegers) {
  EXPECT_NE(pickle_error("\x80\x02X" + u32(0xFFFFFFF0u) + "abc.").find("the string needs 4294967280 bytes, only 4 remain"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff"s).find("remain"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02h\x05.").find("memo index 5 was never stored"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02j" + u32(4000000000u) + ".").find("memo index 4000000000"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02\x8a\x09" + std::string(9, '\x01') + ".").find("wider than 64 bits"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x04\x95\x40\x00\x00\x00\x00\x00\x00\x00N."s).find("frame runs past"), std::string::npos);
}

TEST(Pickle, RefusesWhatWouldExecuteOrIsOutOfScope) {
  EXPECT_NE(pickle_error("\x80\x02" "ccollections\nOrderedDict\n)\x81.").find("instantiating a class is refused"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x01N.").find("protocol 1 is not supported"), std::string::npos);
  EXPECT_NE(pickle_error("N.").find("expected PROTO"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02I1\n.").find("protocol-0 text opcodes"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02\x82\x01.").find("extension registry"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02N.N").find("1 bytes follow STOP"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02NN.").find("exactly one value"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02K\x01)R.").find("expected a global to call"), std::string::npos);
  EXPECT_NE(pickle_error("\x80\x02" "ctorch\nFloatStorage\nK\x01R.").find("expected a tuple of arguments"), std::string::npos);
}

TEST(Pickle, NestingCyclesAndSizesAreBounded) {
  EXPECT_NE(pickle_error("\x80\x02" + std::string(1000, '(')).find("MARKs nested deeper than 200"), std::string::npos);
  // 300 lists, each appended to the one below it.
  EXPECT_NE(pickle_error("\x80\x02" + std::string(300, ']') + std::string(299, 'a') + ".").find("nested deeper than 200 levels"), std::string::npos);
  // d = {}; d['k'] = d
  EXPECT_NE(pickle_error("\x80\x02}q\x00"s + pstr("k") + "h\x00s."s).find("would contain itself"), std::string::npos);
  // l = []; m = [l]; l.append(m): l is already inside m
  EXPECT_NE(pickle_error("\x80\x02]q\x00h\x00\x85]q\x01h\x00"s + "a0h\x00h\x01" "a."s).find("already inside another value"), std::string::npos);
  PickleOptions small = torch_options();
  small.limits.max_values = 10;
  EXPECT_NE(pickle_error("\x80\x02(" + std::string(20, 'N') + "l.", small).find("more than 10 values"), std::string::npos);
  small = torch_options();
  small.limits.max_memo = 2;
  EXPECT_NE(pickle_error("\x80\x04N\x94\x94\x94.", small).find("more than 2 memo entries"), std::string::npos);
  small.limits.max_bytes = 4;
  EXPECT_NE(pickle_error("\x80\x02NNN.", small).find("exceeds the limit"), std::string::npos);
}

// ---- zip archives and torch.save files made by hand ----

struct ZipFile {
  struct Entry {
    std::string name, data;
    uint16_t method = 0;
    uint32_t claimed_size = UINT32_MAX;  // central directory size when not the data's (UINT32_MAX: real)
    bool wrong_crc = false;              // record a CRC-32 one off the data's
  };
  std::vector<Entry> entries;
  bool zip64 = false;  // sizes and offsets in zip64 extra records, zip64 end record and locator
  std::string bytes() const {
    std::string out, cd;
    auto u16 = [](std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); };
    auto w32 = [](std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
    auto w64 = [](std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); };
    for (const auto& e : entries) {
      const uint32_t offset = static_cast<uint32_t>(out.size());
      const uint32_t size = e.claimed_size == UINT32_MAX ? static_cast<uint32_t>(e.data.size()) : e.claimed_size;
      const uint32_t crc = zip_crc32(reinterpret_cast<const uint8_t*>(e.data.data()), e.data.size()) ^ (e.wrong_crc ? 1u : 0u);
      w32(out, 0x04034b50); u16(out, 20); u16(out, 0); u16(out, e.method); w32(out, 0); w32(out, crc);
      w32(out, size); w32(out, size); u16(out, static_cast<uint16_t>(e.name.size())); u16(out, 0);
      out += e.name;
      out += e.data;
      const uint32_t field = zip64 ? 0xFFFFFFFF : size;
      w32(cd, 0x02014b50); u16(cd, 45); u16(cd, 45); u16(cd, 0); u16(cd, e.method); w32(cd, 0); w32(cd, crc);
      w32(cd, field); w32(cd, field); u16(cd, static_cast<uint16_t>(e.name.size())); u16(cd, zip64 ? 28 : 0); u16(cd, 0);
      u16(cd, 0); u16(cd, 0); w32(cd, 0); w32(cd, zip64 ? 0xFFFFFFFF : offset);
      cd += e.name;
      if (zip64) {
        u16(cd, 1); u16(cd, 24); w64(cd, size); w64(cd, size); w64(cd, offset);
      }
    }
    const uint32_t cd_offset = static_cast<uint32_t>(out.size());
    out += cd;
    const uint16_t n = static_cast<uint16_t>(entries.size());
    if (zip64) {
      const uint64_t end64 = out.size();
      w32(out, 0x06064b50); w64(out, 44); u16(out, 45); u16(out, 45); w32(out, 0); w32(out, 0);
      w64(out, n); w64(out, n); w64(out, cd.size()); w64(out, cd_offset);
      w32(out, 0x07064b50); w32(out, 0); w64(out, end64); w32(out, 1);
    }
    w32(out, 0x06054b50); u16(out, 0); u16(out, 0); u16(out, zip64 ? 0xFFFF : n); u16(out, zip64 ? 0xFFFF : n);
    w32(out, zip64 ? 0xFFFFFFFF : static_cast<uint32_t>(cd.size())); w32(out, zip64 ? 0xFFFFFFFF : cd_offset); u16(out, 0);
    return out;
  }
};

// data.pkl of {name: f32 tensor of `shape` (1-D) on a storage of `storage_elements`, from `offset`}.
std::string tensor_pickle(uint32_t size, uint32_t storage_elements, uint32_t offset = 0, const std::string& type = "FloatStorage") {
  return "\x80\x02}(" + pstr("w") + "ctorch._utils\n_rebuild_tensor_v2\n(" + "(" + pstr("storage") + "ctorch\n" + type + "\n" +
         pstr("0") + pstr("cpu") + pint(storage_elements) + "tQ" + pint(offset) + pint(size) + "\x85" + pint(1) + "\x85" +
         "\x89" + "ccollections\nOrderedDict\n)R" + "tRu.";
}

std::string torch_error(const ZipFile& z) {
  const std::string b = z.bytes();
  return torch_error_of([&] { parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.pt"); });
}

TEST(TorchSave, HandMadeFileReads) {
  ZipFile z;
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4, 1)}, {"a/data/0", std::string(16, '\0')}, {"a/byteorder", "little"}};
  const std::string b = z.bytes();
  const TorchSaveFile t = parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.pt");
  ASSERT_EQ(t.tensors.size(), 1u);
  EXPECT_EQ(t.tensors[0].name, "w");
  EXPECT_EQ(t.tensors[0].storage_offset, 1u);
  EXPECT_TRUE(t.tensors[0].contiguous);
}

TEST(TorchSave, SharedReferencesCannotExpandWithoutBound) {
  // m1 = (None, None); m(k+1) = (mk, mk) up to m41: 2^41 paths in a few hundred bytes, under one name.
  std::string p;
  auto ops = [&p](std::initializer_list<int> bytes) {
    for (int b : bytes) p.push_back(static_cast<char>(b));
  };
  ops({0x80, 4, 'N', 0x94, '0'});                      // memo 0 = None
  ops({'h', 0, 'h', 0, 0x86, 0x94, '0'});              // memo 1 = (None, None)
  for (int k = 1; k <= 40; ++k) ops({'h', k, 'h', k, 0x86, 0x94, '0'});
  ops({'}'});
  p += pstr("w");
  ops({'h', 41, 's', '.'});
  ZipFile z;
  z.entries = {{"a/data.pkl", p}};
  EXPECT_NE(torch_error(z).find("through shared references (limit)"), std::string::npos);  // the visits or the names' length
}

TEST(TorchSave, NamesMustBeNonEmptyAndUnique) {
  ZipFile z;
  std::string p = tensor_pickle(3, 4);
  p.replace(p.find(pstr("w")), 6, pstr(""));
  z.entries = {{"a/data.pkl", p}, {"a/data/0", std::string(16, '\0')}};
  std::string e = torch_error(z);
  EXPECT_NE(e.find("a dict key is the empty string, which tensor '' is named under"), std::string::npos) << e;
  EXPECT_NE(e.find("a/data.pkl byte 4"), std::string::npos) << e;
  // {'': {'x': tensor}}: an empty key on the way to a named tensor.
  p = tensor_pickle(3, 4);
  p.replace(p.find(pstr("w")), 6, pstr("") + "}(" + pstr("x"));
  p.replace(p.rfind("u."), 2, "uu.");
  z.entries[0].data = p;
  e = torch_error(z);
  EXPECT_NE(e.find("a dict key is the empty string, which tensor 'x' is named under"), std::string::npos) << e;
  // {1: tensor, '1': tensor}: both named '1'.
  p = tensor_pickle(3, 4);
  const size_t key = p.find(pstr("w")), value = key + 6, end = p.rfind("u.");
  const std::string tensor = p.substr(value, end - value);
  p = p.substr(0, key) + "K\x01" + tensor + pstr("1") + tensor + "u.";
  z.entries[0].data = p;
  e = torch_error(z);
  EXPECT_NE(e.find("a second tensor is named '1'"), std::string::npos) << e;
}

TEST(TorchSave, ZipCrcOfDataPklAndSmallEntriesCheckedAtOpen) {
  ZipFile z;
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4)}, {"a/data/0", std::string(16, '\0')}};
  z.entries[0].wrong_crc = true;
  std::string e = torch_error(z);
  EXPECT_NE(e.find("entry 'a/data.pkl'"), std::string::npos) << e;
  EXPECT_NE(e.find("CRC-32 recorded in the central directory is 0x"), std::string::npos) << e;
  z.entries[0].wrong_crc = false;
  z.entries[1].wrong_crc = true;
  e = torch_error(z);
  EXPECT_NE(e.find("entry 'a/data/0' (16 bytes): CRC-32"), std::string::npos) << e;
  // A storage above 1 MiB is left to the full pass that reads it (check_storage_crc).
  const uint32_t n = (1u << 18) + 1;
  z.entries = {{"a/data.pkl", tensor_pickle(n, n)}, {"a/data/0", std::string(4 * n, '\2')}};
  z.entries[1].wrong_crc = true;
  const std::string b = z.bytes();
  const auto* bytes = reinterpret_cast<const uint8_t*>(b.data());
  const TorchSaveFile t = parse_torch_save(bytes, b.size(), "t.pt");
  ASSERT_EQ(t.storages.size(), 1u);
  EXPECT_FALSE(t.storages[0].crc_checked);
  e = torch_error_of([&] { check_storage_crc(t, t.storages[0], bytes, "t.pt"); });
  EXPECT_NE(e.find("t.pt: zip, byte "), std::string::npos) << e;
  EXPECT_NE(e.find("entry 'a/data/0' (1048580 bytes)"), std::string::npos) << e;
  z.entries[1].wrong_crc = false;
  const std::string good = z.bytes();
  const TorchSaveFile g = parse_torch_save(reinterpret_cast<const uint8_t*>(good.data()), good.size(), "t.pt");
  check_storage_crc(g, g.storages[0], reinterpret_cast<const uint8_t*>(good.data()), "t.pt");
}

TEST(TorchSave, Float8AndComplexStorages) {  // torch >= 2.1 writes float8; torch 1.13 cannot, so by hand
  ZipFile z;
  z.entries = {{"a/data.pkl", tensor_pickle(4, 4, 0, "Float8_e4m3fnStorage")}, {"a/data/0", "\x38\x40\xb8\x7e"}};
  std::string b = z.bytes();
  TorchSaveFile t = parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.pt");
  ASSERT_EQ(t.storages.size(), 1u);
  EXPECT_EQ(t.storages[0].dtype, DType::F8_E4M3FN);
  EXPECT_EQ(t.storages[0].stored_type, "F8_E4M3");
  z.entries = {{"a/data.pkl", tensor_pickle(2, 2, 0, "ComplexFloatStorage")}, {"a/data/0", std::string(16, '\0')}};
  b = z.bytes();
  t = parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.pt");
  EXPECT_FALSE(t.storages[0].dtype.has_value());
  EXPECT_EQ(t.storages[0].stored_type, "C64");
}

TEST(TorchSave, Zip64RecordsAreRead) {  // as torch writes files above 4 GiB
  ZipFile z;
  z.zip64 = true;
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4, 1)}, {"a/data/0", std::string(16, '\1')}};
  std::string b = z.bytes();
  const TorchSaveFile t = parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.pt");
  ASSERT_EQ(t.storages.size(), 1u);
  EXPECT_EQ(b.substr(t.storages[0].file_offset, 16), std::string(16, '\1'));
  // A zip64 end record whose entry count disagrees with the 32-bit record's real value.
  b[b.size() - 12] = 1, b[b.size() - 11] = 0, b[b.size() - 14] = 1, b[b.size() - 13] = 0;
  EXPECT_NE(torch_error_of([&] { read_zip_directory(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.zip"); })
                .find("zip64 end record's entry count 2 disagrees with the end record's 1"),
            std::string::npos);
}

TEST(TorchSave, TensorSubclassesThroughRebuildFromType) {
  // {'w': _rebuild_from_type_v2(_rebuild_tensor_v2, torch.nn.parameter.Parameter, (args...), {})}, as
  // torch writes a tensor subclass or a tensor with attributes; and the same with a callable outside
  // the tensor rebuilds.
  const std::string args = "((" + pstr("storage") + "ctorch\nFloatStorage\n" + pstr("0") + pstr("cpu") + pint(4) + "tQ" + pint(0) +
                           pint(4) + "\x85" + pint(1) + "\x85\x89" "ccollections\nOrderedDict\n)Rt";
  const std::string head = "\x80\x02}(" + pstr("w") + "ctorch._tensor\n_rebuild_from_type_v2\n(";
  ZipFile z;
  z.entries = {{"a/data.pkl", head + "ctorch._utils\n_rebuild_tensor_v2\nctorch.nn.parameter\nParameter\n" + args + "}tRu."},
               {"a/data/0", std::string(16, '\0')}};
  std::string b = z.bytes();
  const TorchSaveFile t = parse_torch_save(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.pt");
  ASSERT_EQ(t.tensors.size(), 1u);
  EXPECT_EQ(t.tensors[0].shape, (std::vector<uint64_t>{4}));
  z.entries[0].data = head + "ccollections\nOrderedDict\nctorch\nTensor\n" + args + "}tRu.";
  EXPECT_NE(torch_error(z).find("expects (torch._utils._rebuild_tensor_v2, type, arguments, state)"), std::string::npos);
}

TEST(TorchSave, StorageShorterThanItsTensor) {
  ZipFile z;
  z.entries = {{"a/data.pkl", tensor_pickle(10, 4)}, {"a/data/0", std::string(16, '\0')}};
  const std::string e = torch_error(z);
  EXPECT_NE(e.find("tensor 'w' reaches element 9 of storage a/data/0, which holds 4 elements"), std::string::npos) << e;
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4, 2)}, {"a/data/0", std::string(16, '\0')}};
  EXPECT_NE(torch_error(z).find("reaches element 4"), std::string::npos);
}

TEST(TorchSave, StorageEntriesMustMatchTheirIds) {
  ZipFile z;
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4)}, {"a/data/0", std::string(12, '\0')}};
  EXPECT_NE(torch_error(z).find("storage a/data/0 holds 12 bytes; data.pkl says 4 elements of FloatStorage"), std::string::npos);
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4)}};
  EXPECT_NE(torch_error(z).find("its storage a/data/0 is not in the archive"), std::string::npos);
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4)}, {"a/data/0", std::string(16, '\0'), 8}};
  EXPECT_NE(torch_error(z).find("storage a/data/0 is compressed (method 8)"), std::string::npos);
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4, 0, "os.system")}, {"a/data/0", std::string(16, '\0')}};
  EXPECT_NE(torch_error(z).find("global 'torch.os.system' is not on the allow-list"), std::string::npos);
}

TEST(TorchSave, ArchivesThatAreNotTorchSaveFiles) {
  ZipFile z;
  z.entries = {{"a/data.pkl", tensor_pickle(3, 4)}, {"a/data/0", std::string(16, '\0')}, {"a/byteorder", "big"}};
  EXPECT_NE(torch_error(z).find("only little-endian"), std::string::npos);
  z.entries = {{"a/constants.pkl", "x"}, {"a/data.pkl", "x"}};
  EXPECT_NE(torch_error(z).find("TorchScript archive"), std::string::npos);
  z.entries = {{"a/other", "x"}};
  EXPECT_NE(torch_error(z).find("without an ARCHIVE/data.pkl"), std::string::npos);
  z.entries = {{"a/data.pkl", "x"}, {"b/data.pkl", "x"}};
  EXPECT_NE(torch_error(z).find("two data.pkl entries"), std::string::npos);
}

TEST(Zip, OverlapsPastTheEndAndZip64Lies) {
  ZipFile z;
  z.entries = {{"a/data.pkl", "xxxx", 0, 40}, {"a/data/0", "yyyy"}};  // claims 40 bytes: over the next entry
  EXPECT_NE(torch_error(z).find("entry 'a/data/0' overlaps entry 'a/data.pkl'"), std::string::npos);
  z.entries = {{"a/data.pkl", "xxxx", 0, 4000}};
  EXPECT_NE(torch_error(z).find("run past the central directory"), std::string::npos);
  z.entries = {{"a/data.pkl", "xxxx", 0, 0xFFFFFFFF - 1}};
  EXPECT_NE(torch_error(z).find("run past the central directory"), std::string::npos);
  // A size of 0xFFFFFFFF without a zip64 record.
  std::string b = ZipFile{{{"a/data.pkl", "xxxx"}}}.bytes();
  const size_t cd = b.size() - 22 - 46 - 10;
  std::memset(&b[cd + 20], 0xFF, 8);
  auto err = [](const std::string& bytes) {
    return torch_error_of([&] { read_zip_directory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.zip"); });
  };
  EXPECT_NE(err(b).find("has no zip64 extra record"), std::string::npos);
  // An end record that says zip64 with no locator; one whose entry count lies.
  b = ZipFile{{{"a/data.pkl", "xxxx"}}}.bytes();
  std::string lie = b;
  std::memset(&lie[lie.size() - 12], 0xFF, 4);
  EXPECT_NE(err(lie).find("no zip64 locator"), std::string::npos);
  lie = b;
  lie[lie.size() - 12] = 100;  // entries total
  lie[lie.size() - 14] = 100;  // entries on this disk
  EXPECT_NE(err(lie).find("end record claims 100 entries"), std::string::npos);
  EXPECT_NE(err(b.substr(0, b.size() - 5)).find("no end of central directory record"), std::string::npos);
  // Every truncation of a real file is a clear error.
  const auto f = read_all(kDir + "/tensor.pt");
  for (size_t n = 0; n < f.size(); ++n) torch_error_of([&] { parse_torch_save(f.data(), n, "tensor.pt"); });
}

// DeepSpeed ZeRO files whose structure lies: each refused with the entry named (hand-made archives; the
// fixtures of tests/fixtures/zero cover the well-formed stages).
std::string zero_error(const std::string& pickle, bool optim) {
  ZipFile z;
  z.entries = {{"a/data.pkl", pickle}, {"a/byteorder", "little"}};
  const std::string b = z.bytes();
  const auto* p = reinterpret_cast<const uint8_t*>(b.data());
  return torch_error_of([&] {
    if (optim) parse_zero_optim_states(p, b.size(), "o.pt", false);
    else parse_zero_model_states(p, b.size(), "m.pt");
  });
}
// A protocol-2 dict of (key, pickled value) pairs.
std::string pdict(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = "}(";
  for (const auto& [k, v] : items) out += pstr(k) + v;
  return out + "u";
}
std::string ptuple(const std::vector<uint32_t>& v) {
  std::string out = "(";
  for (uint32_t x : v) out += pint(x);
  return out + "t";
}
std::string pickled(const std::string& value) { return "\x80\x02" + value + "."; }

TEST(ZeroFiles, LyingStructureIsNamed) {
  EXPECT_NE(zero_error(pickled(pdict({})), false).find("m.pt: no param_shapes entry"), std::string::npos);
  EXPECT_NE(zero_error(pickled(pdict({{"param_shapes", pint(3)}})), false).find("param_shapes is a int, not a list of dicts"), std::string::npos);
  EXPECT_NE(zero_error(pickled(pdict({{"param_shapes", "](" + pdict({{"w", pstr("x")}}) + "e"}})), false).find("param_shapes: 'w' has no shape"),
            std::string::npos);
  const std::string huge = ptuple({0x7FFFFFFFu, 0x7FFFFFFFu, 0x7FFFFFFFu});  // BININT is signed
  EXPECT_NE(zero_error(pickled(pdict({{"param_shapes", "](" + pdict({{"w", huge}}) + "e"}})), false).find("'w': its element count overflows"),
            std::string::npos);
  EXPECT_NE(zero_error(pickled(pdict({})), true).find("o.pt: no optimizer_state_dict entry"), std::string::npos);
  auto osd = [](const std::vector<std::pair<std::string, std::string>>& items) { return pickled(pdict({{"optimizer_state_dict", pdict(items)}})); };
  EXPECT_NE(zero_error(osd({}), true).find("has no zero_stage"), std::string::npos);
  EXPECT_NE(zero_error(osd({{"zero_stage", pint(7)}}), true).find("zero_stage is 7 (expected 1, 2 or 3)"), std::string::npos);
  EXPECT_NE(zero_error(osd({{"zero_stage", pint(2)}}), true).find("partition_count is missing"), std::string::npos);
  EXPECT_NE(zero_error(osd({{"zero_stage", pint(2)}, {"partition_count", pint(2)}}), true).find("single_partition_of_fp32_groups is missing"),
            std::string::npos);
  // A group that is not a tensor; stage 3 given as DeepSpeed pickles its enum: getattr(ZeroStageEnum, "weights").
  const std::string enum3 = "c__builtin__\ngetattr\n(cdeepspeed.runtime.zero.config\nZeroStageEnum\n" + pstr("weights") + "tR";
  EXPECT_NE(zero_error(osd({{"zero_stage", enum3}, {"partition_count", pint(2)}, {"fp32_flat_groups", "](" + pstr("x") + "e"}}), true)
                .find("fp32_flat_groups[0] is not a tensor"),
            std::string::npos);
  // A global outside the allow-list (a user's own class as client state) is refused by name.
  EXPECT_NE(zero_error(pickled(pdict({{"client", "cos\nsystem\n"}})), true).find("global 'os.system' is not on the allow-list"), std::string::npos);
}

}  // namespace
}  // namespace tmorph
