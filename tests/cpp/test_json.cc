// Tests for util::Json: construction, typed access, printing, parsing, round trips and errors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "util/json.h"

namespace tessera::util {
namespace {

TEST(Json, ScalarTypes) {
  EXPECT_TRUE(Json().is_null());
  EXPECT_TRUE(Json(true).is_bool());
  EXPECT_TRUE(Json(3).is_int());
  EXPECT_TRUE(Json(int64_t{1} << 40).is_int());
  EXPECT_TRUE(Json(2.5).is_double());
  EXPECT_TRUE(Json("s").is_string());
  EXPECT_EQ(Json(int64_t{1} << 40).as_int(), int64_t{1} << 40);
  EXPECT_EQ(Json(7).as_double(), 7.0);
  EXPECT_EQ(Json(4.0).as_int(), 4);  // integral doubles are accepted as ints
  EXPECT_THROW(Json(4.5).as_int(), JsonError);
  EXPECT_THROW(Json("x").as_int(), JsonError);
  EXPECT_THROW(Json(1).as_string(), JsonError);
  EXPECT_THROW(Json().as_bool(), JsonError);
  // uint64 beyond int64 cannot be an int; it becomes a double rather than wrapping negative.
  Json big(std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(big.is_double());
  EXPECT_GT(big.as_double(), 1e19);
}

TEST(Json, BuildNestedValues) {
  Json j;
  j["name"] = "gemm";
  j["tiles"].push_back(4);
  j["tiles"].push_back(16);
  j["meta"]["ok"] = true;
  EXPECT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 3u);
  EXPECT_EQ(j.at("tiles").size(), 2u);
  EXPECT_EQ(j["tiles"][1].as_int(), 16);
  EXPECT_EQ(j.at("tiles").at(0).as_int(), 4);
  EXPECT_TRUE(j.at("meta").at("ok").as_bool());
  EXPECT_TRUE(j.contains("name"));
  EXPECT_FALSE(j.contains("nope"));
  EXPECT_EQ(j.find("nope"), nullptr);
  EXPECT_THROW(j.at("nope"), JsonError);
  EXPECT_THROW(j.at("tiles").at(2), JsonError);
  EXPECT_EQ(j.get_int("missing", 42), 42);
  EXPECT_EQ(j.get_string("name", ""), "gemm");
  EXPECT_THROW(j.get_int("name", 0), JsonError);  // present with the wrong type
}

TEST(Json, CompactAndIndentedDump) {
  Json j = Json::object({{"b", Json::array({1, 2.5, "x", nullptr, false})}, {"a", 1}});
  // Keys are sorted, so output is deterministic regardless of insertion order.
  EXPECT_EQ(j.dump(), R"({"a":1,"b":[1,2.5,"x",null,false]})");
  EXPECT_EQ(
      j.dump(2),
      "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2.5,\n    \"x\",\n    null,\n    false\n  ]\n}");
  EXPECT_EQ(Json::array().dump(2), "[]");
  EXPECT_EQ(Json::object().dump(2), "{}");
}

TEST(Json, DoublesKeepTheirTypeAndValue) {
  EXPECT_EQ(Json(3.0).dump(), "3.0");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(-2.5e-300).dump(), "-2.5e-300");
  EXPECT_TRUE(Json::parse(Json(3.0).dump()).is_double());
  // Values that need 17 significant digits survive a round trip bit for bit.
  for (double v : {0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, std::numeric_limits<double>::min(),
                   std::numeric_limits<double>::max(), -0.0}) {
    Json back = Json::parse(Json(v).dump());
    ASSERT_TRUE(back.is_double()) << Json(v).dump();
    EXPECT_EQ(back.as_double(), v) << Json(v).dump();
  }
  // JSON has no NaN/Inf: they print as null.
  EXPECT_EQ(Json(std::nan("")).dump(), "null");
  EXPECT_EQ(Json(std::numeric_limits<double>::infinity()).dump(), "null");
}

TEST(Json, IntegersRoundTripExactly) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::max(),
                    std::numeric_limits<int64_t>::min(), int64_t{9007199254740993}}) {
    Json back = Json::parse(Json(v).dump());
    ASSERT_TRUE(back.is_int());
    EXPECT_EQ(back.as_int(), v);
  }
  // Beyond int64: falls back to a double instead of failing or wrapping.
  Json huge = Json::parse("123456789012345678901234567890");
  EXPECT_TRUE(huge.is_double());
  EXPECT_NEAR(huge.as_double(), 1.2345678901234568e29, 1e14);
}

TEST(Json, StringEscapes) {
  std::string s = "quote\" backslash\\ slash/ \b\f\n\r\t ctrl\x01\x1f end";
  Json j(s);
  EXPECT_EQ(j.dump(), R"("quote\" backslash\\ slash/ \b\f\n\r\t ctrl\u0001\u001f end")");
  EXPECT_EQ(Json::parse(j.dump()).as_string(), s);
  EXPECT_EQ(Json::parse(R"("\/")").as_string(), "/");
}

TEST(Json, UnicodeEscapesDecodeToUtf8) {
  EXPECT_EQ(Json::parse(R"("\u00e9")").as_string(), "\xc3\xa9");                // é
  EXPECT_EQ(Json::parse(R"("\u20AC")").as_string(), "\xe2\x82\xac");            // €
  EXPECT_EQ(Json::parse(R"("\ud83d\ude00")").as_string(), "\xf0\x9f\x98\x80");  // U+1F600
  // Raw UTF-8 passes through both ways untouched.
  std::string raw = "caf\xc3\xa9";
  EXPECT_EQ(Json(raw).dump(), "\"caf\xc3\xa9\"");
  EXPECT_EQ(Json::parse(Json(raw).dump()).as_string(), raw);
}

