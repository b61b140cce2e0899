#include "core/text_file.h"

#include <gtest/gtest.h>

#include "io/test_files.h"

namespace deepinfer {
namespace {

using io::testing::expect_error;

TEST(TextFile, ParseJsonTextNamesTheSourceWhenMalformed) {
  EXPECT_EQ(parse_json_text(R"({"a": [1, 2]})", "x.json").at("a").at(1), 2);
  expect_error([] { parse_json_text("{\"a\": ", "mem/config.json"); },
               {"mem/config.json: malformed JSON: "});
  expect_error([] { parse_json_text("", "empty.json"); }, {"empty.json: malformed JSON: "});
}

}  // namespace
}  // namespace deepinfer
