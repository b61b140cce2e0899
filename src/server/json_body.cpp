#include "server/json_body.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/errors.h"

namespace deepinfer::server {

namespace {

using Json = nlohmann::ordered_json;
using Entries = Json::object_t::Container;  // ordered_map is a vector of (key, value) pairs

// Below this many keys a linear search for a duplicate is cheaper than a hash index.
constexpr size_t kIndexFrom = 16;

ApiError invalid_json(const std::string& why) {
  return ApiError(400, str_cat("the request body is not valid JSON: ", why), "", "invalid_json");
}

// A nlohmann SAX handler that builds an ordered_json with one append per value.
class LinearBuilder {
 public:
  explicit LinearBuilder(const JsonBodyLimits& limits) : limits_(limits) {}

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return put(Json(v)); }
  // The lexer clears its buffer before the next token: the text can be moved, not copied (a
  // multi-megabyte prompt is then held once).
  bool string(Json::string_t& v) { return put(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return put(Json::binary(std::move(v))); }
  bool start_object(std::size_t /*unknown*/) { return open(Json::object()); }
  bool start_array(std::size_t /*unknown*/) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(Json::string_t& name);
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    error_ = invalid_json(e.what());
    return false;
  }

  Json take() { return std::move(root_); }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  struct Open {
    Open(Json* value, std::string name) : value(value), name(std::move(name)) {}
    Json* value;
    std::string name;  // how its parent reaches it: "key" or "[i]" ("" for the body)
    size_t slot = 0;   // objects: the entry of the last key, where its value goes
    std::unordered_map<std::string, size_t> index;  // objects from kIndexFrom keys on
  };

  bool put(Json&& value);
  bool open(Json&& container);
  bool close() {
    stack_.pop_back();
    return true;
  }
  std::optional<size_t> find_key(Open& object, const std::string& name);
  std::string path() const;
  static Entries& entries(const Open& object) {
    return static_cast<Entries&>(object.value->get_ref<Json::object_t&>());
  }

  const JsonBodyLimits& limits_;
  Json root_;
  std::vector<Open> stack_;
  std::optional<ApiError> error_;
};

bool LinearBuilder::put(Json&& value) {
  if (stack_.empty()) {
    root_ = std::move(value);
    return true;
  }
  Open& parent = stack_.back();
  if (parent.value->is_array()) {
    parent.value->get_ref<Json::array_t&>().push_back(std::move(value));
    return true;
  }
  entries(parent)[parent.slot].second = std::move(value);
  return true;
}

bool LinearBuilder::open(Json&& container) {
  if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
    error_ =
        ApiError(400, str_cat("the request body nests deeper than ", limits_.max_depth, " levels"),
                 "", "invalid_json");
    return false;
  }
  if (stack_.empty()) {
    root_ = std::move(container);
    stack_.emplace_back(&root_, "");
    return true;
  }
  Open& parent = stack_.back();
  if (parent.value->is_array()) {
    auto& items = parent.value->get_ref<Json::array_t&>();
    std::string name = str_cat("[", items.size(), "]");
    items.push_back(std::move(container));
    stack_.emplace_back(&items.back(), std::move(name));
    return true;
  }
  auto& entry = entries(parent)[parent.slot];
  entry.second = std::move(container);
  stack_.emplace_back(&entry.second, entry.first);
  return true;
}

std::optional<size_t> LinearBuilder::find_key(Open& object, const std::string& name) {
  const Entries& keys = entries(object);
  if (keys.size() < kIndexFrom) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].first == name) return i;
    }
    return std::nullopt;
  }
  if (object.index.empty()) {
    for (size_t i = 0; i < keys.size(); ++i) object.index.emplace(keys[i].first, i);
  }
  const auto it = object.index.find(name);
  if (it == object.index.end()) return std::nullopt;
  return it->second;
}

bool LinearBuilder::key(Json::string_t& name) {
  Open& object = stack_.back();
  Entries& keys = entries(object);
  // A repeated key keeps its first place and takes the last value, as nlohmann's parser does.
  if (const auto at = find_key(object, name)) {
    object.slot = *at;
    return true;
  }
  if (keys.size() >= limits_.max_object_keys) {
    const std::string where = path();
    const std::string param = stack_.size() > 1 ? stack_[1].name : "";
    error_ = ApiError(
        400,
        str_cat(where.empty() ? "the request body" : "'" + where + "'", " has more than ",
                limits_.max_object_keys, " keys (the most one JSON object in a request may have)"),
        param);
    return false;
  }
  object.slot = keys.size();
  if (!object.index.empty()) object.index.emplace(name, object.slot);
  keys.emplace_back(std::move(name), Json());
  return true;
}

// "tools[0].function.parameters": the open containers below the body.
std::string LinearBuilder::path() const {
  std::string out;
  for (size_t i = 1; i < stack_.size(); ++i) {
    const std::string& name = stack_[i].name;
    if (!out.empty() && (name.empty() || name.front() != '[')) out += '.';
    out += name;
  }
  return out;
}

}  // namespace

nlohmann::ordered_json parse_json_body(std::string_view body, const JsonBodyLimits& limits) {
  // JSON text has no raw NUL (in strings it is escaped), and nlohmann's lexer would stop at
  // one as at the end of the input, dropping what follows.
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) {
    throw invalid_json(str_cat("a NUL byte at offset ", nul));
  }
  LinearBuilder builder(limits);
  const bool ok = Json::sax_parse(body.begin(), body.end(), &builder);
  if (!ok || builder.error()) {
    if (builder.error()) throw *builder.error();
    throw invalid_json("parse failed");
  }
  return builder.take();
}

}  // namespace deepinfer::server
