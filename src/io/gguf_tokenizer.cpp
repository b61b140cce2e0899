// tokenizer.json / tokenizer_config.json from a GGUF file's `tokenizer.ggml.*` keys.
// llama.cpp stores a byte-level BPE vocabulary ("gpt2" model) as token strings, token
// types, "a b" merges and a pre-tokenizer name; the name stands for a list of split regexes
// (llama-vocab.cpp), which become Split pre-tokenizers here, in the original tokenizer.json
// spelling of each model family, so text tokenizes as llama.cpp tokenizes it.
#include <map>
#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "io/gguf_model.h"

namespace deepinfer::io {
namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type).
constexpr int64_t kTokenUnknown = 2;
constexpr int64_t kTokenControl = 3;
constexpr int64_t kTokenUserDefined = 4;

constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kDeepseekV3Regex =
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

// Each pre-tokenizer name: the regexes applied one after the other (each match and each gap
// between matches becomes a piece), as llama.cpp's llm_tokenizer_bpe lists them.
const std::map<std::string_view, std::vector<std::string>>& split_regexes() {
  static const std::map<std::string_view, std::vector<std::string>> table = {
      {"gpt2", {kGpt2Regex}},
      {"gpt-2", {kGpt2Regex}},
      {"mpt", {kGpt2Regex}},
      {"olmo", {kGpt2Regex}},
      {"smollm", {"\\p{N}", kGpt2Regex}},
      {"starcoder", {"\\p{N}", kGpt2Regex}},
      {"refact", {"\\p{N}", kGpt2Regex}},
      {"codeshell", {"\\p{N}", kGpt2Regex}},
      {"llama-bpe", {kLlama3Regex}},
      {"llama3", {kLlama3Regex}},
      {"dbrx", {kLlama3Regex}},
      {"smaug-bpe", {kLlama3Regex}},
      {"chatglm-bpe", {kLlama3Regex}},
      {"glm4", {kLlama3Regex}},
      {"qwen2", {kQwen2Regex}},
      {"stablelm2", {kQwen2Regex}},
      {"deepseek-v3", {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", kDeepseekV3Regex}},
      {"deepseek-llm",
       {"[\r\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-"
        "ԯԱ-"
        "ՖႠ-"
        "ჅᎠ-"
        "Ᏽᏸ-"
        "ᏽᲐ-"
        "ᲺᲽ-"
        "Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-"
        "ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-"
        "ꚛꜢ-"
        "ꝯ"
        "ꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-"
        "𐳲𑢠-"
        "𑣟𞤀-"
        "𞥃]"
        "+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}},
      {"deepseek-coder",
       {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
  };
  return table;
}

json pre_tokenizer_for(const GgufFile& file) {
  std::string pre = file.get_string("tokenizer.ggml.pre").value_or("");
  if (pre.empty() || pre == "default") {
    log::warn(file.path(),
              ": no tokenizer.ggml.pre; splitting text as GPT-2 does (llama.cpp's "
              "default), which may tokenize some text differently from the model's "
              "original tokenizer");
    pre = "gpt2";
  }
  const auto& table = split_regexes();
  const auto it = table.find(pre);
  if (it == table.end()) {
    std::string known;
    for (const auto& entry : table)
      known += std::string(known.empty() ? "" : ", ") + std::string(entry.first);
    fail(file.path(), ": tokenizer.ggml.pre '", pre,
         "' is not a pre-tokenizer we know (known: ", known, ")");
  }
  json steps = json::array();
  for (const std::string& regex : it->second) {
    steps.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", regex}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
  }
  steps.push_back({{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", false},
                   {"use_regex", false}});
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

const std::vector<std::string>& string_array(const GgufFile& file, const std::string& key) {
  const GgufArray* array = file.get_array(key);
  if (array == nullptr) fail(file.path(), ": metadata ", key, " is missing");
  const auto* strings = std::get_if<std::vector<std::string>>(&array->values);
  if (strings == nullptr) fail(file.path(), ": metadata ", key, " must be an array of strings");
  return *strings;
}

std::vector<int64_t> token_types(const GgufFile& file, size_t count) {
  std::vector<int64_t> types(count, 1);
  const GgufArray* array = file.get_array("tokenizer.ggml.token_type");
  if (array == nullptr) return types;
  if (array->size() != count) {
    fail(file.path(), ": tokenizer.ggml.token_type has ", array->size(), " entries for ", count,
         " tokens");
  }
  if (const auto* s = std::get_if<std::vector<int64_t>>(&array->values)) return *s;
  if (const auto* u = std::get_if<std::vector<uint64_t>>(&array->values)) {
    for (size_t i = 0; i < count; ++i) types[i] = static_cast<int64_t>((*u)[i]);
    return types;
  }
  fail(file.path(), ": tokenizer.ggml.token_type must be an array of integers");
}

std::optional<std::string> token_text(const GgufFile& file, const std::vector<std::string>& tokens,
                                      const char* key) {
  const auto id = file.get_int(key);
  if (!id) return std::nullopt;
  if (*id < 0 || static_cast<size_t>(*id) >= tokens.size()) {
    fail(file.path(), ": metadata ", key, " = ", *id, " is not a token id (", tokens.size(),
         " tokens)");
  }
  return tokens[static_cast<size_t>(*id)];
}

json post_processor(const std::optional<std::string>& bos, bool add_bos,
                    const std::optional<std::string>& eos, bool add_eos, int64_t bos_id,
                    int64_t eos_id) {
  if (!(add_bos && bos) && !(add_eos && eos)) return nullptr;
  json single = json::array();
  json special = json::object();
  if (add_bos && bos) {
    single.push_back({{"SpecialToken", {{"id", *bos}, {"type_id", 0}}}});
    special[*bos] = {{"id", *bos}, {"ids", {bos_id}}, {"tokens", {*bos}}};
  }
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (add_eos && eos) {
    single.push_back({{"SpecialToken", {{"id", *eos}, {"type_id", 0}}}});
    special[*eos] = {{"id", *eos}, {"ids", {eos_id}}, {"tokens", {*eos}}};
  }
  json pair = single;
  pair.push_back({{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", pair},
          {"special_tokens", special}};
}

}  // namespace

std::optional<GgufTokenizerFiles> gguf_tokenizer_files(const GgufFile& file) {
  const auto model = file.get_string("tokenizer.ggml.model");
  if (!model) return std::nullopt;
  if (*model != "gpt2") {
    fail(file.path(), ": tokenizer.ggml.model '", *model,
         "' is not supported (only byte-level BPE, \"gpt2\", is read from GGUF; SentencePiece "
         "\"llama\" vocabularies need the model's tokenizer.json)");
  }
  const std::vector<std::string>& tokens = string_array(file, "tokenizer.ggml.tokens");
  const std::vector<std::string>& merges = string_array(file, "tokenizer.ggml.merges");
  const std::vector<int64_t> types = token_types(file, tokens.size());

  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab[tokens[id]] = id;
    const int64_t type = types[id];
    if (type == kTokenControl || type == kTokenUserDefined || type == kTokenUnknown) {
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type != kTokenUserDefined}});
    }
  }
  if (vocab.size() != tokens.size()) {
    fail(file.path(), ": tokenizer.ggml.tokens holds duplicate token strings (",
         tokens.size() - vocab.size(), " duplicates)");
  }

  const auto bos = token_text(file, tokens, "tokenizer.ggml.bos_token_id");
  const auto eos = token_text(file, tokens, "tokenizer.ggml.eos_token_id");
  const auto unk = token_text(file, tokens, "tokenizer.ggml.unknown_token_id");
  const auto pad = token_text(file, tokens, "tokenizer.ggml.padding_token_id");
  // Current converters always write both flags; an absent flag adds nothing.
  const bool add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
  const bool add_eos = file.get_bool("tokenizer.ggml.add_eos_token").value_or(false);

  GgufTokenizerFiles out;
  out.tokenizer = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre_tokenizer_for(file)},
      {"post_processor", post_processor(bos, add_bos, eos, add_eos,
                                        file.get_int("tokenizer.ggml.bos_token_id").value_or(0),
                                        file.get_int("tokenizer.ggml.eos_token_id").value_or(0))},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", false},
        {"use_regex", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  json& config = out.tokenizer_config;
  config = json::object();
  if (bos) config["bos_token"] = *bos;
  if (eos) config["eos_token"] = *eos;
  if (unk) config["unk_token"] = *unk;
  if (pad) config["pad_token"] = *pad;
  config["add_bos_token"] = add_bos;
  config["add_eos_token"] = add_eos;
  if (auto tmpl = file.get_string("tokenizer.chat_template")) config["chat_template"] = *tmpl;
  if (auto ctx =
          file.get_int(file.get_string("general.architecture").value_or("") + ".context_length")) {
    config["model_max_length"] = *ctx;
  }
  return out;
}

}  // namespace deepinfer::io
