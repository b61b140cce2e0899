// Building a Tokenizer from tokenizer.json (+ tokenizer_config.json): the components, the
// added tokens, and transformers' rules for BOS/EOS.
#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "core/text_file.h"
#include "io/gguf_model.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/tiktoken_config.h"
#include "tokenizer/tiktoken_model.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json.h"

namespace deepinfer::tokenizer {

namespace {

std::unique_ptr<BpeModel> make_model(TokenizerJson& file, const std::string& source) {
  const auto it = file.doc.find("model");
  DI_CHECK(it != file.doc.end() && it->is_object(), source, ": missing \"model\" object");
  const nlohmann::json& model = *it;
  std::string type = json_string_or(model, "type", "", source + ": model");
  if (type.empty() && file.has_merges) type = "BPE";  // very old files omit the type
  DI_CHECK(type == "BPE", source, ": unsupported model type '", type,
           "' (supported: BPE; WordPiece, Unigram and WordLevel tokenizers are not)");
  DI_CHECK(file.has_vocab, source, ": model.vocab is missing or not an object");
  DI_CHECK(!model.contains("merges"), source, ": model.merges must be an array");
  const std::string where = source + ": model";
  BpeOptions options;
  if (const auto unk = model.find("unk_token"); unk != model.end() && unk->is_string()) {
    options.unk_token = unk->get<std::string>();
  }
  options.continuing_subword_prefix = json_string_or(model, "continuing_subword_prefix", "", where);
  options.end_of_word_suffix = json_string_or(model, "end_of_word_suffix", "", where);
  options.fuse_unk = json_bool(model, "fuse_unk", false, where);
  options.byte_fallback = json_bool(model, "byte_fallback", false, where);
  options.ignore_merges = json_bool(model, "ignore_merges", false, where);
  return std::make_unique<BpeModel>(std::move(file.vocab), std::move(file.merges),
                                    std::move(options), source);
}

// Nesting depth of a JSON value, without recursion (a hostile file cannot overflow the
// stack here; the component builders below recurse only after this check).
size_t json_depth(const nlohmann::json& root) {
  size_t max_depth = 0;
  std::vector<std::pair<const nlohmann::json*, size_t>> stack = {{&root, 1}};
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    max_depth = std::max(max_depth, depth);
    if (node->is_structured()) {
      for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
    }
  }
  return max_depth;
}

bool contains_type(const nlohmann::json& json, const char* type) {
  if (json.is_object()) {
    if (const auto it = json.find("type"); it != json.end() && *it == type) return true;
  }
  if (json.is_structured()) {
    for (const auto& child : json) {
      if (contains_type(child, type)) return true;
    }
  }
  return false;
}

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& doc, const std::string& source) {
  std::vector<AddedToken> tokens;
  const auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return tokens;
  DI_CHECK(it->is_array(), source, ": \"added_tokens\" must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& entry = (*it)[i];
    const std::string where = str_cat(source, ": added_tokens[", i, "]");
    DI_CHECK(entry.is_object(), where, ": expected an object");
    AddedToken token;
    token.content = json_string(entry, "content", where);
    const int64_t id = json_int(entry, "id", -1, where);
    DI_CHECK(id >= 0 && id < kMaxTokenId, where, ": missing or invalid \"id\" (ids must be below ",
             kMaxTokenId, ")");
    token.id = static_cast<int32_t>(id);
    token.single_word = json_bool(entry, "single_word", false, where);
    token.lstrip = json_bool(entry, "lstrip", false, where);
    token.rstrip = json_bool(entry, "rstrip", false, where);
    token.special = json_bool(entry, "special", false, where);
    token.normalized = json_bool(entry, "normalized", !token.special, where);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// transformers 4.x tokenizer classes that rebuild the post-processor from add_bos_token /
// add_eos_token (with these defaults), ignoring the one in tokenizer.json.
struct BosEosDefaults {
  const char* name;
  bool add_bos;
  bool add_eos;
};
constexpr BosEosDefaults kRebuildingClasses[] = {
    {"LlamaTokenizer", true, false},    {"CodeLlamaTokenizer", true, false},
    {"GemmaTokenizer", true, false},    {"CohereTokenizer", true, false},
    {"GPTNeoXTokenizer", false, false},
};

}  // namespace

Tokenizer Tokenizer::from_json_text(const std::string& text, const std::string& source,
                                    const TokenizerConfig& config) {
  return from_tokenizer_json(parse_tokenizer_json(text, source), source, config);
}

Tokenizer Tokenizer::from_tokenizer_json(TokenizerJson file, const std::string& source,
                                         const TokenizerConfig& config) {
  DI_CHECK(json_depth(file.doc) <= 64, source, ": JSON nested more than 64 levels deep");
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  impl->config = config;
  const nlohmann::json& doc = file.doc;
  const auto field = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json null_json;
    const auto it = doc.find(key);
    return it == doc.end() ? null_json : *it;
  };

  impl->model = make_model(file, source);
  impl->normalizer = make_normalizer(field("normalizer"), source);
  if (impl->normalizer) {
    const double expansion = impl->normalizer->max_expansion();
    if (expansion > static_cast<double>(TextBudget::kExpansionFactor)) {
      log::warn(source, ": the normalizer can make text up to ", expansion,
                "x longer; prompts it grows past ", TextBudget::kExpansionFactor, "x their size (+",
                TextBudget::kSlackBytes / 1024, " KiB) are refused (400) rather than tokenized");
    }
  }
  PreTokenizerOptions options;
  impl->raw_bytes =
      ends_with_byte_level(field("pre_tokenizer")) && impl->model->supports_raw_bytes();
  options.defer_final_byte_level = impl->raw_bytes;
  impl->pre_tokenizer = make_pre_tokenizer(field("pre_tokenizer"), source, options);
  impl->decoder = make_decoder(field("decoder"), source);
  impl->byte_level_decoder = is_plain_byte_level(field("decoder"));
  impl->byte_fallback_decoder = contains_type(field("decoder"), "ByteFallback");
  impl->post_processor = make_post_processor(field("post_processor"), source);

  std::vector<AddedToken> added = parse_added_tokens(doc, source);
  int64_t max_id = impl->model->max_id();
  for (size_t i = 0; i < added.size(); ++i) {
    impl->added_by_id[added[i].id] = i;
    impl->added_by_content.insert(added[i].content, added[i].id);
    max_id = std::max<int64_t>(max_id, added[i].id);
  }
  impl->vocab_size = max_id + 1;
  impl->special_by_id.assign(static_cast<size_t>(impl->vocab_size), false);
  for (const auto& token : added) {
    if (!token.special) continue;
    impl->special_by_id[static_cast<size_t>(token.id)] = true;
    // `tokenizers` skips by content, so a model token spelled the same is skipped too.
    if (const int32_t id = impl->model->token_to_id(token.content); id >= 0) {
      impl->special_by_id[static_cast<size_t>(id)] = true;
    }
  }
  for (const auto& token : added) {
    std::string shown = token.content;
    if (token.normalized && impl->normalizer) impl->normalizer->normalize(shown);
    impl->added_decode_content.push_back(std::move(shown));
  }
  impl->added = AddedVocabulary(std::move(added), impl->normalizer.get());

  if (config.bos_token) impl->bos = impl->id_of(*config.bos_token);
  if (config.eos_token) impl->eos = impl->id_of(*config.eos_token);

  // transformers 4.x: Llama-style fast tokenizers replace the post-processor with
  // "[bos] $A [eos]" from add_bos_token / add_eos_token (DeepSeek-V3 gets its BOS this way).
  if (const auto it = config.raw.find("tokenizer_class");
      it != config.raw.end() && it->is_string()) {
    std::string name = it->get<std::string>();
    if (name.size() > 4 && name.ends_with("Fast")) name.resize(name.size() - 4);
    for (const auto& rule : kRebuildingClasses) {
      if (name != rule.name) continue;
      auto rebuilt = std::make_unique<PostProcessor>();
      if (config.add_bos_token.value_or(rule.add_bos) && impl->bos) {
        rebuilt->prefix.push_back(*impl->bos);
      }
      if (config.add_eos_token.value_or(rule.add_eos) && impl->eos) {
        rebuilt->suffix.push_back(*impl->eos);
      }
      impl->post_processor = std::move(rebuilt);
    }
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::string& tokenizer_json_path, const TokenizerConfig& config) {
  DI_CHECK(std::filesystem::exists(tokenizer_json_path), tokenizer_json_path,
           ": tokenizer file not found");
  return from_json_text(read_text_file(tokenizer_json_path), tokenizer_json_path, config);
}

Tokenizer Tokenizer::load_tiktoken(const std::string& tiktoken_model_path,
                                   const TokenizerConfig& config, const std::string& pattern) {
  DI_CHECK(std::filesystem::exists(tiktoken_model_path), tiktoken_model_path,
           ": tokenizer file not found");
  const std::vector<std::string> ranks =
      parse_tiktoken_ranks(read_text_file(tiktoken_model_path), tiktoken_model_path);
  const std::string config_source =
      (std::filesystem::path(tiktoken_model_path).parent_path() / "tokenizer_config.json").string();
  return from_tokenizer_json(
      tiktoken_tokenizer_json(ranks, pattern,
                              tiktoken_added_tokens(config, ranks.size(), config_source)),
      tiktoken_model_path, config);
}

Tokenizer Tokenizer::load_dir(const std::string& model_dir) {
  if (const auto gguf = io::gguf_model_file(model_dir)) {
    const auto files = io::gguf_tokenizer_files(io::GgufFile::open(*gguf));
    DI_CHECK(files.has_value(), *gguf, ": carries no tokenizer (no tokenizer.ggml.model)");
    return from_json_text(files->tokenizer.dump(), *gguf,
                          TokenizerConfig::parse(files->tokenizer_config, *gguf));
  }
  const auto dir = std::filesystem::path(model_dir);
  const auto json_path = dir / "tokenizer.json";
  const auto config_path = (dir / "tokenizer_config.json").string();
  const auto tiktoken_path = dir / "tiktoken.model";
  if (!std::filesystem::exists(json_path) && std::filesystem::exists(tiktoken_path)) {
    const TokenizerConfig config = TokenizerConfig::load(config_path);
    return load_tiktoken(tiktoken_path.string(), config,
                         tiktoken_pattern(model_dir, config, config_path));
  }
  DI_CHECK(std::filesystem::exists(json_path), model_dir,
           ": no tokenizer.json or tiktoken.model (deepinfer reads the Hugging Face "
           "fast-tokenizer file; save it with tokenizer.save_pretrained() in transformers)");
  return load(json_path.string(), TokenizerConfig::load(config_path));
}

}  // namespace deepinfer::tokenizer
