#pragma once
// Splits template text into tokens the way jinja2's lexer does with trim_blocks=True and
// lstrip_blocks=True: newlines normalised to \n, one trailing newline dropped, `{%-`/`-%}`
// whitespace control, `{%+`/`+%}` opt-outs, comments and {% raw %} blocks removed here.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer::jinja {

enum class TokenType {
  Data,           // literal template text
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,
  Integer,
  Float,
  Operator,
  Eof,
};

struct Token {
  TokenType type;
  std::string text;  // data, name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  size_t offset = 0;  // position in the normalised source, for error messages
};

struct LexResult {
  std::string source;  // normalised source (newlines), which offsets refer to
  std::vector<Token> tokens;
};

// Throws TemplateError (Syntax / Unsupported) with line and column.
LexResult lex(std::string_view source);

// 1-based line and column of a byte offset in the normalised source.
void offset_to_position(std::string_view source, size_t offset, int& line, int& column);

}  // namespace deepinfer::tokenizer::jinja
