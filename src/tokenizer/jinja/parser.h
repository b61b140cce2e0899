#pragma once
// Parses template text into statements, as jinja2's parser does (with the loopcontrols
// extension and transformers' {% generation %} tag). Constructs this interpreter does not
// implement fail here, naming the construct, so a template never renders wrong text.
#include <string>
#include <string_view>

#include "tokenizer/jinja/ast.h"

namespace deepinfer::tokenizer::jinja {

struct ParsedTemplate {
  std::string source;  // normalised source; offsets in the tree refer to it
  Body body;
};

// max_depth bounds statement nesting and expression depth. Throws TemplateError.
ParsedTemplate parse_template(std::string_view source, int max_depth);

}  // namespace deepinfer::tokenizer::jinja
