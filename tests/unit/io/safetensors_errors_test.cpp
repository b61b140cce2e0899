// One test per malformed-file case: each hand-built file must give one Error naming the file
// and saying what is wrong.
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "test_files.h"

namespace deepinfer::io {
namespace {

using testing::expect_error;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::write_bytes;

class SafetensorsErrors : public ::testing::Test {
 protected:
  // Writes `bytes` and expects open() to fail with the path and every phrase in the message.
  void expect_rejected(const std::string& bytes, std::initializer_list<std::string> phrases) {
    const std::string path = dir_.file("bad.safetensors");
    write_bytes(path, bytes);
    std::vector<std::string> all(phrases);
    all.push_back(path + ": ");
    expect_error([&] { SafetensorsFile::open(path); }, all);
  }
  // A file whose header is {"t": <entry>} with `data` bytes of data.
  void expect_entry_rejected(const std::string& entry, size_t data,
                             std::initializer_list<std::string> phrases) {
    expect_rejected(safetensors_bytes("{\"t\":" + entry + "}", data), phrases);
  }
  TempDir dir_;
};

TEST_F(SafetensorsErrors, FileShorterThanEightBytes) {
  expect_rejected(std::string("\x02\0\0\0", 4), {"file is 4 bytes, too short"});
}

TEST_F(SafetensorsErrors, EmptyFile) {
  expect_rejected("", {"file is 0 bytes"});
}

TEST_F(SafetensorsErrors, HeaderLengthBeyondFileSize) {
  expect_rejected(safetensors_bytes("{}", 0, 3), {"header length 3 exceeds the 2 bytes"});
}

TEST_F(SafetensorsErrors, HeaderLengthAbsurd) {
  expect_rejected(safetensors_bytes("{}", 0, 0xffffffffffffull),
                  {"header length 281474976710655", "100000000-byte limit"});
}

TEST_F(SafetensorsErrors, HeaderNotJson) {
  expect_rejected(safetensors_bytes("{\"t\": [1, 2", 0), {"header is not valid JSON"});
}

TEST_F(SafetensorsErrors, HeaderInvalidUtf8) {
  expect_rejected(safetensors_bytes("{\"\xff\xfe\":{}}", 0), {"header is not valid JSON"});
}

TEST_F(SafetensorsErrors, HeaderNotAnObject) {
  expect_rejected(safetensors_bytes("[1,2]", 0), {"header must be a JSON object, got array"});
}

TEST_F(SafetensorsErrors, EntryNotAnObject) {
  expect_entry_rejected("[1]", 0, {"tensor \"t\"", "entry must be an object"});
}

TEST_F(SafetensorsErrors, MissingDtype) {
  expect_entry_rejected(R"({"shape":[1],"data_offsets":[0,1]})", 1,
                        {"tensor \"t\"", "missing \"dtype\""});
}

TEST_F(SafetensorsErrors, MissingShape) {
  expect_entry_rejected(R"({"dtype":"U8","data_offsets":[0,1]})", 1,
                        {"tensor \"t\"", "missing \"shape\""});
}

TEST_F(SafetensorsErrors, MissingDataOffsets) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1]})", 1,
                        {"tensor \"t\"", "missing \"data_offsets\""});
}

TEST_F(SafetensorsErrors, DtypeNotAString) {
  expect_entry_rejected(R"({"dtype":4,"shape":[1],"data_offsets":[0,1]})", 1,
                        {"tensor \"t\"", "\"dtype\" must be a string, got number"});
}

TEST_F(SafetensorsErrors, ShapeNotAnArray) {
  expect_entry_rejected(R"({"dtype":"U8","shape":1,"data_offsets":[0,1]})", 1,
                        {"tensor \"t\"", "\"shape\" must be an array"});
}

TEST_F(SafetensorsErrors, DimensionNotAnInteger) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1.5],"data_offsets":[0,1]})", 1,
                        {"tensor \"t\"", "dimension must be a non-negative integer"});
}

TEST_F(SafetensorsErrors, NegativeDimension) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[-2,3],"data_offsets":[0,1]})", 1,
                        {"tensor \"t\"", "negative dimension -2"});
}

TEST_F(SafetensorsErrors, DataOffsetsNotAPair) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1],"data_offsets":[0]})", 1,
                        {"tensor \"t\"", "\"data_offsets\" must be an array [begin, end]"});
}

TEST_F(SafetensorsErrors, DataOffsetNotAnInteger) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[1],"data_offsets":[0,"1"]})", 1,
                        {"tensor \"t\"", "data_offsets end must be a non-negative integer"});
}

TEST_F(SafetensorsErrors, UnsupportedDtype) {
  expect_entry_rejected(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})", 8,
                        {"tensor \"t\"", "unsupported dtype F64"});
}

TEST_F(SafetensorsErrors, ByteSizeOverflows) {
  expect_entry_rejected(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})",
                        0, {"tensor \"t\"", "overflows a 64-bit byte count"});
}

TEST_F(SafetensorsErrors, DimensionBeyondInt64) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]})", 0,
                        {"tensor \"t\"", "overflows"});
}

TEST_F(SafetensorsErrors, EndBeforeBegin) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[0],"data_offsets":[8,4]})", 8,
                        {"tensor \"t\"", "data_offsets end 4 < begin 8"});
}

TEST_F(SafetensorsErrors, ByteRangeDoesNotMatchShape) {
  expect_entry_rejected(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,12]})", 12,
                        {"tensor \"t\"", "hold 12 bytes but F32[2,2] needs 16"});
}

TEST_F(SafetensorsErrors, EndBeyondDataSection) {
  expect_entry_rejected(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", 10,
                        {"tensor \"t\"", "data_offsets end 16 is beyond the data section (10"});
}

TEST_F(SafetensorsErrors, OverlappingTensors) {
  expect_rejected(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
                                    12),
                  {"tensors \"a\" [0, 8) and \"b\" [4, 12) overlap"});
}

TEST_F(SafetensorsErrors, TensorInsideAnother) {
  expect_rejected(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                                    8),
                  {"\"a\" [0, 8) and \"b\" [2, 4) overlap"});
}

TEST_F(SafetensorsErrors, DuplicateTensorName) {
  expect_rejected(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                    R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                    2),
                  {"duplicate key \"a\""});
}

TEST_F(SafetensorsErrors, DuplicateFieldInsideEntry) {
  expect_entry_rejected(R"({"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]})", 1,
                        {"duplicate key \"dtype\""});
}

TEST_F(SafetensorsErrors, MetadataNotAnObject) {
  expect_rejected(safetensors_bytes(R"({"__metadata__":["x"]})", 0),
                  {"\"__metadata__\" must be an object of strings, got array"});
}

TEST_F(SafetensorsErrors, MetadataValueNotAString) {
  expect_rejected(safetensors_bytes(R"({"__metadata__":{"format":"pt","n":3}})", 0),
                  {"\"__metadata__\" value of \"n\" must be a string, got number"});
}

TEST_F(SafetensorsErrors, TrailingBytesAfterLastTensor) {
  expect_entry_rejected(R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})", 7,
                        {"3 trailing bytes after the last tensor"});
}

TEST_F(SafetensorsErrors, DataWithNoTensors) {
  expect_rejected(safetensors_bytes("{}", 5), {"5 trailing bytes"});
}

}  // namespace
}  // namespace deepinfer::io
