#include "toolcall/tool_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace deepinfer::toolcall {
namespace {

using Json = nlohmann::ordered_json;

// The DeepSeek markers, spelled once.
const std::string kCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kCallBegin = "<｜tool▁call▁begin｜>";
const std::string kCallEnd = "<｜tool▁call▁end｜>";
const std::string kSep = "<｜tool▁sep｜>";

std::string describe(const ParsedText& p) {
  std::string out =
      "content=" + Json(p.content).dump(-1, ' ', false, Json::error_handler_t::replace) +
      " calls=[";
  for (const auto& c : p.calls) out += c.name + ":" + c.arguments + ";";
  return out + "]";
}

ParsedText fed_in_pieces(Family family, const Json& tools, const std::string& text,
                         const std::vector<size_t>& cuts) {
  ToolCallParser parser(family, tools);
  ParsedText got;
  size_t from = 0;
  for (const size_t cut : cuts) {
    got.append(parser.feed(std::string_view(text).substr(from, cut - from)));
    from = cut;
  }
  got.append(parser.feed(std::string_view(text).substr(from)));
  got.append(parser.finish());
  return got;
}

// The whole text, every split in two, and byte-by-byte feeding all give `want`.
void expect_parsed(Family family, const Json& tools, const std::string& text,
                   const ParsedText& want) {
  const std::string expected = describe(want);
  EXPECT_EQ(describe(parse_tool_calls(family, tools, text)), expected) << "whole: " << text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ASSERT_EQ(describe(fed_in_pieces(family, tools, text, {cut})), expected)
        << "split at " << cut << ": " << text;
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  EXPECT_EQ(describe(fed_in_pieces(family, tools, text, every)), expected)
      << "byte by byte: " << text;
}

ParsedText result(std::string content, std::vector<ToolCall> calls = {}) {
  return ParsedText{std::move(content), std::move(calls)};
}

TEST(ToolCallParser, NamesAndDetection) {
  EXPECT_EQ(family_from_name("hermes"), Family::hermes);
  EXPECT_EQ(family_from_name("deepseek_v3"), Family::deepseek);
  EXPECT_EQ(family_from_name("deepseek_v31"), Family::deepseek);
  EXPECT_EQ(family_from_name("glm45"), Family::glm45);
  EXPECT_EQ(family_from_name("none"), Family::none);
  EXPECT_THROW(family_from_name("mistral"), Error);
  EXPECT_EQ(family_name(Family::deepseek), "deepseek_v3");
  EXPECT_EQ(family_from_name("deepseek_v32"), Family::deepseek_v32);
  EXPECT_EQ(family_name(Family::deepseek_v32), "deepseek_v32");
  EXPECT_EQ(detect_family("deepseek_v32"), Family::deepseek_v32);  // the native format's name
  EXPECT_EQ(detect_family("{{ '<tool_call>\\n' }}"), Family::hermes);
  EXPECT_EQ(detect_family("<tool_call>{{ name }}<arg_key>"), Family::glm45);
  EXPECT_EQ(detect_family("{{'" + kCallsBegin + kCallBegin + "'}}"), Family::deepseek);
  EXPECT_EQ(detect_family("{% for m in messages %}{{ m.tool_calls }}{% endfor %}"), Family::none);
  EXPECT_THROW(ToolCallParser(Family::none, Json()), Error);
}

// The published templates of the served families name their own markup.
TEST(ToolCallParser, DetectsTheRealTemplates) {
  const std::filesystem::path shared(DEEPINFER_SHARED_DIR);
  if (!std::filesystem::exists(shared / "chat_templates")) {
    GTEST_SKIP() << "no " << shared << "/chat_templates (shared test data absent)";
  }
  const auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const auto config_template = [&](const char* dir) {
    return Json::parse(read(shared / "tokenizers" / dir / "tokenizer_config.json"))
        .at("chat_template")
        .get<std::string>();
  };
  EXPECT_EQ(detect_family(read(shared / "chat_templates/qwen2.5.jinja")), Family::hermes);
  EXPECT_EQ(detect_family(config_template("qwen3")), Family::hermes);
  EXPECT_EQ(detect_family(config_template("deepseek-v3")), Family::deepseek);
  EXPECT_EQ(detect_family(read(shared / "chat_templates/deepseek-v3.1.jinja")), Family::deepseek);
  EXPECT_EQ(detect_family(read(shared / "chat_templates/glm-4.5.jinja")), Family::glm45);
  EXPECT_EQ(detect_family(read(shared / "chat_templates/deepseek-v2-chat.jinja")), Family::none);
}

TEST(ToolCallParser, HermesCalls) {
  const Json tools;
  expect_parsed(Family::hermes, tools, "Hello, no tools here.\n",
                result("Hello, no tools here.\n"));
  expect_parsed(Family::hermes, tools,
                "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                "{\"city\": \"Zürich\", \"days\": 3}}\n</tool_call>",
                result("Let me check.", {{"get_weather", R"({"city":"Zürich","days":3})"}}));
  // Two calls, whitespace between them dropped; text after the calls kept.
  expect_parsed(Family::hermes, tools,
                "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n"
                "Done. ",
                result("Done.", {{"a", "{}"}, {"b", R"({"x":[1,2]})"}}));
  // Arguments absent, or given as a JSON string.
  expect_parsed(Family::hermes, tools,
                "<tool_call>{\"name\": \"now\"}</tool_call>"
                "<tool_call>{\"name\": \"s\", \"arguments\": \"{\\\"q\\\": 1}\"}</tool_call>",
                result("", {{"now", "{}"}, {"s", R"({"q":1})"}}));
  // A '<' that is not a marker, and a marker prefix at the very end, stay text.
  expect_parsed(Family::hermes, tools, "a < b <tool_", result("a < b <tool_"));
  // The model stopped right after the JSON (no closing tag): still a call.
  expect_parsed(Family::hermes, tools,
                "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": 1}}\n",
                result("", {{"f", R"({"k":1})"}}));
}

