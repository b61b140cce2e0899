#include "tokenizer/chat_template.h"

#include <ctime>

#include "core/error.h"
#include "tokenizer/chat_format_dsv32.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/json_value.h"
#include "tokenizer/jinja/pyformat.h"

namespace deepinfer::tokenizer {

namespace {

using jinja::Dict;
using jinja::Value;

// transformers' raise_exception global: jinja2.exceptions.TemplateError(message).
Value raise_exception(jinja::Interpreter& in, jinja::CallArgs& args) {
  auto b = args.bind("raise_exception", {"message"});
  if (!b[0])
    jinja::runtime_fail("raise_exception() missing 1 required positional argument: 'message'");
  throw jinja::Failure{jinja::ErrorKind::Raised, jinja::to_str(*b[0], in.max_size())};
}

// transformers' strftime_now global: datetime.now().strftime(format), local time.
Value strftime_now(jinja::Interpreter&, jinja::CallArgs& args) {
  auto b = args.bind("strftime_now", {"format"});
  if (!b[0] || !b[0]->is_string()) jinja::runtime_fail("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const std::string& format = b[0]->str();
  if (format.empty()) return Value::string("");
  for (size_t size = 256; size <= (1u << 20); size *= 4) {
    std::string buf(size, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
    if (n > 0) {
      buf.resize(n);
      return Value::string(std::move(buf));
    }
  }
  return Value::string("");  // the format produces no characters
}

const char* const kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

// One message as transformers hands it to the template.
Value prepare_message(const Value& message, size_t index) {
  if (!message.is_dict()) {
    fail("chat template: messages[", index, "] must be a JSON object, got ",
         jinja::type_name(message));
  }
  Dict kept;
  for (const auto& [k, v] : message.dict().entries()) {
    if (!v.is_none()) kept.set(k, v);
  }
  const Value* reasoning = nullptr;
  for (const char* field : kReasoningFields) {
    if ((reasoning = kept.find(std::string_view(field)))) break;
  }
  if (!reasoning) return Value::dict(std::move(kept));
  // {"thinking": r, **message, "reasoning_content": r}
  const Value r = *reasoning;
  Dict aliased;
  aliased.set(Value::string("thinking"), r);
  for (const auto& [k, v] : kept.entries()) aliased.set(k, v);
  aliased.set(Value::string("reasoning_content"), r);
  return Value::dict(std::move(aliased));
}

Dict build_context(const Value& messages, const Value& tools, bool add_generation_prompt,
                   const std::string& bos_token, const std::string& eos_token, const Value& extra) {
  if (!messages.is_list() || messages.list_data().kind != jinja::SeqKind::List) {
    fail("chat template: messages must be a JSON array of message objects");
  }
  jinja::ValueList prepared;
  for (size_t i = 0; i < messages.items().size(); ++i) {
    prepared.push_back(prepare_message(messages.items()[i], i));
  }
  if (!tools.is_none() && !tools.is_list())
    fail("chat template: tools must be a JSON array or null");
  for (const Value& tool : tools.items()) {
    if (!tool.is_dict()) fail("chat template: each tool must be a JSON object (a JSON schema)");
  }
  if (!extra.is_none() && !extra.is_dict())
    fail("chat template: template kwargs must be a JSON object");

  Dict context;
  context.set(Value::string("raise_exception"),
              jinja::native_function("raise_exception", raise_exception));
  context.set(Value::string("strftime_now"), jinja::native_function("strftime_now", strftime_now));
  if (!bos_token.empty()) context.set(Value::string("bos_token"), Value::string(bos_token));
  if (!eos_token.empty()) context.set(Value::string("eos_token"), Value::string(eos_token));
  for (const auto& [k, v] : extra.dict().entries()) {
    const std::string& key = k.str();
    if (key == "messages" || key == "tools" || key == "documents" ||
        key == "add_generation_prompt" || key == "conversation" || key == "chat_template") {
      fail("chat template: template kwarg '", key,
           "' collides with an argument of apply_chat_template");
    }
    context.set(k, v);
  }
  context.set(Value::string("messages"), Value::list(std::move(prepared)));
  context.set(Value::string("tools"), tools);
  context.set(Value::string("documents"), Value::none());
  context.set(Value::string("add_generation_prompt"), Value::boolean(add_generation_prompt));
  return context;
}

template <typename Json>
std::string render_impl(const jinja::Template& tpl, const Json& messages, const Json& tools,
                        bool add_generation_prompt, const std::string& bos_token,
                        const std::string& eos_token, const Json& extra) {
  const Dict context =
      build_context(jinja::from_json(messages), jinja::from_json(tools), add_generation_prompt,
                    bos_token, eos_token, jinja::from_json(extra));
  return tpl.render(context);
}

}  // namespace

ChatTemplate ChatTemplate::native(const std::string& format) {
  DI_CHECK(format == kDeepseekV32ChatFormat, "unknown chat format '", format,
           "' (known: ", kDeepseekV32ChatFormat, ")");
  ChatTemplate t;
  t.native_ = format;
  return t;
}

ChatTemplate ChatTemplate::parse(std::string source, const jinja::Limits& limits) {
  ChatTemplate t;
  t.template_ = jinja::Template::parse(source, limits);
  t.source_ = std::move(source);
  return t;
}

std::string ChatTemplate::render(const nlohmann::json& messages, const nlohmann::json& tools,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::json& extra) const {
  if (!native_.empty()) {
    return render(nlohmann::ordered_json(messages), nlohmann::ordered_json(tools),
                  add_generation_prompt, bos_token, eos_token, nlohmann::ordered_json(extra));
  }
  return render_impl(template_, messages, tools, add_generation_prompt, bos_token, eos_token,
                     extra);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra) const {
  // The native format writes its own special tokens (the encoder's constants).
  if (!native_.empty())
    return render_deepseek_v32_chat(messages, tools, add_generation_prompt, extra);
  return render_impl(template_, messages, tools, add_generation_prompt, bos_token, eos_token,
                     extra);
}

std::string select_chat_template(const TokenizerConfig& config, bool with_tools) {
  if (!config.named_templates.empty()) {
    if (with_tools) {
      if (auto it = config.named_templates.find("tool_use"); it != config.named_templates.end()) {
        return it->second;
      }
    }
    if (auto it = config.named_templates.find("default"); it != config.named_templates.end()) {
      return it->second;
    }
    std::string names;
    for (const auto& [name, text] : config.named_templates)
      names += (names.empty() ? "" : ", ") + name;
    fail("tokenizer_config.json has several chat templates and no \"default\" (", names,
         "); pass one with --template");
  }
  if (!config.chat_template) {
    fail("tokenizer_config.json has no chat_template; pass a template file with --template");
  }
  return *config.chat_template;
}

bool has_chat_template(const TokenizerConfig& config) {
  return config.chat_template || config.named_templates.contains("default") ||
         config.chat_format.has_value();
}

ChatTemplate load_chat_template(const TokenizerConfig& config, bool with_tools) {
  if (!config.chat_template && config.named_templates.empty() && config.chat_format) {
    return ChatTemplate::native(*config.chat_format);
  }
  return ChatTemplate::parse(select_chat_template(config, with_tools));
}

}  // namespace deepinfer::tokenizer
