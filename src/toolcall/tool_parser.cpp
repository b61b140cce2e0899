#include "toolcall/tool_parser.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "toolcall/call_readers.h"

namespace deepinfer::toolcall {

namespace {

using detail::Json;

// How one family delimits its calls. Calls may be grouped in a section (DeepSeek); inside a
// section only whitespace separates them.
struct Syntax {
  std::string_view section_open;  // empty: calls stand alone in the text
  std::string_view section_close;
  std::string_view call_open;
  std::string_view call_close;
  std::optional<ToolCall> (*read)(std::string_view body, const Json& tools);
};

constexpr Syntax kHermes{"", "", "<tool_call>", "</tool_call>", &detail::read_hermes_call};
constexpr Syntax kDeepSeek{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                           "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                           &detail::read_deepseek_call};
constexpr Syntax kGlm45{"", "", "<tool_call>", "</tool_call>", &detail::read_glm45_call};
constexpr Syntax kDeepSeekV32{"<｜DSML｜function_calls>", "</｜DSML｜function_calls>",
                              "<｜DSML｜invoke", "</｜DSML｜invoke>", &detail::read_dsml_call};

const Syntax& syntax_of(Family family) {
  switch (family) {
    case Family::hermes:
      return kHermes;
    case Family::deepseek:
      return kDeepSeek;
    case Family::glm45:
      return kGlm45;
    case Family::deepseek_v32:
      return kDeepSeekV32;
    case Family::none:
      break;
  }
  fail("tool-call parser: no markup for family 'none' (tool calls are not parsed)");
}

// Length of the longest suffix of `text` that is a proper prefix of `marker`: text that may
// still become the marker once more output arrives.
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

void ParsedText::append(ParsedText&& more) {
  content += more.content;
  for (auto& call : more.calls) calls.push_back(std::move(call));
}

Family family_from_name(std::string_view name) {
  if (name == "none") return Family::none;
  if (name == "hermes") return Family::hermes;
  if (name == "deepseek_v3" || name == "deepseek_v31") return Family::deepseek;
  if (name == "glm45") return Family::glm45;
  if (name == "deepseek_v32") return Family::deepseek_v32;
  fail("unknown tool-call parser '", name,
       "': use auto, none, hermes (Qwen2.5/Qwen3), deepseek_v3 or deepseek_v31 (DeepSeek-V3/R1/"
       "V3.1), deepseek_v32 (DeepSeek-V3.2) or glm45 (GLM-4.5)");
}

std::string_view family_name(Family family) {
  switch (family) {
    case Family::hermes:
      return "hermes";
    case Family::deepseek:
      return "deepseek_v3";
    case Family::glm45:
      return "glm45";
    case Family::deepseek_v32:
      return "deepseek_v32";
    case Family::none:
      break;
  }
  return "none";
}

Family detect_family(std::string_view source) {
  if (source == "deepseek_v32" || source.find("｜DSML｜") != std::string_view::npos) {
    return Family::deepseek_v32;
  }
  // GLM-4.5 shares <tool_call> with hermes; its argument tags tell it apart.
  if (source.find("<arg_key>") != std::string_view::npos) return Family::glm45;
  if (source.find(kDeepSeek.call_open) != std::string_view::npos ||
      source.find(kDeepSeek.section_open) != std::string_view::npos) {
    return Family::deepseek;
  }
  if (source.find(kHermes.call_open) != std::string_view::npos) return Family::hermes;
  return Family::none;
}

struct ToolCallParser::Impl {
  enum class Mode { text, section, call };

  Impl(const Syntax& syn, Json tool_list) : syntax(syn), tools(std::move(tool_list)) {}

  const Syntax& syntax;
  Json tools;
  Mode mode = Mode::text;
  std::string buffer;               // received, not yet consumed
  std::string pending_space;        // trailing whitespace of the plain text, held back
  bool skip_leading_space = false;  // right after a call
  bool any_call = false;
  // In a call: how far the buffer is known to hold no closing marker, so that a long call
  // arriving token by token is scanned once, not once per token.
  size_t scanned = 0;
  ParsedText out;  // the result of the current feed()/finish()

  void emit_text(std::string_view s) {
    if (skip_leading_space) {
      while (!s.empty() && detail::is_space(s.front())) s.remove_prefix(1);
      if (s.empty()) return;
      skip_leading_space = false;
    }
    size_t end = s.size();
    while (end > 0 && detail::is_space(s[end - 1])) --end;
    if (end == 0) {
      pending_space += s;
      return;
    }
    out.content += pending_space;
    out.content += s.substr(0, end);
    pending_space.assign(s.substr(end));
  }

  void emit_call(ToolCall call) {
    pending_space.clear();
    skip_leading_space = true;
    any_call = true;
    out.calls.push_back(std::move(call));
  }

  void end_call(std::string_view body, bool closed) {
    if (auto call = syntax.read(body, tools)) {
      emit_call(std::move(*call));
    } else {
      std::string raw(syntax.call_open);
      raw += body;
      if (closed) raw += syntax.call_close;
      emit_text(raw);
    }
  }

  // Consumes as much of the buffer as can be decided now.
  void run() {
    for (;;) {
      switch (mode) {
        case Mode::text: {
          const bool grouped = !syntax.section_open.empty();
          const std::string_view open = grouped ? syntax.section_open : syntax.call_open;
          const size_t at = buffer.find(open);
          if (at == std::string::npos) {
            const size_t keep = partial_marker(buffer, open);
            emit_text(std::string_view(buffer).substr(0, buffer.size() - keep));
            buffer.erase(0, buffer.size() - keep);
            return;
          }
          // Whitespace before the markup stays pending: a call drops it, malformed markup
          // (kept as text) keeps it.
          emit_text(std::string_view(buffer).substr(0, at));
          buffer.erase(0, at + open.size());
          mode = grouped ? Mode::section : Mode::call;
          break;
        }
        case Mode::section: {
          size_t first = 0;
          while (first < buffer.size() && detail::is_space(buffer[first])) ++first;
          // Whitespace between calls is dropped like any next to a call; before stray text it
          // stays part of that text.
          emit_text(std::string_view(buffer).substr(0, first));
          buffer.erase(0, first);
          if (buffer.empty()) return;
          if (starts_with(buffer, syntax.call_open)) {
            buffer.erase(0, syntax.call_open.size());
            mode = Mode::call;
            break;
          }
          if (starts_with(buffer, syntax.section_close)) {
            buffer.erase(0, syntax.section_close.size());
            skip_leading_space = true;
            mode = Mode::text;
            break;
          }
          if (starts_with(syntax.call_open, buffer) || starts_with(syntax.section_close, buffer)) {
            return;  // a marker still arriving
          }
          // Stray text inside the section: plain text up to the next marker.
          size_t stop = std::min(buffer.find(syntax.call_open), buffer.find(syntax.section_close));
          if (stop == std::string::npos) {
            stop = buffer.size() - std::max(partial_marker(buffer, syntax.call_open),
                                            partial_marker(buffer, syntax.section_close));
          }
          emit_text(std::string_view(buffer).substr(0, stop));
          buffer.erase(0, stop);
          break;
        }
        case Mode::call: {
          const size_t at = buffer.find(syntax.call_close, scanned);
          if (at == std::string::npos) {
            // The marker may have begun in the last bytes: rescan those next time.
            scanned = buffer.size() - std::min(buffer.size(), syntax.call_close.size() - 1);
            return;
          }
          end_call(std::string_view(buffer).substr(0, at), /*closed=*/true);
          buffer.erase(0, at + syntax.call_close.size());
          scanned = 0;
          mode = syntax.section_open.empty() ? Mode::text : Mode::section;
          break;
        }
      }
    }
  }

  ParsedText take() {
    ParsedText result = std::move(out);
    out = ParsedText();
    return result;
  }
};

ToolCallParser::ToolCallParser(Family family, nlohmann::ordered_json tools)
    : impl_(std::make_unique<Impl>(syntax_of(family), std::move(tools))) {}
ToolCallParser::~ToolCallParser() = default;
ToolCallParser::ToolCallParser(ToolCallParser&&) noexcept = default;
ToolCallParser& ToolCallParser::operator=(ToolCallParser&&) noexcept = default;

ParsedText ToolCallParser::feed(std::string_view text) {
  impl_->buffer += text;
  impl_->run();
  return impl_->take();
}

ParsedText ToolCallParser::finish() {
  Impl& s = *impl_;
  if (s.mode == Impl::Mode::call) {
    s.end_call(s.buffer, /*closed=*/false);
  } else {
    s.emit_text(s.buffer);  // a marker prefix that never completed
  }
  s.buffer.clear();
  s.mode = Impl::Mode::text;
  // Output without calls comes back whole; after a call, trailing whitespace is dropped.
  if (!s.any_call) s.out.content += s.pending_space;
  s.pending_space.clear();
  return s.take();
}

ParsedText parse_tool_calls(Family family, const nlohmann::ordered_json& tools,
                            std::string_view text) {
  ToolCallParser parser(family, tools);
  ParsedText result = parser.feed(text);
  result.append(parser.finish());
  return result;
}

}  // namespace deepinfer::toolcall