TEST(ToolCallParser, HermesMalformedStaysText) {
  const Json tools;
  // Bad JSON: the raw markup is the content; the good call after it still counts.
  expect_parsed(
      Family::hermes, tools,
      "x <tool_call>{\"name\": \"f\", \"arguments\": {oops}}</tool_call>"
      "<tool_call>{\"name\": \"g\"}</tool_call>",
      result("x <tool_call>{\"name\": \"f\", \"arguments\": {oops}}</tool_call>", {{"g", "{}"}}));
  expect_parsed(Family::hermes, tools, "<tool_call>[1, 2]</tool_call>",
                result("<tool_call>[1, 2]</tool_call>"));
  expect_parsed(Family::hermes, tools, "<tool_call>{\"arguments\": {}}</tool_call>",
                result("<tool_call>{\"arguments\": {}}</tool_call>"));
  expect_parsed(Family::hermes, tools, "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>",
                result("<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"));
  // Cut inside the JSON: not a call.
  expect_parsed(Family::hermes, tools, "ok <tool_call>\n{\"name\": \"f\", \"argu",
                result("ok <tool_call>\n{\"name\": \"f\", \"argu"));
  // Invalid UTF-8 inside the JSON is not JSON: kept as text, nothing throws.
  const std::string bad =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"\xff\"}}</tool_call>";
  expect_parsed(Family::hermes, tools, bad, result(bad));
}

TEST(ToolCallParser, DeepSeekV3Calls) {
  const Json tools;
  const std::string text = "I will look.\n" + kCallsBegin + kCallBegin + "function" + kSep +
                           "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + kCallEnd + "\n" +
                           kCallBegin + "function" + kSep + "get_time\n```json\n{}\n```" +
                           kCallEnd + kCallsEnd;
  expect_parsed(
      Family::deepseek, tools, text,
      result("I will look.", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}));
  // Cut after the arguments, before the fence closes.
  expect_parsed(Family::deepseek, tools,
                kCallsBegin + kCallBegin + "function" + kSep + "f\n```json\n{\"a\": 1}\n",
                result("", {{"f", R"({"a":1})"}}));
  // Text after the section is content again.
  expect_parsed(Family::deepseek, tools,
                kCallsBegin + kCallBegin + "function" + kSep + "f\n```json\n{}\n```" + kCallEnd +
                    kCallsEnd + " bye",
                result("bye", {{"f", "{}"}}));
}

