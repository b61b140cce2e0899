#pragma once
// Decodes the inside of a template string literal the way jinja2 does: Python's
// unicode-escape codec applied after backslash-replacing non-ASCII characters.
#include <string>
#include <string_view>

#include "tokenizer/jinja/error.h"

namespace deepinfer::tokenizer::jinja {

// Returns false with `problem` and `kind` set when the literal cannot be decoded.
bool decode_string_literal(std::string_view raw, std::string& out, std::string& problem,
                           ErrorKind& kind);

}  // namespace deepinfer::tokenizer::jinja
