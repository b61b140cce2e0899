#include "tokenizer/tiktoken_config.h"

#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/text_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tiktoken_model.h"

namespace deepinfer::tokenizer {
namespace {

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Reads the few Python expressions a pat_str is written with.
class PythonReader {
 public:
  explicit PythonReader(std::string_view code, size_t pos) : code_(code), pos_(pos) {}

  void skip_blank() {
    while (pos_ < code_.size()) {
      const char c = code_[pos_];
      if (c == '#') {
        while (pos_ < code_.size() && code_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\\') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  bool eat(std::string_view token) {
    skip_blank();
    if (code_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  // Adjacent string literals, concatenated.
  bool literals(std::string& out) {
    std::string one;
    if (!literal(one)) return false;
    out = one;
    while (literal(one)) out += one;
    return true;
  }
  // `value` := literals | literals ".join(" "[" literals, ... "]" ")" | "(" value ")".
  bool value(std::string& out) {
    if (eat("(")) return value(out) && eat(")");
    std::string separator;
    if (!literals(separator)) return false;
    if (!eat(".join")) {
      out = separator;
      return true;
    }
    if (!eat("(")) return false;
    const bool list = eat("[");
    if (!list && !eat("(")) return false;
    out.clear();
    std::string part;
    for (bool first = true; literals(part); first = false) {
      if (!first) out += separator;
      out += part;
      if (!eat(",")) break;
    }
    return eat(list ? "]" : ")") && eat(")");
  }

 private:
  bool literal(std::string& out) {
    skip_blank();
    size_t p = pos_;
    bool raw = false;
    while (p < code_.size() && p < pos_ + 2 &&
           std::string_view("rRuU").find(code_[p]) != std::string_view::npos) {
      raw |= code_[p] == 'r' || code_[p] == 'R';
      ++p;
    }
    if (p >= code_.size() || (code_[p] != '"' && code_[p] != '\'')) return false;
    const char quote = code_[p];
    const bool triple = code_.substr(p, 3) == std::string(3, quote);
    p += triple ? 3 : 1;
    out.clear();
    while (p < code_.size()) {
      const char c = code_[p];
      if (c == quote && (!triple || code_.substr(p, 3) == std::string(3, quote))) {
        pos_ = p + (triple ? 3 : 1);
        return true;
      }
      if (c == '\\' && p + 1 < code_.size()) {
        const char e = code_[p + 1];
        p += 2;
        if (raw) {
          out += c;
          out += e;
        } else if (e == 'n') {
          out += '\n';
        } else if (e == 'r') {
          out += '\r';
        } else if (e == 't') {
          out += '\t';
        } else if (e == '\\' || e == '\'' || e == '"') {
          out += e;
        } else if (e != '\n') {  // Python keeps an unknown escape as written
          out += c;
          out += e;
        }
        continue;
      }
      if (c == '\n' && !triple) return false;
      out += c;
      ++p;
    }
    return false;
  }

  std::string_view code_;
  size_t pos_;
};

// The module file of auto_map.AutoTokenizer ("[repo--]module.Class"), or "" without one.
std::string auto_map_module(const TokenizerConfig& config, const std::string& source) {
  const auto map = config.raw.find("auto_map");
  if (map == config.raw.end() || !map->is_object()) return "";
  const auto entry = map->find("AutoTokenizer");
  if (entry == map->end()) return "";
  std::string reference;
  if (entry->is_string()) {
    reference = entry->get<std::string>();
  } else if (entry->is_array()) {
    for (const auto& item : *entry) {
      if (item.is_string()) {
        reference = item.get<std::string>();
        break;
      }
    }
  }
  DI_CHECK(!reference.empty(), source, ": auto_map.AutoTokenizer: expected \"module.Class\"");
  if (const size_t repo = reference.find("--"); repo != std::string::npos) {
    reference.erase(0, repo + 2);
  }
  const size_t dot = reference.rfind('.');
  DI_CHECK(dot != std::string::npos && dot > 0, source, ": auto_map.AutoTokenizer: '", reference,
           "' is not \"module.Class\"");
  return reference.substr(0, dot) + ".py";
}

}  // namespace

std::optional<std::string> python_pat_str(std::string_view code, const std::string& source) {
  constexpr std::string_view kName = "pat_str";
  for (size_t at = code.find(kName); at != std::string_view::npos;
       at = code.find(kName, at + kName.size())) {
    if (at > 0 && (is_identifier_char(code[at - 1]) || code[at - 1] == '.')) continue;
    size_t p = at + kName.size();
    if (p < code.size() && is_identifier_char(code[p])) continue;
    while (p < code.size() && (code[p] == ' ' || code[p] == '\t')) ++p;
    if (p < code.size() && code[p] == ':') {  // a type annotation
      while (p < code.size() && code[p] != '=' && code[p] != '\n') ++p;
    }
    if (p >= code.size() || code[p] != '=' || code.substr(p, 2) == "==") continue;
    PythonReader reader(code, p + 1);
    std::string value;
    DI_CHECK(reader.value(value), source,
             ": pat_str: expected a string literal or \"|\".join([...]) of string literals");
    return value;
  }
  return std::nullopt;
}

std::string tiktoken_pattern(const std::string& model_dir, const TokenizerConfig& config,
                             const std::string& config_source) {
  const std::string module = auto_map_module(config, config_source);
  if (module.empty()) return std::string(kTiktokenDefaultPattern);
  const auto path = (std::filesystem::path(model_dir) / module).string();
  DI_CHECK(std::filesystem::exists(path), config_source, ": auto_map names the tokenizer module ",
           module, ", which is not in ", model_dir,
           " (its pat_str is the pre-tokenization regex of tiktoken.model)");
  const auto pattern = python_pat_str(read_text_file(path), path);
  DI_CHECK(pattern.has_value(), path,
           ": no pat_str (the pre-tokenization regex of tiktoken.model)");
  return *pattern;
}

nlohmann::json tiktoken_added_tokens(const TokenizerConfig& config, size_t num_ranks,
                                     const std::string& config_source) {
  std::map<int64_t, nlohmann::json> by_id;
  const auto decoder = config.raw.find("added_tokens_decoder");
  if (decoder != config.raw.end() && !decoder->is_null()) {
    const std::string where = config_source + ": added_tokens_decoder";
    DI_CHECK(decoder->is_object(), where, ": expected an object of id -> token");
    for (const auto& [key, value] : decoder->items()) {
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(key, &used);
        if (used != key.size()) id = -1;
      } catch (const std::exception&) {
      }
      DI_CHECK(id >= 0 && id < kMaxTokenId, where, ": key '", key, "' is not a token id below ",
               kMaxTokenId);
      DI_CHECK(static_cast<size_t>(id) >= num_ranks, where, "[", key,
               "]: the id is one of tiktoken.model's ranks (0..", num_ranks - 1, ")");
      nlohmann::json token = value.is_object() ? value : nlohmann::json::object();
      if (value.is_string()) token["content"] = value;
      if (!token.contains("special")) token["special"] = true;  // as the conversion adds them
      DI_CHECK(token.contains("content") && token["content"].is_string(), where, "[", key,
               "]: expected a string or an object with a string \"content\"");
      token["id"] = id;
      by_id[id] = std::move(token);
    }
  }
  nlohmann::json tokens = nlohmann::json::array();
  if (by_id.empty()) return tokens;
  constexpr int64_t kMaxReserved = 1 << 16;
  DI_CHECK(by_id.rbegin()->first - static_cast<int64_t>(num_ranks) < kMaxReserved, config_source,
           ": added_tokens_decoder: id ", by_id.rbegin()->first, " is more than ", kMaxReserved,
           " past the last rank of tiktoken.model (", num_ranks - 1,
           "); the ids between would all become reserved tokens");
  for (int64_t id = static_cast<int64_t>(num_ranks); id <= by_id.rbegin()->first; ++id) {
    const auto it = by_id.find(id);
    tokens.push_back(it != by_id.end()
                         ? it->second
                         : nlohmann::json{{"id", id},
                                          {"content", str_cat("<|reserved_token_", id, "|>")},
                                          {"special", true}});
  }
  return tokens;
}

}  // namespace deepinfer::tokenizer
