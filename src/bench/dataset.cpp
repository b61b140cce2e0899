#include "bench/dataset.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_file.h"

namespace deepinfer::bench {
namespace {

using Json = nlohmann::json;

bool is_human(const std::string& role) {
  return role == "human" || role == "user";
}
bool is_answer(const std::string& role) {
  return role == "gpt" || role == "assistant" || role == "chatgpt" || role == "bard" ||
         role == "model";
}

// A turn's speaker and text: ShareGPT's {"from", "value"}, or the chat {"role", "content"}.
bool read_turn(const Json& turn, std::string& role, std::string& text) {
  if (!turn.is_object()) return false;
  const auto from = turn.find(turn.contains("from") ? "from" : "role");
  const auto value = turn.find(turn.contains("value") ? "value" : "content");
  if (from == turn.end() || value == turn.end() || !from->is_string() || !value->is_string()) {
    return false;
  }
  role = from->get<std::string>();
  text = value->get<std::string>();
  return true;
}

std::optional<int64_t> output_len_of(const Json& object, const std::string& where) {
  for (const char* key : {"output_len", "max_tokens"}) {
    const auto it = object.find(key);
    if (it == object.end()) continue;
    DI_CHECK(it->is_number_integer() && it->get<int64_t>() >= 1, where, ": \"", key,
             "\" must be an integer >= 1");
    return it->get<int64_t>();
  }
  return std::nullopt;
}

enum class Shape { prompt, conversation };

// One element; nullopt for a conversation without a human turn (skipped, as vLLM skips
// conversations it cannot use).
std::optional<DatasetEntry> read_entry(const Json& value, const std::string& where,
                                       DatasetFormat format, Shape& shape) {
  const Json* turns = nullptr;
  if (value.is_object()) {
    for (const char* key : {"conversations", "conversation", "messages"}) {
      if (const auto it = value.find(key); it != value.end()) turns = &*it;
    }
  }
  if (format == DatasetFormat::sharegpt || turns) {
    DI_CHECK(turns && turns->is_array(), where,
             ": expected a ShareGPT conversation {\"conversations\": [{\"from\": \"human\", "
             "\"value\": ...}, ...]}");
    shape = Shape::conversation;
    DatasetEntry entry;
    entry.output_len = output_len_of(value, where);
    bool found = false;
    for (const Json& turn : *turns) {
      std::string role, text;
      if (!read_turn(turn, role, text)) continue;
      if (!found && is_human(role)) {
        entry.prompt = text;
        found = true;
      } else if (found && is_answer(role)) {
        entry.reference_output = text;
        break;
      } else if (found && is_human(role)) {
        break;  // a second question before any answer: no reference length
      }
    }
    if (!found) return std::nullopt;
    DI_CHECK(!entry.prompt.empty(), where, ": the first human turn is empty");
    return entry;
  }
  shape = Shape::prompt;
  DatasetEntry entry;
  if (value.is_string()) {
    entry.prompt = value.get<std::string>();
  } else if (value.is_object() && value.contains("prompt") && value["prompt"].is_string()) {
    entry.prompt = value["prompt"].get<std::string>();
    entry.output_len = output_len_of(value, where);
  } else {
    fail(where,
         ": expected a prompt: a string, {\"prompt\": \"...\"} or a ShareGPT conversation "
         "{\"conversations\": [...]}");
  }
  DI_CHECK(!entry.prompt.empty(), where, ": empty prompt");
  return entry;
}

}  // namespace

DatasetFormat parse_dataset_format(const std::string& name) {
  if (name == "sharegpt") return DatasetFormat::sharegpt;
  if (name == "auto" || name == "custom" || name == "json" || name == "jsonl") {
    return DatasetFormat::automatic;
  }
  fail("--dataset-name ", name, ": expected random, sharegpt or auto");
}

std::vector<DatasetEntry> parse_dataset(std::string_view text, const std::string& source,
                                        DatasetFormat format) {
  std::vector<std::pair<Json, std::string>> values;  // value, where (for errors)
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '[') {
    Json list;
    try {
      list = Json::parse(text);
    } catch (const Json::exception& e) {
      fail(source, ": malformed JSON: ", e.what());
    }
    for (size_t i = 0; i < list.size(); ++i) {
      values.emplace_back(std::move(list[i]), str_cat(source, ": element ", i + 1));
    }
  } else {
    size_t line_no = 0;
    while (!text.empty()) {
      ++line_no;
      const size_t eol = text.find('\n');
      const std::string_view line = text.substr(0, eol);
      text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const std::string where = str_cat(source, ":", line_no);
      try {
        values.emplace_back(Json::parse(line), where);
      } catch (const Json::exception& e) {
        fail(where, ": not valid JSON (a jsonl file holds one JSON value per line): ", e.what());
      }
    }
  }
  DI_CHECK(!values.empty(), source, ": no prompts in the dataset");
  std::vector<DatasetEntry> out;
  size_t conversations = 0;
  for (const auto& [value, where] : values) {
    Shape shape = Shape::prompt;
    auto entry = read_entry(value, where, format, shape);
    if (shape == Shape::conversation) ++conversations;
    if (entry) out.push_back(std::move(*entry));
  }
  DI_CHECK(!out.empty(), source, ": ShareGPT data without a human turn: none of its ",
           conversations,
           " conversations has a turn {\"from\": \"human\", \"value\": ...} to use as the prompt");
  return out;
}

std::vector<DatasetEntry> read_dataset(const std::string& path, DatasetFormat format) {
  DI_CHECK(std::filesystem::exists(path), path,
           ": no such dataset file (--dataset / --dataset-path)");
  return parse_dataset(read_text_file(path), path, format);
}

}  // namespace deepinfer::bench
