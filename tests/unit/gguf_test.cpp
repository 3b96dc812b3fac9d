// GGUF reading: every header field, KV and tensor info of files written by llama.cpp's gguf-py and by
// ollama, checked against gguf-py's own reading; and one malformed file per failure mode.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/file_identity.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

const std::string kFixtures = TM_FIXTURES_DIR;

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

// Compares one parsed file with one expected.json record set (header, metadata, tensors).
void expect_matches(const GgufFile& f, const nlohmann::json& header, const nlohmann::json& metadata,
                    const nlohmann::json& tensors) {
  EXPECT_EQ(f.version, header["version"].get<uint32_t>());
  EXPECT_EQ(f.tensor_count, header["tensor_count"].get<uint64_t>());
  EXPECT_EQ(f.kv_count, header["kv_count"].get<uint64_t>());
  EXPECT_EQ(f.alignment, header["alignment"].get<uint32_t>());
  EXPECT_EQ(f.data_section_offset, header["data_section_offset"].get<uint64_t>());
  ASSERT_EQ(f.kvs.size(), metadata.size());
  for (size_t i = 0; i < f.kvs.size(); ++i) {
    const auto& want = metadata[i];
    const auto& kv = f.kvs[i];
    EXPECT_EQ(kv.key, want["key"]);
    EXPECT_EQ(kv.offset, want["offset"].get<uint64_t>()) << kv.key;
    EXPECT_EQ(gguf_type_name(kv.type), want["type"].get<std::string>()) << kv.key;
    if (kv.type == GgufType::ARRAY) {
      EXPECT_EQ(gguf_type_name(kv.element_type), want["element_type"].get<std::string>()) << kv.key;
      EXPECT_EQ(kv.count, want["count"].get<uint64_t>()) << kv.key;
    }
    EXPECT_EQ(kv.value, want["value"]) << kv.key;
  }
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const auto& t = f.tensors[i];
    const auto& want = tensors[i];
    EXPECT_EQ(t.name, want["name"]);
    EXPECT_EQ(t.type->name, want["ggml_type"].get<std::string>()) << t.name;
    EXPECT_EQ(t.type->id, want["ggml_type_id"].get<uint32_t>()) << t.name;
    EXPECT_EQ(t.type->block_size, want["block_size"].get<uint32_t>()) << t.name;
    EXPECT_EQ(t.type->type_size, want["type_size"].get<uint32_t>()) << t.name;
    EXPECT_EQ(t.ne, want["ne"].get<std::vector<uint64_t>>()) << t.name;
    EXPECT_EQ(t.shape, want["numpy_shape"].get<std::vector<uint64_t>>()) << t.name;
    EXPECT_EQ(t.elements, want["n_elements"].get<uint64_t>()) << t.name;
    EXPECT_EQ(t.bytes, want["n_bytes"].get<uint64_t>()) << t.name;
    EXPECT_EQ(t.offset, want["offset_in_data_section"].get<uint64_t>()) << t.name;
    EXPECT_EQ(t.data_offset, want["data_offset"].get<uint64_t>()) << t.name;
    EXPECT_EQ(t.info_offset, want["tensor_info_offset"].get<uint64_t>()) << t.name;
  }
}

TEST(Gguf, MatchesGgufPyOnTheMixedQuantFixture) {
  if (!std::filesystem::is_directory(kFixtures)) GTEST_SKIP() << "SKIPPED: reference fixtures not found at " << kFixtures;
  const auto expected = load_json(kFixtures + "/gguf/tiny-mixed.expected.json");
  const MappedFile file(kFixtures + "/gguf/tiny-mixed.gguf");
  const GgufFile f = parse_gguf(file.data(), file.size(), file.path());
  expect_matches(f, expected["header"], expected["metadata"], expected["tensors"]);
}

