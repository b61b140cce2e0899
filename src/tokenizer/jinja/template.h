#pragma once
// Public entry point of the Jinja interpreter: parse once, render many times. Renders are
// independent and const, so one Template may be rendered from several threads at once.
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/value.h"

namespace deepinfer::tokenizer::jinja {

class Template {
 public:
  // Throws TemplateError (Syntax / Unsupported / Limit) naming line and column.
  static Template parse(std::string_view source, const Limits& limits = Limits());
  // Renders with `variables` visible to the template. Throws TemplateError.
  std::string render(const Dict& variables) const;

  const Limits& limits() const { return limits_; }

 private:
  std::shared_ptr<const ParsedTemplate> parsed_;
  Limits limits_;
};

}  // namespace deepinfer::tokenizer::jinja
