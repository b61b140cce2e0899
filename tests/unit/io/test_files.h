#pragma once
// Helpers for io tests: a fresh temporary directory per test, raw file writes, and
// hand-built safetensors bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace deepinfer::io::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("deepinfer-io-" + std::string(test ? test->name() : "test") + "-" +
             std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 8-byte little-endian length, the header text, then `data_bytes` bytes of data.
inline std::string safetensors_bytes(const std::string& header, size_t data_bytes,
                                     uint64_t length_override = UINT64_MAX) {
  const uint64_t n = length_override == UINT64_MAX ? header.size() : length_override;
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i * 37 + 11));
  return out;
}

// Runs `fn`, expecting an Error whose message contains every one of `phrases`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& phrases) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& phrase : phrases) {
      EXPECT_NE(message.find(phrase), std::string::npos)
          << "message \"" << message << "\" lacks \"" << phrase << "\"";
    }
  }
}

}  // namespace deepinfer::io::testing