TEST(Gguf, SummaryArraysKeepEverythingButTheArrayValues) {
  if (!std::filesystem::is_directory(kFixtures)) GTEST_SKIP() << "SKIPPED: reference fixtures not found at " << kFixtures;
  const MappedFile file(kFixtures + "/gguf/tiny-mixed.gguf");
  const GgufFile full = parse_gguf(file.data(), file.size(), file.path());
  const GgufFile summary = parse_gguf(file.data(), file.size(), file.path(), GgufArrays::Summary);
  ASSERT_EQ(full.kvs.size(), summary.kvs.size());
  int arrays = 0;
  for (size_t i = 0; i < full.kvs.size(); ++i) {
    const GgufKv &a = full.kvs[i], &b = summary.kvs[i];
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.type, b.type);
    if (a.type == GgufType::ARRAY) {
      ++arrays;
      EXPECT_EQ(a.count, b.count) << a.key;
      EXPECT_EQ(a.element_type, b.element_type) << a.key;
      EXPECT_TRUE(b.value.is_null()) << a.key;
    } else {
      EXPECT_EQ(a.value, b.value) << a.key;
    }
  }
  EXPECT_GT(arrays, 0);
  ASSERT_EQ(full.tensors.size(), summary.tensors.size());
  EXPECT_EQ(full.data_section_offset, summary.data_section_offset);
  for (size_t i = 0; i < full.tensors.size(); ++i) EXPECT_EQ(full.tensors[i].data_offset, summary.tensors[i].data_offset);
}

TEST(Gguf, MatchesGgufPyOnEachShardOfTheSplitSet) {
  if (!std::filesystem::is_directory(kFixtures)) GTEST_SKIP() << "SKIPPED: reference fixtures not found at " << kFixtures;
  const auto expected = load_json(kFixtures + "/gguf/split/tiny-split.expected.json");
  for (const auto& shard : expected["shards"]) {
    const MappedFile file(kFixtures + "/gguf/split/" + shard["header"]["file"].get<std::string>());
    const GgufFile f = parse_gguf(file.data(), file.size(), file.path());
    expect_matches(f, shard["header"], shard["metadata"], shard["tensors"]);
    ASSERT_NE(f.find("split.count"), nullptr);
  }
}

TEST(Gguf, ReadsOllamasTestModel) {
  if (!std::filesystem::is_directory(kFixtures)) GTEST_SKIP() << "SKIPPED: reference fixtures not found at " << kFixtures;
  const MappedFile file(kFixtures + "/llama-2-tiny-random.gguf");
  const GgufFile f = parse_gguf(file.data(), file.size(), file.path());
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.tensors.size(), 12u);
  ASSERT_NE(f.find("general.architecture"), nullptr);
  EXPECT_EQ(f.find("general.architecture")->value, "llama");
  for (const auto& t : f.tensors) EXPECT_TRUE(t.type->dense.has_value()) << t.name;  // F16/F32 only
}

// A small GGUF writer for the malformed corpus.
struct Writer {
  std::vector<uint8_t> b;
  template <class T>
  Writer& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Writer& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
};

// magic, version, counts, one UINT32 KV, then tensor infos written by `infos`, padding and data.
std::vector<uint8_t> gguf_with(uint64_t tensors, const std::function<void(Writer&)>& infos, uint64_t data_bytes,
                               uint32_t version = 3, uint64_t kv_count = 1) {
  Writer w;
  w.b = {'G', 'G', 'U', 'F'};
  w.put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kv_count);
  w.str("general.alignment").put<uint32_t>(4).put<uint32_t>(32);
  infos(w);
  while (w.b.size() % 32) w.b.push_back(0);
  w.b.resize(w.b.size() + data_bytes, 0);
  return w.b;
}

void f32_info(Writer& w, const std::string& name, uint64_t ne0, uint64_t offset, uint32_t type = 0) {
  w.str(name).put<uint32_t>(1).put<uint64_t>(ne0).put<uint32_t>(type).put<uint64_t>(offset);
}

