#include "server/tool_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer::server {
namespace {

using Json = nlohmann::ordered_json;

// A delta without its random ids, for comparison.
Json without_ids(Json delta) {
  if (delta.contains("tool_calls")) {
    for (Json& call : delta["tool_calls"]) {
      EXPECT_EQ(call["id"].get<std::string>().substr(0, 5), "call_");
      call.erase("id");
    }
  }
  return delta;
}

// A hermes-style output streamed in token-sized pieces: the text arrives as content as soon as
// it cannot be markup, each call in one delta when its closing tag arrives.
TEST(ServerToolStream, StreamsContentAndWholeCalls) {
  ToolCallStream stream(toolcall::Family::hermes, Json(), 2, /*parallel=*/true);
  const std::vector<std::string> pieces = {"Let",
                                           " me",
                                           " check",
                                           ".\n",
                                           "<tool_call>",
                                           "\n{\"name\": \"get_weather\", ",
                                           "\"arguments\": {\"city\": ",
                                           "\"Paris\"}}\n",
                                           "</tool_call>",
                                           "\n",
                                           "<tool_call>",
                                           "\n{\"name\": \"now\"}\n",
                                           "</tool_call>"};
  std::vector<std::string> got;
  for (size_t i = 0; i < pieces.size(); ++i) {
    got.push_back(without_ids(stream.delta(0, pieces[i], i + 1 == pieces.size())).dump());
  }
  const std::vector<std::string> want = {
      R"({"content":"Let"})",
      R"({"content":" me"})",
      R"({"content":" check"})",
      R"({"content":"."})",  // the newline before a call is dropped
      "{}",
      "{}",
      "{}",
      "{}",
      R"({"tool_calls":[{"index":0,"type":"function","function":{"name":"get_weather",)"
      R"("arguments":"{\"city\":\"Paris\"}"}}]})",
      "{}",
      "{}",
      "{}",
      R"({"tool_calls":[{"index":1,"type":"function","function":{"name":"now","arguments":"{}"}}]})"};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(stream.made_calls(0));
  // The other choice is independent: plain text passes through, held-back text is flushed at
  // the end, no calls.
  EXPECT_EQ(stream.delta(1, "a <tool", false).dump(), R"({"content":"a"})");
  EXPECT_EQ(stream.delta(1, "box> ", true).dump(), R"({"content":" <toolbox> "})");
  EXPECT_FALSE(stream.made_calls(1));
}

TEST(ServerToolStream, ParallelFalseSendsOnlyTheFirstCall) {
  ToolCallStream stream(toolcall::Family::hermes, Json(), 1, /*parallel=*/false);
  const std::string two =
      "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>";
  const Json d = stream.delta(0, two, true);
  ASSERT_EQ(d["tool_calls"].size(), 1u);
  EXPECT_EQ(d["tool_calls"][0]["function"]["name"], "a");
  EXPECT_FALSE(d.contains("content"));

  ChoiceResult c;
  c.text = "ok " + two;
  parse_choice_tools(c, toolcall::Family::hermes, Json(), /*parallel=*/false);
  EXPECT_EQ(c.text, "ok");
  ASSERT_EQ(c.tool_calls.size(), 1u);
  ASSERT_EQ(c.tool_call_ids.size(), 1u);
  EXPECT_EQ(c.tool_calls[0].name, "a");
  EXPECT_TRUE(c.tools_parsed);
}

// A malformed call streams out as content once its closing tag shows it is not a call.
TEST(ServerToolStream, MalformedCallBecomesContent) {
  ToolCallStream stream(toolcall::Family::hermes, Json(), 1, true);
  EXPECT_EQ(stream.delta(0, "x <tool_call>{bad", false).dump(), R"({"content":"x"})");
  EXPECT_EQ(stream.delta(0, "}</tool_call>", true).dump(),
            R"({"content":" <tool_call>{bad}</tool_call>"})");
  EXPECT_FALSE(stream.made_calls(0));
}

}  // namespace
}  // namespace deepinfer::server
