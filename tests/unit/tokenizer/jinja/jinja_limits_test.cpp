// Hostile templates stop quickly with a Limit error instead of exhausting time, memory or
// the stack.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tokenizer/jinja/template.h"

namespace deepinfer::tokenizer::jinja {
namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Runs parse + render and returns the error kind. Each case ends well under a second in
// Release; the bound is loose for Debug / sanitizer builds and only catches hangs.
ErrorKind kind_of(const std::string& source, const Limits& limits = Limits()) {
  const auto start = std::chrono::steady_clock::now();
  ErrorKind kind = ErrorKind::Runtime;
  bool failed = false;
  try {
    Template::parse(source, limits).render(Dict());
  } catch (const TemplateError& e) {
    kind = e.kind();
    failed = true;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << source.substr(0, 80);
  EXPECT_TRUE(failed) << source.substr(0, 80);
  return kind;
}

TEST(JinjaLimits, DeepNestingIsRefusedAtParse) {
  EXPECT_EQ(kind_of(repeat("{% if true %}", 10000) + "x" + repeat("{% endif %}", 10000)),
            ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ " + repeat("(", 5000) + "1" + repeat(")", 5000) + " }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ " + repeat("-", 20000) + "1 }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ " + repeat("not ", 20000) + "1 }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ 1" + repeat(" + 1", 20000) + " }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ x" + repeat("|trim", 20000) + " }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ " + repeat("[", 5000) + repeat("]", 5000) + " }}"), ErrorKind::Limit);
  // The same shapes at modest depth are fine.
  EXPECT_EQ(
      Template::parse(repeat("{% if true %}", 50) + "x" + repeat("{% endif %}", 50)).render(Dict()),
      "x");
}

TEST(JinjaLimits, HugeLoopsRunOutOfBudget) {
  EXPECT_EQ(kind_of("{% for i in range(10**9) %}x{% endfor %}"), ErrorKind::Limit);
  Limits small;  // the default budget (20M steps) takes ~1 s; keep Debug/ASan runs short
  small.max_steps = 100000;
  EXPECT_EQ(
      kind_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
              small),
      ErrorKind::Limit);
  EXPECT_EQ(kind_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                    small),
            ErrorKind::Limit);
}

TEST(JinjaLimits, ExponentialGrowthHitsTheSizeLimit) {
  EXPECT_EQ(kind_of("{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            ErrorKind::Limit);
  EXPECT_EQ(kind_of("{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
                    "{% set ns.s = ns.s + ns.s %}{% endfor %}"),
            ErrorKind::Limit);
  EXPECT_EQ(kind_of("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}"
                    "{% set ns.l = ns.l + ns.l %}{% endfor %}"),
            ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ 'x' * 10**12 }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ [0] * 10**12 }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{{ 'ab'|center(10**12) }}"), ErrorKind::Limit);
  // Nested lists sharing storage would print exponentially: the output limit stops them.
  Limits small;
  small.max_output_bytes = 1 << 20;
  EXPECT_EQ(kind_of("{% set ns = namespace(l=[1, 2]) %}{% for i in range(60) %}"
                    "{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
                    small),
            ErrorKind::Limit);
  EXPECT_EQ(kind_of("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", small),
            ErrorKind::Limit);
}

TEST(JinjaLimits, RecursionIsBounded) {
  EXPECT_EQ(kind_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{% macro f(n) %}{{ f(n) ~ f(n) }}{% endmacro %}{{ f(0) }}"), ErrorKind::Limit);
  EXPECT_EQ(kind_of("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
                    "{% set ns.l = [ns.l] %}{% endfor %}"),
            ErrorKind::Limit);
  // Chains through objects that keep values alive (bound methods, generators, loops) are
  // bounded like nested lists, so freeing them cannot overflow the stack either.
  for (const char* link : {"[ns.v].count", "[ns.v]|select", "{'k': ns.v}.get"}) {
    EXPECT_EQ(kind_of(std::string("{% set ns = namespace(v=none) %}{% for i in range(100000) %}"
                                  "{% set ns.v = ") +
                      link + " %}{% endfor %}"),
              ErrorKind::Limit)
        << link;
  }
  EXPECT_EQ(kind_of("{% set ns = namespace(v=none) %}{% for i in range(1000) %}"
                    "{% for x in [ns.v] %}{% set ns.v = loop %}{% endfor %}{% endfor %}"),
            ErrorKind::Limit);
  // Fibonacci-shaped double recursion that stays shallow but is exponential in time.
  Limits small;
  small.max_steps = 200000;
  EXPECT_EQ(kind_of("{% macro f(n) %}{% if n > 1 %}{{ f(n - 1) }}{{ f(n - 2) }}{% else %}x"
                    "{% endif %}{% endmacro %}{{ f(40)|length }}",
                    small),
            ErrorKind::Limit);
}

TEST(JinjaLimits, SelfReferencingNamespacesDoNotLeakOrLoop) {
  // (Run under ASan/LSan in Debug builds: the cycle must be broken after rendering.)
  const std::string out = Template::parse(
                              "{% set ns = namespace() %}{% set ns.me = ns %}"
                              "{{ ns.me.me.me is defined }}")
                              .render(Dict());
  EXPECT_EQ(out, "True");
  EXPECT_EQ(
      Template::parse("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}|"
                      "{% set n2 = namespace(a=[1]) %}{% set n2.l = [n2, {'k': n2}] %}{{ n2 }}")
          .render(Dict()),
      "<Namespace {'me': <Namespace {...}>}>|"
      "<Namespace {'a': [1], 'l': [<Namespace {...}>, {'k': <Namespace {...}>}]}>");
  EXPECT_EQ(kind_of("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns|tojson }}"),
            ErrorKind::Runtime);
}

}  // namespace
}  // namespace deepinfer::tokenizer::jinja