std::string error_in_mode(const std::vector<uint8_t>& f, GgufArrays arrays) {
  try {
    parse_gguf(f.data(), f.size(), "t.gguf", arrays);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

// The error, which must be the same whether arrays are built or only validated.
std::string gguf_error_of(const std::vector<uint8_t>& f) {
  const std::string built = error_in_mode(f, GgufArrays::Values);
  EXPECT_EQ(built, error_in_mode(f, GgufArrays::Summary));
  return built;
}

TEST(Gguf, AWellFormedSmallFileParses) {
  const auto f = gguf_with(2, [](Writer& w) { f32_info(w, "a", 8, 0), f32_info(w, "b", 4, 32); }, 64);
  const GgufFile g = parse_gguf(f.data(), f.size(), "t.gguf");
  ASSERT_EQ(g.tensors.size(), 2u);
  EXPECT_EQ(g.tensors[1].data_offset, g.data_section_offset + 32);
}

// llama.cpp's vocabulary-only files (its models/ggml-vocab-*.gguf, written by gguf-py with vocab_only): v3,
// no tensors, and the file ends right after the last KV value, without the zero padding that would align
// the (empty) data section: 188 bytes, 28 past a multiple of 32.
std::vector<uint8_t> vocab_only_gguf() {
  Writer w;
  w.b = {'G', 'G', 'U', 'F'};
  w.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(3);
  w.str("general.architecture").put<uint32_t>(8).str("llama");
  w.str("tokenizer.ggml.model").put<uint32_t>(8).str("llama");
  w.str("tokenizer.ggml.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(3).str("<s>").str("a").str("b");
  return w.b;
}

// Before the fix the parser accepted such a file but put its data section past the end (192 > 188); the
// index then hashed "the bytes before the data section", found the file too short and reported it as
// "changed while it was being indexed" (exit 6 from info and stats).
TEST(Gguf, AVocabularyOnlyFileEndingAfterItsKeyValuesParses) {
  const std::vector<uint8_t> exact = vocab_only_gguf();
  ASSERT_EQ(exact.size(), 188u);  // no padding: the aligned start (192) lies past the end
  for (const size_t size : {188, 190, 192}) {  // no padding, part of it, all of it
    std::vector<uint8_t> f = exact;
    f.resize(size, 0);
    for (const GgufArrays arrays : {GgufArrays::Values, GgufArrays::Summary}) {
      const GgufFile g = parse_gguf(f.data(), f.size(), "v.gguf", arrays);
      EXPECT_EQ(g.tensor_count, 0u);
      EXPECT_TRUE(g.tensors.empty());
      ASSERT_EQ(g.kvs.size(), 3u);
      EXPECT_EQ(g.find("tokenizer.ggml.model")->value, "llama");
      EXPECT_EQ(g.find("tokenizer.ggml.tokens")->count, 3u);
      EXPECT_EQ(g.data_section_offset, size) << size << "-byte file";  // empty, at the end
    }
  }
  // The index's own check: the file's identity over the bytes before its data section can be taken.
  const auto path = std::filesystem::temp_directory_path() / ("tm-gguf-vocab-" + std::to_string(::getpid()) + ".gguf");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(exact.data()), static_cast<std::streamsize>(exact.size()));
  const MappedFile file(path.string());
  const GgufFile g = parse_gguf(file.data(), file.size(), file.path(), GgufArrays::Summary);
  const auto id = file_identity(path.string(), g.data_section_offset);
  std::filesystem::remove(path);
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->size, 188u);
}

// GGUF v1 (llama.cpp, August 2023; its reader dropped it later): the layout of v2 with 32-bit tensor and KV
// counts, string lengths, array counts and dimensions, and only the value types 0 to 9. Written byte by
// byte here (no Debian tool writes v1): the same KVs and tensors as a v3 file, which must parse the same.
struct GgufV1Writer {
  Writer w;
  GgufV1Writer& str(const std::string& s) {
    w.put<uint32_t>(static_cast<uint32_t>(s.size()));
    w.b.insert(w.b.end(), s.begin(), s.end());
    return *this;
  }
};

std::vector<uint8_t> gguf_v1_and_v3_twin(bool v1) {
  Writer w;
  auto str = [&](const std::string& s) {
    if (v1) w.put<uint32_t>(static_cast<uint32_t>(s.size()));
    else w.put<uint64_t>(s.size());
    w.b.insert(w.b.end(), s.begin(), s.end());
  };
  auto count = [&](uint64_t n) {
    if (v1) w.put<uint32_t>(static_cast<uint32_t>(n));
    else w.put<uint64_t>(n);
  };
  w.b = {'G', 'G', 'U', 'F'};
  w.put<uint32_t>(v1 ? 1 : 3);
  count(2), count(3);
  str("general.architecture"), w.put<uint32_t>(8), str("llama");
  str("tokenizer.ggml.tokens"), w.put<uint32_t>(9).put<uint32_t>(8), count(2), str("<s>"), str("hi");
  str("llama.rope.freq_base"), w.put<uint32_t>(6).put<float>(10000.0f);
  str("w"), w.put<uint32_t>(2), count(4), count(2), w.put<uint32_t>(0).put<uint64_t>(0);      // F32 [2, 4]
  str("q"), w.put<uint32_t>(1), count(32), w.put<uint32_t>(8).put<uint64_t>(32);             // Q8_0 [32]
  while (w.b.size() % 32) w.b.push_back(0);
  for (int i = 0; i < 8; ++i) w.put<float>(static_cast<float>(i) - 2.5f);
  w.b.resize(w.b.size() + 34, 0x11);
  return w.b;
}

TEST(Gguf, AVersion1FileReadsAsItsVersion3Twin) {
  const auto one = gguf_v1_and_v3_twin(true), three = gguf_v1_and_v3_twin(false);
  for (const GgufArrays arrays : {GgufArrays::Values, GgufArrays::Summary}) {
    const GgufFile a = parse_gguf(one.data(), one.size(), "v1.gguf", arrays);
    const GgufFile b = parse_gguf(three.data(), three.size(), "v3.gguf", arrays);
    EXPECT_EQ(a.version, 1u);
    ASSERT_EQ(a.kvs.size(), b.kvs.size());
    for (size_t i = 0; i < a.kvs.size(); ++i) {
      EXPECT_EQ(a.kvs[i].key, b.kvs[i].key);
      EXPECT_EQ(a.kvs[i].value, b.kvs[i].value) << a.kvs[i].key;
      EXPECT_EQ(a.kvs[i].count, b.kvs[i].count) << a.kvs[i].key;
    }
    ASSERT_EQ(a.tensors.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
      EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape);
      EXPECT_EQ(a.tensors[i].type, b.tensors[i].type);
      EXPECT_EQ(a.tensors[i].bytes, b.tensors[i].bytes);
      EXPECT_EQ(a.tensors[i].data_offset % 32, 0u);
    }
    EXPECT_EQ(a.tensors[0].shape, (std::vector<uint64_t>{2, 4}));
    float first = 0;
    std::memcpy(&first, one.data() + a.tensors[0].data_offset, 4);
    EXPECT_EQ(first, -2.5f);
    EXPECT_EQ(a.find("llama.rope.freq_base")->value, 10000.0);
  }
}

