// json.dumps as Python writes it (transformers' tojson filter): separators, indentation,
// sort_keys, float repr, ensure_ascii escapes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja {

namespace {

// Namespaces are not serializable, so nesting here is containers only (no cycles).
void enter(int depth) {
  check_print_depth(depth, "to serialize");
}

void write_json_string(BoundedText& w, std::string_view s, bool ensure_ascii) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      append_hex(out, "\\u", c, 4);
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
    } else {
      // Decode one code point; escape it (as a surrogate pair above the BMP).
      size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
      const std::u32string cp = unicode::decode(s.substr(i, len));
      char32_t u = cp.empty() ? 0xFFFD : cp[0];
      if (u >= 0x10000) {
        u -= 0x10000;
        append_hex(out, "\\u", 0xD800 + (u >> 10), 4);
        append_hex(out, "\\u", 0xDC00 + (u & 0x3FF), 4);
      } else {
        append_hex(out, "\\u", u, 4);
      }
      i += len - 1;
    }
  }
  out += '"';
  w.add(out);
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return float_repr(f);
}

struct JsonWriter {
  BoundedText& w;
  const JsonOptions& o;
  std::string item_sep, key_sep;

  void newline(int level) {
    if (!o.indent) return;
    w.add('\n');
    for (int i = 0; i < level; ++i) w.add(*o.indent);
  }

  std::string key_text(const Value& key) {
    switch (key.type()) {
      case Type::String:
        return key.str();
      case Type::Bool:
        return key.as_bool() ? "true" : "false";
      case Type::None:
        return "null";
      case Type::Int:
        return std::to_string(key.as_int());
      case Type::Float:
        return json_float(key.as_float());
      default:
        runtime_fail("tojson: keys must be str, int, float, bool or None, not ", type_name(key));
    }
  }

  void write(const Value& v, int level) {
    enter(level);
    switch (v.type()) {
      case Type::None:
        w.add("null");
        return;
      case Type::Bool:
        w.add(v.as_bool() ? "true" : "false");
        return;
      case Type::Int:
        w.add(std::to_string(v.as_int()));
        return;
      case Type::Float:
        w.add(json_float(v.as_float()));
        return;
      case Type::String:
        write_json_string(w, v.str(), o.ensure_ascii);
        return;
      case Type::List: {
        const SeqKind kind = v.list_data().kind;
        if (kind != SeqKind::List && kind != SeqKind::Tuple) break;
        const ValueList& items = v.items();
        if (items.empty()) {
          w.add("[]");
          return;
        }
        w.add('[');
        newline(level + 1);
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) {
            w.add(item_sep);
            newline(level + 1);
          }
          write(items[i], level + 1);
        }
        newline(level);
        w.add(']');
        return;
      }
      case Type::Dict: {
        const auto& entries = v.dict().entries();
        if (entries.empty()) {
          w.add("{}");
          return;
        }
        std::vector<const std::pair<Value, Value>*> order;
        for (const auto& e : entries) order.push_back(&e);
        if (o.sort_keys) {
          std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
            return python_less(a->first, b->first);
          });
        }
        w.add('{');
        newline(level + 1);
        bool first = true;
        for (const auto* e : order) {
          if (!first) {
            w.add(item_sep);
            newline(level + 1);
          }
          first = false;
          write_json_string(w, key_text(e->first), o.ensure_ascii);
          w.add(key_sep);
          write(e->second, level + 1);
        }
        newline(level);
        w.add('}');
        return;
      }
      default:
        break;
    }
    runtime_fail("tojson: Object of type ", type_name(v), " is not JSON serializable");
  }
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, size_t max_bytes) {
  BoundedText w(max_bytes, "JSON text");
  JsonWriter jw{w, options, options.item_sep.value_or(options.indent ? "," : ", "),
                options.key_sep.value_or(": ")};
  jw.write(v, 0);
  return w.take();
}

}  // namespace deepinfer::tokenizer::jinja
