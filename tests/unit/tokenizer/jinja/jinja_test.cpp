// Interpreter behaviour the jinja2 differential cases cannot pin down: error kinds and
// positions, refusal of what Python would print with a memory address, value formatting,
// and concurrent rendering.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "tokenizer/jinja/json_value.h"
#include "tokenizer/jinja/pyformat.h"
#include "tokenizer/jinja/template.h"

namespace deepinfer::tokenizer::jinja {
namespace {

std::string render(const std::string& source, const Dict& vars = Dict()) {
  return Template::parse(source).render(vars);
}

// Parses and renders, returning the error (fails the test when there is none).
TemplateError error_of(const std::string& source, const Dict& vars = Dict()) {
  try {
    render(source, vars);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return TemplateError(ErrorKind::Runtime, "", 0, 0);
}

TEST(Jinja, UnsupportedConstructsAreNamed) {
  struct Case {
    const char* source;
    const char* construct;
  };
  const Case cases[] = {
      {"{% include 'other.jinja' %}", "{% include %}"},
      {"{% extends 'base.jinja' %}", "{% extends %}"},
      {"{% import 'm.jinja' as m %}", "{% import %}"},
      {"{% from 'm.jinja' import x %}", "{% from %}"},
      {"{% block body %}{% endblock %}", "{% block %}"},
      {"{% macro m() %}{% endmacro %}{% call m() %}x{% endcall %}", "{% call %}"},
      {"{% autoescape true %}{% endautoescape %}", "{% autoescape %}"},
      {"{% for x in [] recursive %}{% endfor %}", "recursive for loops"},
      {"{{ 'a b'|urlize }}", "filter 'urlize'"},
      {"{{ 'a'|wordwrap }}", "filter 'wordwrap'"},
      {"{{ f(*args) }}", "*args"},
      {"{{ cycler(1, 2) }}", "cycler()"},
      {"{{ naïve }}", "non-ASCII identifiers"},
      {"{{ 99999999999999999999 }}", "beyond 64 bits"},
      {"{{ 2 ** 64 }}", "beyond 64 bits"},
      {"{{ '%s'|safe % 1 }}", "Markup"},
      {"{{ range(3)[1:] }}", "slicing a range()"},
  };
  for (const auto& c : cases) {
    const TemplateError e = error_of(c.source);
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << c.source << ": " << e.what();
    EXPECT_NE(e.message().find(c.construct), std::string::npos) << c.source << ": " << e.what();
  }
}

TEST(Jinja, UnknownNamesAndSyntaxErrorsGivePositions) {
  TemplateError e = error_of("line one\n  {{ value | nosuchfilter }}");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_NE(e.message().find("no filter named 'nosuchfilter'"), std::string::npos);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 14);
  e = error_of("{% if x is frobnicated %}{% endif %}{{ 1 is frobnicated }}");
  EXPECT_NE(e.message().find("no test named 'frobnicated'"), std::string::npos);
  e = error_of("{% for x in y %}\n{% endif %}");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_EQ(e.line(), 2);
  e = error_of("{% frobnicate %}");
  EXPECT_NE(e.message().find("unknown tag 'frobnicate'"), std::string::npos);
  e = error_of("ok\n\n{{ 'unterminated }}");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(error_of("{{ x }}\xff").kind(), ErrorKind::Syntax);  // not UTF-8
}

TEST(Jinja, RuntimeErrorsCarryTheirMessage) {
  TemplateError e = error_of("{% set s = 'text' %}\n{{ s() }}");
  EXPECT_EQ(e.kind(), ErrorKind::Runtime);
  EXPECT_EQ(e.message(), "'str' object is not callable");
  EXPECT_EQ(e.line(), 2);
  e = error_of("{{ missing.attr }}");
  EXPECT_EQ(e.message(), "'missing' is undefined");
  e = error_of("{{ raise_exception('No tools given!') }}", [] {
    Dict d;
    d.set(Value::string("raise_exception"),
          native_function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
            throw Failure{ErrorKind::Raised, a.positional.at(0).str()};
          }));
    return d;
  }());
  EXPECT_EQ(e.kind(), ErrorKind::Raised);
  EXPECT_EQ(e.message(), "No tools given!");
}

TEST(Jinja, RefusesToPrintWhatPythonPrintsWithAnAddress) {
  for (const char* source :
       {"{{ 'x'.upper }}", "{{ [1]|select }}", "{{ range }}", "{{ {'a': 1}.get }}",
        "{{ [1]|map('string') }}", "{{ [1]|reverse }}"}) {
    EXPECT_EQ(error_of(source).kind(), ErrorKind::Unsupported) << source;
  }
  // ... but what Python prints without one is printed.
  EXPECT_EQ(
      render("{% macro m() %}{% endmacro %}{{ m }}|{% for i in [1, 2] %}{{ loop }}{% endfor %}"),
      "<Macro 'm'>|<LoopContext 1/2><LoopContext 2/2>");
}

TEST(Jinja, FloatReprMatchesPython) {
  // Expected strings are Python's repr() of the same doubles.
  const std::pair<double, const char*> cases[] = {
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1.0, "1.0"},
      {-0.0, "-0.0"},
      {100.0, "100.0"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {1.5e16, "1.5e+16"},
      {0.0001, "0.0001"},
      {0.00001, "1e-05"},
      {1.25e-7, "1.25e-07"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {2.5, "2.5"},
      {-3.75e100, "-3.75e+100"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {std::nan(""), "nan"},
  };
  for (const auto& [value, text] : cases) EXPECT_EQ(float_repr(value), text);
}

TEST(Jinja, StringReprMatchesPython) {
  EXPECT_EQ(string_repr("plain"), "'plain'");
  EXPECT_EQ(string_repr("it's"), "\"it's\"");
  EXPECT_EQ(string_repr("both ' \""), "'both \\' \"'");
  EXPECT_EQ(string_repr("a\nb\tc\\\x01\x7f"), "'a\\nb\\tc\\\\\\x01\\x7f'");
  EXPECT_EQ(string_repr("中文😀"), "'中文😀'");
  EXPECT_EQ(string_repr("\u00a0\u200b\u2028"), "'\\xa0\\u200b\\u2028'");
}

TEST(Jinja, JsonKeepsOrderAndRejectsBadInput) {
  const Value v =
      from_json(nlohmann::ordered_json::parse(R"({"z": 1, "a": [true, null, 1.5, "é"]})"));
  JsonOptions options;
  EXPECT_EQ(to_json(v, options, 1000), R"({"z": 1, "a": [true, null, 1.5, "é"]})");
  options.sort_keys = true;
  options.indent = "  ";
  EXPECT_EQ(to_json(v, options, 1000),
            "{\n  \"a\": [\n    true,\n    null,\n    1.5,\n    \"é\"\n  ],\n  \"z\": 1\n}");
  EXPECT_THROW(to_json(v, JsonOptions(), 10), Failure);  // the size limit
  EXPECT_THROW(from_json(nlohmann::json(std::string("\xc3"))), Error);
  EXPECT_THROW(from_json(nlohmann::json(uint64_t{1} << 63)), Error);
}

TEST(Jinja, TemplatesRenderConcurrently) {
  const Template tpl = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m|length %}"
      "{% endfor %}{{ ns.n }}:{{ messages|map('upper')|join(',') }}");
  Dict vars;
  vars.set(Value::string("messages"), Value::list({Value::string("ab"), Value::string("cde")}));
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) results[t] = tpl.render(vars);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, "5:AB,CDE");
}

}  // namespace
}  // namespace deepinfer::tokenizer::jinja
