#include "tokenizer/jinja/template.h"

#include <new>

namespace deepinfer::tokenizer::jinja {

Template Template::parse(std::string_view source, const Limits& limits) {
  Template t;
  t.limits_ = limits;
  try {
    t.parsed_ = std::make_shared<const ParsedTemplate>(parse_template(source, limits.max_depth));
  } catch (const Failure& f) {
    throw TemplateError(f.kind, f.message, 0, 0);
  }
  return t;
}

std::string Template::render(const Dict& variables) const {
  Interpreter interpreter(*parsed_, limits_);
  try {
    return interpreter.render(variables);
  } catch (const Failure& f) {
    // Raised outside any statement (e.g. while setting up); no position to report.
    throw TemplateError(f.kind, f.message, 0, 0);
  } catch (const std::bad_alloc&) {
    throw TemplateError(ErrorKind::Limit, "out of memory while rendering", 0, 0);
  }
}

}  // namespace deepinfer::tokenizer::jinja
