// Differential test of the interpreter against jinja2 as transformers configures it: a few
// hundred small templates (tests/data/chat/jinja_cases.json, made by
// tools/make_chat_goldens.py) must render to jinja2's exact output, or fail where it fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "core/text_file.h"
#include "tokenizer/jinja/json_value.h"
#include "tokenizer/jinja/template.h"

namespace deepinfer::tokenizer::jinja {
namespace {

using nlohmann::ordered_json;

Dict variables_for(const ordered_json& common, const ordered_json& c) {
  Dict vars = from_json(common).dict();
  if (c.contains("variables")) {
    // Kept alive for the loop: dict() refers into the value.
    const Value extra = from_json(c["variables"]);
    for (const auto& [k, v] : extra.dict().entries()) vars.set(k, v);
  }
  return vars;
}

TEST(JinjaCases, MatchJinja2) {
  const auto path = std::filesystem::path(DEEPINFER_TEST_DATA_DIR) / "chat" / "jinja_cases.json";
  const auto data = ordered_json::parse(read_text_file(path.string()));
  int checked = 0, errors = 0;
  std::ostringstream mismatches;
  for (const auto& c : data["cases"]) {
    const std::string source = c["template"].get<std::string>();
    const int id = c["id"].get<int>();
    std::string got;
    std::string failure;
    try {
      got = Template::parse(source).render(variables_for(data["common_variables"], c));
    } catch (const TemplateError& e) {
      failure = e.what();
    }
    ++checked;
    if (c.contains("expected")) {
      const std::string want = c["expected"].get<std::string>();
      if (!failure.empty()) {
        mismatches << "#" << id << " " << source << "\n  jinja2: [" << want
                   << "]\n  ours failed: " << failure << "\n";
      } else if (got != want) {
        mismatches << "#" << id << " " << source << "\n  jinja2: [" << want << "]\n  ours:   ["
                   << got << "]\n";
      }
    } else {
      ++errors;
      if (failure.empty()) {
        mismatches << "#" << id << " " << source
                   << "\n  jinja2 failed: " << c["error"].get<std::string>()
                   << "\n  ours rendered: [" << got << "]\n";
      }
    }
  }
  EXPECT_EQ(mismatches.str(), "");
  EXPECT_GT(checked, 200);
  EXPECT_GT(errors, 50);
}

}  // namespace
}  // namespace deepinfer::tokenizer::jinja