TEST(Gguf, Version1MalformationsAreNamed) {
  GgufV1Writer wide_type;  // UINT64 (type 10) arrived with v2
  wide_type.w.b = {'G', 'G', 'U', 'F'};
  wide_type.w.put<uint32_t>(1).put<uint32_t>(0).put<uint32_t>(1);
  wide_type.str("k").w.put<uint32_t>(10).put<uint64_t>(7);
  EXPECT_NE(gguf_error_of(wide_type.w.b).find("at byte 21: key 'k' has unknown value type 10 (GGUF v1 defines types 0 to 9)"),
            std::string::npos)
      << gguf_error_of(wide_type.w.b);
  GgufV1Writer long_string;  // a 32-bit length past the end
  long_string.w.b = {'G', 'G', 'U', 'F'};
  long_string.w.put<uint32_t>(1).put<uint32_t>(0).put<uint32_t>(1).put<uint32_t>(0xFFFFFFF0u);
  long_string.w.b.resize(40, 0);
  EXPECT_NE(gguf_error_of(long_string.w.b).find("at byte 16: KV key: string length 4294967280 runs past the end"), std::string::npos)
      << gguf_error_of(long_string.w.b);
  GgufV1Writer many_kvs;
  many_kvs.w.b = {'G', 'G', 'U', 'F'};
  many_kvs.w.put<uint32_t>(1).put<uint32_t>(0).put<uint32_t>(0xFFFFFFFFu);
  many_kvs.w.b.resize(64, 0);
  EXPECT_NE(gguf_error_of(many_kvs.w.b).find("at byte 12: kv_count 4294967295 cannot fit"), std::string::npos)
      << gguf_error_of(many_kvs.w.b);
  GgufV1Writer big_array;
  big_array.w.b = {'G', 'G', 'U', 'F'};
  big_array.w.put<uint32_t>(1).put<uint32_t>(0).put<uint32_t>(1);
  big_array.str("k").w.put<uint32_t>(9).put<uint32_t>(8).put<uint32_t>(1000);
  EXPECT_NE(gguf_error_of(big_array.w.b).find("ARRAY of 1000 STRING cannot fit"), std::string::npos) << gguf_error_of(big_array.w.b);
}