TEST(Json, ParsesDocumentWithWhitespace) {
  Json j = Json::parse(" \n\t{ \"a\" : [ 1 , -2 , 3.5e2 , true , null ] , \"b\" : { } }\r\n ");
  ASSERT_TRUE(j.is_object());
  const auto& a = j.at("a").as_array();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].as_int(), 1);
  EXPECT_EQ(a[1].as_int(), -2);
  EXPECT_TRUE(a[2].is_double());
  EXPECT_EQ(a[2].as_double(), 350.0);
  EXPECT_TRUE(a[3].as_bool());
  EXPECT_TRUE(a[4].is_null());
  EXPECT_TRUE(j.at("b").is_object());
  EXPECT_EQ(j.at("b").size(), 0u);
}

TEST(Json, RoundTripOfNestedDocument) {
  Json j;
  j["schedule"]["tiles"] = Json::array({Json::array({1, 2}), Json::array({64, 16})});
  j["schedule"]["vector"] = 16;
  j["time_ms"] = 0.0123;
  j["name"] = "conv2d \"nchw\"";
  j["empty_list"] = Json::array();
  j["empty_obj"] = Json::object();
  for (int indent : {-1, 0, 2, 4}) {
    Json back = Json::parse(j.dump(indent));
    EXPECT_EQ(back, j) << "indent " << indent;
    EXPECT_EQ(back.dump(), j.dump());
  }
}

TEST(Json, EqualityComparesNumbersByValue) {
  EXPECT_EQ(Json(2), Json(2.0));
  EXPECT_NE(Json(2), Json(2.5));
  EXPECT_NE(Json(1), Json(true));
  EXPECT_NE(Json("1"), Json(1));
  EXPECT_NE(Json::array({1}), Json::array({1, 2}));
  EXPECT_EQ(Json::object({{"a", 1}}), Json::object({{"a", 1.0}}));
  EXPECT_NE(Json::object({{"a", 1}}), Json::object({{"b", 1}}));
}

TEST(Json, DuplicateKeysKeepTheLast) {
  EXPECT_EQ(Json::parse(R"({"a":1,"a":2})").at("a").as_int(), 2);
}

// Every malformed input must be rejected with a message that says where and what.
TEST(Json, ParseErrorsAreReportedWithPosition) {
  struct Case {
    const char* text;
    const char* expect;  // substring of the error message
  };
  const Case cases[] = {
      {"", "line 1, column 1: syntax error while parsing value - unexpected end of input"},
      {"   ", "unexpected end of input"},
      {"{", "expected string literal"},
      {"{\"a\" 1}", "expected ':'"},
      {"{\"a\":1,}", "unexpected '}'; expected string literal"},
      {"[1,]", "unexpected ']'"},
      {"[1 2]", "unexpected number literal; expected ']'"},
      {"{\"a\":1 \"b\":2}", "unexpected string literal; expected '}'"},
      {"tru", "invalid literal; last read: 'tru'"},
      {"nul", "invalid literal; last read: 'nul'"},
      {"01", "line 1, column 2: syntax error while parsing value - unexpected number literal"},
      {"-", "expected digit after '-'"},
      {"1.", "after '.'"},
      {"1e", "exponent"},
      {"+1", "invalid literal; last read: '+'"},
      {"\"abc", "missing closing quote"},
      {"\"a\nb\"", "control character U+000A (LF) must be escaped"},
      {"\"\\x\"", "forbidden character after backslash"},
      {"\"\\u12G4\"", "must be followed by 4 hex digits"},
      {"\"\\ud800\"", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"},
      {"\"\\udc00\"", "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"},
      {"1 2", "line 1, column 3: syntax error while parsing value - unexpected number literal"},
      {"[1]\n\n  x", "line 3, column 3"},
      {"{'a':1}", "expected string literal"},
      {"NaN", "invalid literal; last read: 'N'"},
  };

  for (const Case& c : cases) {
    std::string error;
    Json out;
    EXPECT_FALSE(Json::try_parse(c.text, &out, &error)) << "accepted: " << c.text;
    EXPECT_NE(error.find(c.expect), std::string::npos)
        << "input: " << c.text << "\nerror: " << error << "\nexpected to contain: " << c.expect;
    EXPECT_THROW(Json::parse(c.text), JsonError) << c.text;
  }
}

TEST(Json, DeepNestingIsRejectedNotCrashing) {
  std::string deep(100000, '[');
  std::string error;
  Json out;
  EXPECT_FALSE(Json::try_parse(deep, &out, &error));
  EXPECT_NE(error.find("nesting deeper"), std::string::npos) << error;
  // Just below the limit is fine.
  std::string ok = std::string(Json::kMaxDepth - 1, '[') + std::string(Json::kMaxDepth - 1, ']');
  EXPECT_NO_THROW(Json::parse(ok));
}

TEST(Json, FileRoundTripAndErrors) {
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/tessera_json_test.json";
  Json j = Json::object({{"x", 1}, {"y", Json::array({"a", "b"})}});
  std::string error;
  ASSERT_TRUE(write_json_file(path, j, 2, &error)) << error;
  EXPECT_EQ(read_json_file(path), j);
  EXPECT_THROW(read_json_file(dir + "/does_not_exist_tessera.json"), JsonError);
  EXPECT_FALSE(write_json_file(dir + "/no_such_dir_tessera/x.json", j, 2, &error));
  EXPECT_FALSE(error.empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tessera::util
