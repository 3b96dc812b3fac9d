// The limits every JSON document from outside is parsed with, and the UTF-8 check and escaping that keep
// text from files printable.
#include <gtest/gtest.h>

#include "core/json_bounded.h"
#include "core/utf8.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

std::string error_of(std::string_view text, const JsonLimits& limits = {}) {
  try {
    parse_json_bounded(text, "doc.json", limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return e.what();
  }
  ADD_FAILURE() << "expected an error for " << text.substr(0, 80);
  return "";
}

TEST(JsonBounded, ParsesTheSameDocumentAsNlohmann) {
  const std::string text = R"({"a":[1,-2,3.5,"x",true,null,{"b":{}}],"c":{"d":[[]],"e":18446744073709551615}})";
  EXPECT_EQ(parse_json_bounded(text, "doc.json"), nlohmann::json::parse(text));
  EXPECT_EQ(parse_json_bounded("  7 ", "doc.json"), 7);
}

TEST(JsonBounded, RefusesWhatWouldMisleadOrExhaust) {
  EXPECT_EQ(error_of(std::string("{}\0{\"x\":1}", 10)), "doc.json: holds a NUL byte at offset 2; JSON text has none (padding must be spaces)");
  EXPECT_EQ(error_of(R"({"a":1,"a":2})"), "doc.json: key 'a' appears twice in one object");
  EXPECT_EQ(error_of(R"({"o":{"k":1,"k":1}})"), "doc.json: key 'k' appears twice in one object");
  EXPECT_NE(error_of("{\"a\":").find("doc.json: not valid JSON: "), std::string::npos);
  EXPECT_NE(error_of("\"\xff\"").find("doc.json: not valid JSON: "), std::string::npos);  // not UTF-8
  EXPECT_NE(error_of("[1] 2").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of(std::string(65, '[') + std::string(65, ']')), "doc.json: nested deeper than 64 levels");
  EXPECT_NO_THROW(parse_json_bounded(std::string(64, '[') + std::string(64, ']'), "doc.json"));
  JsonLimits shallow;
  shallow.max_depth = 2;
  shallow.duplicate_key_message = [](const std::string& k, size_t depth) { return k + "@" + std::to_string(depth); };
  EXPECT_EQ(error_of(R"({"a":{"b":[]}})", shallow), "doc.json: nested deeper than 2 levels");
  EXPECT_EQ(error_of(R"({"a":{"b":1,"b":2}})", shallow), "doc.json: b@2");
}

TEST(JsonBounded, BriefDescriptionsStayShort) {
  EXPECT_EQ(json_brief(nlohmann::json::parse(R"([1,2,"x"])")), R"([1, 2, "x"])");
  EXPECT_EQ(json_brief(nlohmann::json::parse("[[1]]")), "an array of 1 values");
  EXPECT_EQ(json_brief(nlohmann::json::parse(R"({"a":1,"b":2})")), "an object of 2 keys");
  EXPECT_EQ(json_brief(nlohmann::json(std::string(100, 'z'))), "\"" + std::string(48, 'z') + "\"...");
  EXPECT_EQ(json_brief(nlohmann::json(std::string("a\xff"))), "\"a\xEF\xBF\xBD\"");  // U+FFFD, no exception
}

TEST(Utf8, ValidatesAndEscapes) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // é € 😀
  for (const char* bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xC3", "\xFF", "\x80"})
    EXPECT_FALSE(is_valid_utf8(bad)) << bad;  // overlong, surrogate, above U+10FFFF, truncated, stray bytes
  EXPECT_EQ(escape_invalid_utf8("ab\xFF\xFE" "cd"), "ab\\xFF\\xFEcd");
  EXPECT_EQ(escape_invalid_utf8("\xC3\xA9\xC3"), "\xC3\xA9\\xC3");
  EXPECT_EQ(escape_invalid_utf8("ok"), "ok");
}

}  // namespace
}  // namespace tmorph
