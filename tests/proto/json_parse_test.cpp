// proto::parseJson, the one parse of JSON from outside: nesting at the
// bound is accepted, one level more refused, and a depth that would end the
// process once built (copied, written out, compared) is refused without
// building it.
#include "ddprun/proto/json_parse.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ddprun::proto {
namespace {

// `depth` arrays, one inside the other, around `inner`.
std::string nestedArrays(int depth, const std::string& inner = "") {
  return std::string(static_cast<std::size_t>(depth), '[') + inner +
         std::string(static_cast<std::size_t>(depth), ']');
}

// {"a":{"a":...{}...}}: `depth` objects.
std::string nestedObjects(int depth) {
  std::string text;
  for (int i = 1; i < depth; ++i) {
    text += R"({"a":)";
  }
  return text + "{}" + std::string(static_cast<std::size_t>(depth - 1), '}');
}

TEST(JsonParseTest, NestingAtTheBoundIsAcceptedAndOneLevelMoreRefused) {
  std::string why = "untouched";
  const nlohmann::json at_bound = parseJson(nestedArrays(kMaxJsonDepth, "1"), &why);
  ASSERT_FALSE(at_bound.is_discarded());
  EXPECT_EQ(why, "untouched");
  EXPECT_EQ(at_bound.flatten().begin().value(), 1) << "the innermost value is kept";

  const nlohmann::json over = parseJson(nestedArrays(kMaxJsonDepth + 1, "1"), &why);
  EXPECT_TRUE(over.is_discarded());
  EXPECT_EQ(why, "nested deeper than 64 levels");

  EXPECT_FALSE(parseJson(nestedObjects(kMaxJsonDepth)).is_discarded());
  EXPECT_TRUE(parseJson(nestedObjects(kMaxJsonDepth + 1)).is_discarded());
}

TEST(JsonParseTest, DepthCountsArraysAndObjectsAlikeAndScalarsNotAtAll) {
  std::string why;
  EXPECT_EQ(parseJson("7", &why), 7);
  EXPECT_EQ(parseJson(R"({"a":[{"b":[1]}]})", &why, 4),
            nlohmann::json::parse(R"({"a":[{"b":[1]}]})"));
  EXPECT_TRUE(parseJson(R"({"a":[{"b":[[1]]}]})", &why, 4).is_discarded());
  EXPECT_EQ(why, "nested deeper than 4 levels");
  // A deep branch refuses the whole value, not just the branch: no silent
  // loss of part of what was sent.
  EXPECT_TRUE(parseJson(R"({"shallow":1,"deep":[[[[[]]]]]})", &why, 4).is_discarded());
}

TEST(JsonParseTest, ADepthThatWouldEndTheProcessOnceBuiltIsRefusedWithoutBuildingIt) {
  // A million levels: built, its copy or dump() would recurse a million
  // times, far past any thread's stack.
  const std::string deep = R"({"name":"deep","a":)" + nestedArrays(1'000'000) + "}";
  std::string why;
  const nlohmann::json refused = parseJson(deep, &why);
  EXPECT_TRUE(refused.is_discarded());
  EXPECT_EQ(why, "nested deeper than 64 levels");
  const auto ordered = parseJson<nlohmann::ordered_json>(deep, &why);
  EXPECT_TRUE(ordered.is_discarded());
}

TEST(JsonParseTest, TextThatIsNotOneJsonValueIsRefusedAsSuch) {
  for (const char* text : {"", "{", "[1,]", "{} {}", "nul", "[1] x"}) {
    std::string why;
    EXPECT_TRUE(parseJson(text, &why).is_discarded()) << text;
    EXPECT_EQ(why, "not valid JSON") << text;
  }
  const auto kept = parseJson<nlohmann::ordered_json>(R"({"z":1,"a":[true,null,"x"]})");
  EXPECT_EQ(kept.begin().key(), "z") << "ordered_json keeps the keys' order";
}

}  // namespace
}  // namespace ddprun::proto
