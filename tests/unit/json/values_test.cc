// The JSON of shared values (json/values.h) as it reads what clients send: typed header values,
// and the nesting check that keeps a request body from overflowing a thread's stack.
#include "json/values.h"

#include <gtest/gtest.h>

#include <string>

namespace wharf::json {
namespace {

TEST(JsonValues, NestingIsCountedOutsideStringsOnly) {
  EXPECT_FALSE(NestedDeeperThan(R"({"a": [1, {"b": [2]}]})", 4));
  EXPECT_TRUE(NestedDeeperThan(R"({"a": [1, {"b": [2]}]})", 3));
  // Brackets in strings, escaped quotes included, are text.
  EXPECT_FALSE(NestedDeeperThan(R"({"a": "[[[[{{{{\"[[[["})", 1));
  EXPECT_TRUE(NestedDeeperThan(std::string(100000, '['), 32));
  EXPECT_FALSE(NestedDeeperThan(std::string(32, '[') + std::string(32, ']'), 32));
  EXPECT_FALSE(NestedDeeperThan("", 0));
}

TEST(JsonValues, ATypedValueWithABadTypeIsAnErrorNotAnException) {
  for (const char* text : {R"({"type": 1, "base64": "AA=="})", R"({"type": [], "text": "nan"})",
                           R"({"type": null})"}) {
    Result<HeaderValue> v = HeaderValueFromJson("x", Json::parse(text));
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(v.status().message().find("header 'x'"), std::string::npos) << text;
  }
  Result<HeaderValue> bytes = HeaderValueFromJson("x", Json::parse(R"({"base64": "/w=="})"));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(std::get<Bytes>(*bytes).data, std::string("\xff"));
  Result<HeaderValue> text = HeaderValueFromJson("x", Json::parse(R"({"type": "string",
      "base64": "aGk="})"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(std::get<std::string>(*text), "hi");
}

}  // namespace
}  // namespace wharf::json
