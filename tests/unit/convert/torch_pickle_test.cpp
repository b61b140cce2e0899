// The restricted pytorch_model.bin reader against files torch.save wrote and the values torch
// read back (tools/make_convert_test_data.py), and against a pickle that would run os.system.
#include "convert/torch_pickle.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/text_file.h"

namespace deepinfer::convert {
namespace {

const std::string kDir = DEEPINFER_TEST_DATA_DIR "/convert";
volatile unsigned sink_ = 0;

TEST(TorchPickle, ReadsWhatTorchSavedWithTheValuesTorchReadsBack) {
  const auto expected = read_json_file(kDir + "/state_dict.json");
  const auto tensors = read_torch_state_dict(kDir + "/state_dict.bin");
  ASSERT_EQ(tensors.size(), expected.size());
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(expected.contains(name));
    const auto& want = expected[name];
    EXPECT_EQ(tensor.shape(), want["shape"].get<Shape>());
    const std::map<std::string, DType> dtypes = {{"float32", DType::f32},
                                                 {"bfloat16", DType::bf16},
                                                 {"float16", DType::f16},
                                                 {"int64", DType::i64}};
    ASSERT_EQ(tensor.dtype(), dtypes.at(want["dtype"].get<std::string>()));
    const auto values = want["values"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<size_t>(tensor.numel()), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      double got = 0;
      if (tensor.dtype() == DType::i64) {
        got = static_cast<double>(tensor.data<int64_t>()[i]);
      } else {
        float f = 0;
        convert_to_f32(static_cast<const std::byte*>(tensor.raw()) + i * dtype_size(tensor.dtype()),
                       tensor.dtype(), &f, 1);
        got = f;
      }
      EXPECT_EQ(got, values[i]) << "element " << i;
    }
  }
}

TEST(TorchPickle, ContiguousTensorsAreViewsOfTheMappedFile) {
  for (const auto& [name, tensor] : read_torch_state_dict(kDir + "/state_dict.bin")) {
    EXPECT_EQ(tensor.is_borrowed(), name != "transposed") << name;
  }
}

TEST(TorchPickle, RefusesAGlobalOutsideTheStateDictSetWithoutRunningIt) {
  const std::string sentinel = "/tmp/deepinfer-malicious-pickle-ran";
  std::filesystem::remove(sentinel);
  try {
    read_torch_state_dict(kDir + "/malicious.bin");
    FAIL() << "malicious.bin was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("refused global 'os.system'"), std::string::npos) << message;
    EXPECT_NE(message.find("malicious.bin"), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(sentinel));
}

TEST(TorchPickle, RefusesAFileThatIsNotAZip) {
  EXPECT_THROW(read_torch_state_dict(kDir + "/state_dict.json"), Error);
}

// A small in-test fuzz (run under ASan + UBSan by `make test`): every truncation of a real file
// and every byte of it flipped is either refused with an Error or read as a state dict whose
// tensors lie inside the file.
TEST(TorchPickle, DamagedFilesAreRefusedOrReadInBounds) {
  const std::string original = read_text_file(kDir + "/state_dict.bin");
  const auto path = std::filesystem::temp_directory_path() /
                    ("deepinfer-pickle-fuzz-" + std::to_string(::getpid()) + ".bin");
  const auto attempt = [&](const std::string& bytes) {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    try {
      for (const auto& [name, tensor] : read_torch_state_dict(path.string())) {
        const auto* p = static_cast<const unsigned char*>(tensor.raw());
        for (size_t b = 0; b < tensor.nbytes(); ++b) sink_ = sink_ + p[b];  // in bounds (ASan)
      }
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  int accepted = 0;
  for (size_t n = 0; n < original.size(); n += 23) accepted += attempt(original.substr(0, n));
  for (size_t i = 0; i < original.size(); i += 3) {
    std::string flipped = original;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    accepted += attempt(flipped);
  }
  std::filesystem::remove(path);
  EXPECT_GT(accepted, 0);  // flips inside tensor data keep a valid file
}

}  // namespace
}  // namespace deepinfer::convert