TEST(Gguf, EveryMalformationIsAPreciseError) {
  struct Case {
    std::vector<uint8_t> file;
    std::string expected;
  };
  auto one = [](uint64_t ne0, uint64_t offset, uint32_t type, uint64_t data) {
    return gguf_with(1, [=](Writer& w) { f32_info(w, "a", ne0, offset, type); }, data);
  };
  std::vector<uint8_t> bad_magic = one(8, 0, 0, 32);
  bad_magic[0] = 'X';
  std::vector<uint8_t> truncated = gguf_with(0, [](Writer&) {}, 0);
  truncated.resize(40);  // inside the first KV key
  Writer huge_string;
  huge_string.b = {'G', 'G', 'U', 'F'};
  huge_string.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).put<uint64_t>(uint64_t{1} << 60);
  huge_string.b.resize(64, 0);
  Writer huge_array;
  huge_array.b = {'G', 'G', 'U', 'F'};
  huge_array.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 40);
  Writer bad_kv_type;
  bad_kv_type.b = {'G', 'G', 'U', 'F'};
  bad_kv_type.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(13).put<uint32_t>(0);
  Writer bad_bool;
  bad_bool.b = {'G', 'G', 'U', 'F'};
  bad_bool.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(7).put<uint8_t>(2);
  Writer bad_bool_in_array;  // ARRAY of 3 BOOL: 1, 0, 2
  bad_bool_in_array.b = {'G', 'G', 'U', 'F'};
  bad_bool_in_array.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(9).put<uint32_t>(7).put<uint64_t>(3);
  bad_bool_in_array.put<uint8_t>(1).put<uint8_t>(0).put<uint8_t>(2);
  Writer long_string_in_array;  // ARRAY of 2 STRING, the second one's length past the end
  long_string_in_array.b = {'G', 'G', 'U', 'F'};
  long_string_in_array.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2);
  long_string_in_array.str("ok").put<uint64_t>(1000).b.resize(long_string_in_array.b.size() + 40, 0);
  Writer short_numbers;  // ARRAY of 100 UINT32 with 8 bytes of elements present
  short_numbers.b = {'G', 'G', 'U', 'F'};
  short_numbers.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(100);
  short_numbers.put<uint64_t>(0);
  Writer dup_key;
  dup_key.b = {'G', 'G', 'U', 'F'};
  dup_key.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(2).str("k").put<uint32_t>(0).put<uint8_t>(1).str("k").put<uint32_t>(0).put<uint8_t>(1);
  Writer bad_alignment;
  bad_alignment.b = {'G', 'G', 'U', 'F'};
  bad_alignment.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(24);
  // Found by tests/fuzz/fuzz_gguf: keys and tensor names that are not UTF-8 made every JSON output of the
  // checkpoint throw (info/ls/stats --json exited 70).
  Writer latin1_key;
  latin1_key.b = {'G', 'G', 'U', 'F'};
  latin1_key.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("caf\xe9").put<uint32_t>(0).put<uint8_t>(1);
  // A vocabulary-only file cut inside its last value, and a file with a tensor cut right after its infos
  // (before the padding and data), stay refused.
  std::vector<uint8_t> vocab_cut = vocab_only_gguf();
  vocab_cut.resize(vocab_cut.size() - 1);
  std::vector<uint8_t> infos_only = gguf_with(1, [](Writer& w) { f32_info(w, "a", 8, 0); }, 32);
  infos_only.resize(24 + 33 + 33);  // header, the alignment KV, the tensor info
  Writer deep;
  deep.b = {'G', 'G', 'U', 'F'};
  deep.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(9);
  for (int i = 0; i < 9; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.b.resize(deep.b.size() + 64, 0);

  const Case cases[] = {
      {{'G', 'G'}, "magic needs 4 bytes"},
      {bad_magic, "at byte 0: not a GGUF file"},
      {gguf_with(0, [](Writer&) {}, 0, 4), "at byte 4: GGUF version 4 is not supported (1, 2 and 3 are)"},
      {gguf_with(0, [](Writer&) {}, 0, 0), "GGUF version 0 is not supported"},
      {truncated, "runs past the end of the file"},
      {gguf_with(uint64_t{1} << 50, [](Writer&) {}, 0), "tensor_count 1125899906842624 cannot fit"},
      {gguf_with(0, [](Writer&) {}, 0, 3, uint64_t{1} << 40), "kv_count 1099511627776 cannot fit"},
      {huge_string.b, "string length 1152921504606846976 runs past the end of the file"},
      {huge_array.b, "ARRAY of 1099511627776 STRING cannot fit"},
      {bad_kv_type.b, "key 'k' has unknown value type 13"},
      {bad_bool.b, "BOOL value is 2, expected 0 or 1"},
      {bad_bool_in_array.b, "BOOL value is 2, expected 0 or 1"},
      {long_string_in_array.b, "string length 1000 runs past the end of the file"},
      {short_numbers.b, "ARRAY of 100 UINT32 cannot fit"},
      {dup_key.b, "key 'k' appears twice"},
      {bad_alignment.b, "general.alignment 24 is not a power of two"},
      {deep.b, "arrays nested deeper than 8"},
      {one(8, 0, 77, 32), "tensor 'a' has unknown ggml type 77"},
      {one(33, 0, 2, 64), "row length 33 is not a multiple of Q4_0's block of 32"},
      {one(8, 4, 0, 64), "offset 4 is not a multiple of the alignment 32"},
      {one(8, 0, 0, 16), "(32 bytes at data offset 0) runs past the end of the file (data section holds 16 bytes)"},
      {one(8, uint64_t{1} << 63, 0, 32), "runs past the end of the file"},
      {one(uint64_t{1} << 63, 0, 0, 32), "element count overflows"},
      {gguf_with(2, [](Writer& w) { f32_info(w, "a", 8, 0), f32_info(w, "a", 8, 32); }, 64), "tensor 'a' appears twice"},
      {gguf_with(2, [](Writer& w) { f32_info(w, "a", 16, 0), f32_info(w, "b", 8, 32); }, 96), "tensor 'b' overlaps tensor 'a'"},
      {gguf_with(1, [](Writer& w) { w.str("a").put<uint32_t>(5); }, 32), "has 5 dimensions (1 to 4 allowed)"},
      {latin1_key.b, "at byte 24: KV key 'caf\\xE9' is not valid UTF-8"},
      {gguf_with(1, [](Writer& w) { f32_info(w, "w\xff", 8, 0); }, 32), "tensor name 'w\\xFF' is not valid UTF-8"},
      {vocab_cut, "at byte 179: STRING value: string length 1 runs past the end of the file (size 187)"},
      {infos_only, "at byte 90: the data section of 1 tensor(s) would start at 96 (after the tensor infos, padded to the "
                   "alignment 32), past the end of the file (size 90)"},
  };
  for (const auto& c : cases) {
    const std::string msg = gguf_error_of(c.file);
    EXPECT_EQ(msg.rfind("t.gguf: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << "wanted: " << c.expected << "\ngot:    " << msg;
  }
}

}  // namespace
}  // namespace tmorph
