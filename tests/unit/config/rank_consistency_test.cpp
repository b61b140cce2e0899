// The start-up check of distributed runs: a copy of a checkpoint fingerprints as the original;
// a changed config.json, safetensors header or file size does not; the first differing rank
// is named with what differs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/rank_consistency.h"

namespace deepinfer::config {
namespace {

namespace fs = std::filesystem;

class RankConsistency : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = fs::path(DEEPINFER_TEST_DATA_DIR) / "tiny-qwen3-moe";
    if (!fs::exists(source_ / "config.json")) GTEST_SKIP() << source_ << " is absent";
    copy_ = fs::temp_directory_path() / ("rank_consistency_" + std::to_string(::getpid()));
    fs::remove_all(copy_);
    fs::copy(source_, copy_, fs::copy_options::recursive);
  }
  void TearDown() override {
    if (!copy_.empty()) fs::remove_all(copy_);
  }
  fs::path source_, copy_;
};

TEST_F(RankConsistency, ACopyMatchesAndEachChangeIsNamed) {
  const RankFingerprint original = fingerprint_of(source_.string());
  const RankFingerprint copy = fingerprint_of(copy_.string());
  EXPECT_EQ(first_mismatch(std::vector{original, copy}), std::nullopt);
  EXPECT_NE(original.build, 0u);
  EXPECT_NE(original.config, 0u);

  std::ofstream(copy_ / "config.json", std::ios::app) << "\n";
  const RankFingerprint edited = fingerprint_of(copy_.string());
  EXPECT_EQ(edited.headers, original.headers);
  EXPECT_EQ(edited.sizes, original.sizes);
  const auto line = first_mismatch(std::vector{original, original, edited});
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(line->rfind("rank 2 does not match rank 0: its config.json differs", 0), 0u) << *line;

  // Bytes after the weights: same header, another size.
  std::ofstream(copy_ / "model.safetensors", std::ios::app | std::ios::binary) << "xx";
  const RankFingerprint longer = fingerprint_of(copy_.string());
  EXPECT_EQ(longer.headers, original.headers);
  EXPECT_NE(longer.sizes, original.sizes);
  RankFingerprint same_config = longer;
  same_config.config = original.config;
  EXPECT_NE(first_mismatch(std::vector{original, same_config})->find("differ in number or size"),
            std::string::npos);

  RankFingerprint other_build = original;
  other_build.build ^= 1;
  EXPECT_NE(first_mismatch(std::vector{original, other_build})->find("deepinfer build differs"),
            std::string::npos);
  RankFingerprint other_header = original;
  other_header.headers ^= 1;
  EXPECT_NE(first_mismatch(std::vector{original, other_header})->find("safetensors headers"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::config
