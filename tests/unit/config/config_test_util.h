#pragma once
// Helpers for the recipe-config tests: a scratch directory per test and an expectation that
// a call throws ConfigError whose message contains every given fragment.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "config/recipe_config.h"

namespace deepinfer::config::testing {

inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir =
      std::filesystem::path(::testing::TempDir()) /
      (std::string("deepinfer_cfg_") + info->test_suite_name() + "_" + info->name() + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

inline std::filesystem::path repo_root() {
  return std::filesystem::path(DEEPINFER_TEST_DATA_DIR).parent_path().parent_path();
}

inline std::string tiny(const std::string& model) {
  return (std::filesystem::path(DEEPINFER_TEST_DATA_DIR) / model).string();
}

// An infer_config.json given as text, named `source` in errors.
inline RecipeConfig parse_infer(const std::string& text,
                                const std::string& source = "x/infer_config.json") {
  RecipeConfig config;
  parse_infer_config(config, nlohmann::json::parse(text), source);
  return config;
}

// Runs `fn`, expecting ConfigError whose message holds each fragment.
inline void expect_config_error(const std::function<void()>& fn,
                                const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message lacks \"" << fragment << "\": " << message;
    }
    return;
  }
  ADD_FAILURE() << "expected a ConfigError mentioning " << fragments.front();
}

}  // namespace deepinfer::config::testing
