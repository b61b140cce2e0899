// The restricted pytorch_model.bin reader against files torch.save wrote and the values torch
// read back (tools/make_convert_test_data.py), and against a pickle that would run os.system.
#include "convert/torch_pickle.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/text_file.h"

namespace deepinfer::convert {
namespace {

const std::string kDir = DEEPINFER_TEST_DATA_DIR "/convert";

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

}  // namespace
}  // namespace deepinfer::convert
