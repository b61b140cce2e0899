#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "core/error.h"
#include "core/text_file.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoders.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {

struct Tokenizer::Impl {
  std::string source;
  TokenizerConfig config;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  std::unordered_map<int32_t, size_t> added_by_id;  // id -> index in added.tokens()
  // What decoding shows for each added token: its normalized form when it is matched
  // normalized and the normalizer changes it (as tokenizers' normalized_cache), else its
  // content.
  std::vector<std::string> added_decode_content;
  StringIdMap added_by_content;
  std::vector<bool> special_by_id;
  std::unique_ptr<Decoder> decoder;
  bool byte_level_decoder = false;
  bool byte_fallback_decoder = false;  // the chain has ByteFallback
  std::unique_ptr<PostProcessor> post_processor;
  bool raw_bytes = false;  // the final ByteLevel step is folded into the model
  int64_t vocab_size = 0;
  std::optional<int32_t> bos, eos;

  std::optional<std::string_view> token_of(int32_t id) const {
    if (const auto it = added_by_id.find(id); it != added_by_id.end()) {
      return std::string_view(added_decode_content[it->second]);
    }
    return model->id_to_token(id);
  }
  std::optional<int32_t> id_of(std::string_view token) const {
    if (const int32_t id = added_by_content.find(token); id >= 0) return id;
    if (const int32_t id = model->token_to_id(token); id >= 0) return id;
    return std::nullopt;
  }
  void encode_words(std::string text, bool at_start, std::vector<int32_t>& ids) const;
  void encode_normalized(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;
};

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

void Tokenizer::Impl::encode_words(std::string text, bool at_start,
                                   std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  PreTokenized pieces;
  pieces.spans.push_back({0, static_cast<uint32_t>(text.size()), at_start});
  pieces.text = std::move(text);
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
  const std::string_view all = pieces.text;
  for (const Span& span : pieces.spans) {
    model->tokenize(all.substr(span.begin, span.end - span.begin), raw_bytes, ids);
  }
}

void Tokenizer::Impl::encode_normalized(std::string_view text, bool at_start,
                                        std::vector<int32_t>& ids) const {
  std::string normalized(text);
  if (normalizer) {
    bool start_kept = true;
    normalizer->normalize(normalized, start_kept);
    at_start = at_start && start_kept;
  }
  if (!added.has_normalized_tokens()) {
    encode_words(std::move(normalized), at_start, ids);
    return;
  }
  std::vector<Segment> segments;
  added.split(normalized, true, segments);
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      encode_words(normalized.substr(seg.begin, seg.end - seg.begin), at_start && seg.begin == 0,
                   ids);
    }
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json_text(const std::string& text, const std::string& source,
                                    const TokenizerConfig& config) {
  TokenizerJson file = parse_tokenizer_json(text, source);
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

Tokenizer Tokenizer::load_dir(const std::string& model_dir) {
  const auto dir = std::filesystem::path(model_dir);
  const auto json_path = dir / "tokenizer.json";
  DI_CHECK(std::filesystem::exists(json_path), model_dir,
           ": no tokenizer.json (deepinfer reads the Hugging Face fast-tokenizer file; "
           "save it with tokenizer.save_pretrained() in transformers)");
  return load(json_path.string(), TokenizerConfig::load((dir / "tokenizer_config.json").string()));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::string repaired;
  if (!unicode::is_valid_utf8(text)) {
    repaired = unicode::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segments;
  m.added.split(text, false, segments);
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      m.encode_normalized(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, ids);
    }
  }
  if (add_special_tokens && m.post_processor) m.post_processor->apply(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  const auto skipped = [&](int32_t id) {
    return skip_special_tokens && id >= 0 && id < m.vocab_size &&
           m.special_by_id[static_cast<size_t>(id)];
  };
  if (m.byte_level_decoder) {
    std::string bytes;
    for (const int32_t id : ids) {
      const auto token = m.token_of(id);
      if (!token || skipped(id)) continue;
      if (!byte_level::decode(*token, bytes)) bytes += *token;
    }
    return unicode::is_valid_utf8(bytes) ? bytes : unicode::to_valid_utf8(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const auto token = m.token_of(id);
    if (token && !skipped(id)) tokens.emplace_back(*token);
  }
  std::string out;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const auto& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->id_of(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const auto token = impl_->token_of(id);
  return token ? std::string(*token) : std::string();
}

int64_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

bool Tokenizer::is_special(int32_t id) const {
  const auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added.tokens()[it->second].special;
}

const TokenizerConfig& Tokenizer::config() const {
  return impl_->config;
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos;
}

}  // namespace deepinfer::tokenizer

namespace deepinfer::tokenizer {

bool Tokenizer::ends_mid_character(std::span<const int32_t> window, std::span<const int32_t> fresh,
                                   bool skip_special_tokens) const {
  const Impl& m = *impl_;
  const auto contributes = [&](int32_t id) {
    return m.token_of(id).has_value() && !(skip_special_tokens && id >= 0 && id < m.vocab_size &&
                                           m.special_by_id[static_cast<size_t>(id)]);
  };
  if (m.byte_level_decoder) {
    // Exact: look at the raw bytes of the last tokens before the lossy repair.
    std::string tail;
    for (size_t i = window.size(); i-- > 0 && tail.size() < 4;) {
      const int32_t id = window[i];
      if (!contributes(id)) continue;
      const std::string_view token = *m.token_of(id);
      std::string bytes;
      if (!byte_level::decode(token, bytes)) bytes = token;
      tail.insert(0, bytes);
    }
    return unicode::ends_with_incomplete_sequence(tail);
  }
  // ByteFallback turns a whole run of <0xXX> tokens into U+FFFDs when any byte of it is
  // invalid, so a run may change until a token that is not a byte closes it.
  if (m.byte_fallback_decoder) {
    for (size_t i = window.size(); i-- > 0;) {
      if (!contributes(window[i])) continue;
      const std::string_view token = *m.token_of(window[i]);
      if (token.size() == 6 && token.starts_with("<0x") && token.ends_with(">")) return true;
      break;
    }
  }
  // Other decoders: a trailing U+FFFD is treated as open while at most 4 contributing ids
  // are pending (a UTF-8 character has at most 4 bytes, each token gives at least one).
  size_t pending = 0;
  for (const int32_t id : fresh) pending += contributes(id) ? 1 : 0;
  return pending <= 4 && decode(window, skip_special_tokens).ends_with("\xEF\xBF\xBD");
}

}  // namespace deepinfer::tokenizer
