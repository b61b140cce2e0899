#include "tokenizer/post_processors.h"

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace deepinfer::tokenizer {
namespace {

// The ids of a special token entry of TemplateProcessing's "special_tokens" map.
std::vector<int32_t> special_ids(const nlohmann::json& specials, const std::string& name,
                                 const std::string& where) {
  const auto it = specials.find(name);
  DI_CHECK(it != specials.end() && it->is_object(), where, ": special token '", name,
           "' is used in the template but missing from \"special_tokens\"");
  std::vector<int32_t> ids;
  for (const auto& id : json_array(*it, "ids", where + " special_tokens." + name)) {
    DI_CHECK(id.is_number_integer(), where, ": special token '", name, "': ids must be integers");
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

// [token, id] pairs of BertProcessing / RobertaProcessing.
int32_t pair_id(const nlohmann::json& json, const char* key, const std::string& where) {
  const auto it = json.find(key);
  DI_CHECK(it != json.end() && it->is_array() && it->size() == 2 && (*it)[1].is_number_integer(),
           where, ": field \"", key, "\" must be [token, id]");
  return (*it)[1].get<int32_t>();
}

void make_into(const nlohmann::json& json, const std::string& source, PostProcessor& out) {
  const std::string type = json_type(json, "post_processor", source);
  const std::string where = source + ": post_processor " + type;
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const auto& item : json_array(json, "processors", where)) {
      // Each processor wraps the output of the previous one.
      PostProcessor inner;
      make_into(item, source, inner);
      out.prefix.insert(out.prefix.begin(), inner.prefix.begin(), inner.prefix.end());
      out.suffix.insert(out.suffix.end(), inner.suffix.begin(), inner.suffix.end());
    }
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    out.prefix.push_back(pair_id(json, "cls", where));
    out.suffix.push_back(pair_id(json, "sep", where));
    return;
  }
  if (type == "TemplateProcessing") {
    const auto specials_it = json.find("special_tokens");
    const nlohmann::json specials = specials_it != json.end() && specials_it->is_object()
                                        ? *specials_it
                                        : nlohmann::json::object();
    bool seen_sequence = false;
    for (const auto& piece : json_array(json, "single", where)) {
      if (const auto s = piece.find("SpecialToken"); s != piece.end()) {
        const auto ids = special_ids(specials, json_string(*s, "id", where), where);
        auto& side = seen_sequence ? out.suffix : out.prefix;
        side.insert(side.end(), ids.begin(), ids.end());
      } else if (piece.contains("Sequence")) {
        DI_CHECK(!seen_sequence, where, ": the single template uses the sequence twice");
        seen_sequence = true;
      } else {
        fail(where, ": template pieces must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      }
    }
    return;
  }
  fail(source, ": unsupported post_processor type '", type,
       "' (supported: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, "
       "Sequence)");
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& json,
                                                   const std::string& source) {
  if (json.is_null()) return nullptr;
  auto out = std::make_unique<PostProcessor>();
  make_into(json, source, *out);
  return out;
}

}  // namespace deepinfer::tokenizer
