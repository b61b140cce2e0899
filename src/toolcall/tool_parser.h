#pragma once
// Tool calls in model output: the markup each served model family writes, read into
// (name, JSON arguments) pairs and the remaining plain text. Knows nothing of HTTP; the server
// (src/server) turns the results into OpenAI `tool_calls`.
//
// Families (what the model writes; vLLM's parser name in brackets):
//   hermes      Qwen2.5 / Qwen3 / Qwen3-MoE [hermes]
//                 <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   deepseek    DeepSeek-V3 / R1 [deepseek_v3] and V3.1 [deepseek_v31], one parser for both:
//                 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```
//                 <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>            (V3: type, sep, name,
//                 fenced JSON) <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>  (V3.1:
//                 name, sep, raw JSON)
//   glm45       GLM-4.5 [glm45]
//                 <tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
//               a value is kept as a string when the tool's JSON schema types it "string",
//               else read as JSON when it parses, else kept as a string.
//   deepseek_v32  DeepSeek-V3.2 [deepseek_v32] (DSML; the native chat format renders it)
//                 <｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="k"
//                 string="true">v</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>
//               string="true": the text as is; "false": JSON (the text when it does not parse).
//
// Streaming: feed() takes the text as it is generated and returns the plain text that is
// certainly not markup plus every call completed by this text; a call is reported once its
// closing marker arrives (or at finish()), never in part. Feeding a text in any split gives the
// same result as feeding it whole (the unit tests check every split).
//
// Whitespace next to tool calls is dropped from the plain text (the newline a model writes
// between its sentence and a call, or between calls); output without any call comes back
// byte for byte. A call whose markup is malformed (bad JSON, missing name) is not a call: its
// raw text, markers included, stays in the plain text (vLLM returns malformed output as content).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::toolcall {

enum class Family { none, hermes, deepseek, glm45, deepseek_v32 };

// "none" | "hermes" | "deepseek_v3" | "deepseek_v31" | "glm45" | "deepseek_v32" (vLLM's names).
// Throws Error listing the names for anything else.
Family family_from_name(std::string_view name);
std::string_view family_name(Family family);

// The family whose markup a chat template writes (its tool-call examples and history
// rendering name the markers), none when it shows no tool-call markup. A native chat format
// (ChatTemplate::native_format) passes its name: "deepseek_v32" gives deepseek_v32.
Family detect_family(std::string_view chat_template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object ("{}" for a call without arguments)
  bool operator==(const ToolCall&) const = default;
};

struct ParsedText {
  std::string content;          // plain text (not markup)
  std::vector<ToolCall> calls;  // complete calls, in output order
  void append(ParsedText&& more);
};

class ToolCallParser {
 public:
  // `tools`: the request's tools array (OpenAI shape) or null; GLM-4.5 reads argument types
  // from it. Throws Error for Family::none.
  ToolCallParser(Family family, nlohmann::ordered_json tools);
  ~ToolCallParser();
  ToolCallParser(ToolCallParser&&) noexcept;
  ToolCallParser& operator=(ToolCallParser&&) noexcept;

  ParsedText feed(std::string_view text);
  // The end of the output: text held back as a possible marker becomes content, and an
  // unterminated last call counts when its body is complete (a model may stop right after it).
  ParsedText finish();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// feed(text) + finish().
ParsedText parse_tool_calls(Family family, const nlohmann::ordered_json& tools,
                            std::string_view text);

}  // namespace deepinfer::toolcall
