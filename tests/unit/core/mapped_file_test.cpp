#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/tensor.h"

namespace deepinfer {
namespace {

// Resident pages of this process (the second field of /proc/self/statm).
int64_t resident_pages() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident;
}

uint64_t sum_bytes(const std::byte* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<uint8_t>(p[i]) * (i % 7 + 1);
  return s;
}

class MappedFileRelease : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("deepinfer_mapped_release_" + std::to_string(::getpid()) + ".bin");
    std::vector<char> bytes(kBytes);
    for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<char>((i * 131 + 7) & 0xff);
    std::ofstream(path_, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(kBytes));
    expected_ = sum_bytes(reinterpret_cast<const std::byte*>(bytes.data()), kBytes);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  static constexpr size_t kBytes = 32u << 20;
  std::filesystem::path path_;
  uint64_t expected_ = 0;
};

// The pages of a packed weight's mapped source leave the process (RSS falls by about the
// mapped size) and its values are read back from the file unchanged.
TEST_F(MappedFileRelease, DropsResidentPagesAndKeepsTheValues) {
  const std::shared_ptr<MappedFile> file = MappedFile::open(path_.string());
  const Tensor t = Tensor::view(Storage::map(file, file->data(), file->size()), 0,
                                {static_cast<int64_t>(kBytes)}, DType::i8);
  ASSERT_EQ(sum_bytes(file->data(), kBytes), expected_);  // every page touched
  const int64_t before = resident_pages();
  t.release_pages();
  const int64_t after = resident_pages();
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  EXPECT_GE(before - after, static_cast<int64_t>(kBytes * 3 / 4) / page)
      << "RSS went from " << before << " to " << after << " pages";
  EXPECT_EQ(sum_bytes(file->data(), kBytes), expected_);
}

// Owned bytes have no file to come back from: release_pages leaves them alone.
TEST(StorageRelease, OwnedBytesStay) {
  Tensor t = Tensor::zeros({1 << 20}, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  t.release_pages();
  for (int64_t i = 0; i < t.numel(); i += 4099)
    EXPECT_EQ(t.data<float>()[i], static_cast<float>(i));
}

}  // namespace
}  // namespace deepinfer