TEST(ToolCallParser, DeepSeekV31Calls) {
  const Json tools;
  expect_parsed(Family::deepseek, tools,
                kCallsBegin + kCallBegin + "search" + kSep + "{\"q\": \"llm ```json\"}" + kCallEnd +
                    kCallBegin + "now" + kSep + "{}" + kCallEnd + kCallsEnd,
                result("", {{"search", R"({"q":"llm ```json"})"}, {"now", "{}"}}));
}

TEST(ToolCallParser, DeepSeekMalformedStaysText) {
  const Json tools;
  // No separator, then bad JSON: both kept as raw call text; the section markers are dropped.
  expect_parsed(Family::deepseek, tools,
                kCallsBegin + kCallBegin + "f{}" + kCallEnd + kCallBegin + "g" + kSep + "{x}" +
                    kCallEnd + kCallsEnd,
                result(kCallBegin + "f{}" + kCallEnd + kCallBegin + "g" + kSep + "{x}" + kCallEnd));
  // Stray text inside the section is content; the call after it counts.
  expect_parsed(Family::deepseek, tools,
                kCallsBegin + "hmm " + kCallBegin + "g" + kSep + "{}" + kCallEnd + kCallsEnd,
                result("hmm", {{"g", "{}"}}));
  // Whitespace inside stray text survives every split (found by tool_parser_fuzz).
  expect_parsed(Family::deepseek, tools, kCallsBegin + "x y\n z " + kCallEnd + kCallsEnd + "w",
                result("x y\n z " + kCallEnd + "w"));
}

TEST(ToolCallParser, Glm45Calls) {
  const Json tools = Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "code": {"type": "string"}}}}}])");
  // "code" is typed string: "42" stays a string; "days" is read as JSON; "extra" (untyped) is
  // JSON when it parses, else a string.
  expect_parsed(
      Family::glm45, tools,
      "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>code</arg_key>\n"
      "<arg_value>42</arg_value>\n<arg_key>extra</arg_key><arg_value>[true, null]</arg_value>\n"
      "<arg_key>note</arg_key><arg_value>not json</arg_value>\n</tool_call>\n"
      "<tool_call>list_cities</tool_call>",
      result("Checking.",
             {{"get_weather",
               R"({"city":"Beijing","days":3,"code":"42","extra":[true,null],"note":"not json"})"},
              {"list_cities", "{}"}}));
}

TEST(ToolCallParser, Glm45MalformedStaysText) {
  const Json tools;
  expect_parsed(Family::glm45, tools, "<tool_call>f\n<arg_key>a</arg_key>\n</tool_call>",
                result("<tool_call>f\n<arg_key>a</arg_key>\n</tool_call>"));
  expect_parsed(Family::glm45, tools,
                "<tool_call>\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
                result("<tool_call>\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"));
  expect_parsed(Family::glm45, tools,
                "<tool_call>f<arg_key>a</arg_key>junk<arg_value>1</arg_value></tool_call>",
                result("<tool_call>f<arg_key>a</arg_key>junk<arg_value>1</arg_value></tool_call>"));
}

// DeepSeek-V3.2's DSML, as its encoder renders a call in the history (and the model writes it).
TEST(ToolCallParser, DeepSeekV32DsmlCalls) {
  const Json tools;
  expect_parsed(
      Family::deepseek_v32, tools,
      "Let me check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">北京 \"x\"</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"extra\" string=\"false\">{\"a\": [1, 2.5, null]}"
      "</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"note\" string=\"false\">not json</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"list_cities\">\n</｜DSML｜invoke>\n"
      "</｜DSML｜function_calls>",
      result("Let me check.",
             {{"get_weather", R"({"city":"北京 \"x\"","days":2,"extra":{"a":[1,2.5,null]},)"
                              R"("note":"not json"})"},
              {"list_cities", "{}"}}));
  // Malformed invokes stay text; a string="true" value keeps its whitespace.
  expect_parsed(Family::deepseek_v32, tools,
                "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\">junk</｜DSML｜invoke>"
                "</｜DSML｜function_calls>",
                result("<｜DSML｜invoke name=\"f\">junk</｜DSML｜invoke>"));
  expect_parsed(Family::deepseek_v32, tools,
                "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter "
                "name=\"s\" string=\"true\"> a\nb </｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                "</｜DSML｜function_calls>",
                result("", {{"f", R"({"s":" a\nb "})"}}));
}

// A long call arriving a byte at a time is scanned once (not once per byte: 100k bytes would
// then take seconds); the result is the call as a whole.
TEST(ToolCallParser, LongCallStreamsInLinearTime) {
  const std::string value(100000, 'a');
  const std::string text =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"v\": \"" + value + "\"}}</tool_call>";
  ToolCallParser parser(Family::hermes, Json());
  ParsedText got;
  for (const char c : text) got.append(parser.feed(std::string_view(&c, 1)));
  got.append(parser.finish());
  ASSERT_EQ(got.calls.size(), 1u);
  EXPECT_EQ(got.calls[0].arguments, "{\"v\":\"" + value + "\"}");
  EXPECT_EQ(got.content, "");
}

}  // namespace
}  // namespace deepinfer::toolcall
