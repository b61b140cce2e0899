#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"

namespace deepinfer::kernels {
namespace {

std::string error_of(std::string_view value) {
  try {
    resolve_isa_request(value);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KernelsIsa, ParsesKnownNamesAndRejectsOthers) {
  EXPECT_EQ(parse_isa("scalar"), Isa::scalar);
  EXPECT_EQ(parse_isa("avx2"), Isa::avx2);
  EXPECT_EQ(parse_isa("avx512"), Isa::avx512);
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_THROW(parse_isa("avx9"), Error);
  EXPECT_THROW(parse_isa("AVX2 "), Error);
  EXPECT_THROW(parse_isa(""), Error);
}

TEST(KernelsIsa, EnvValueErrorsNameTheValueAndTheSupportedSets) {
  const std::string message = error_of("sse9");
  EXPECT_NE(message.find("DEEPINFER_ISA='sse9'"), std::string::npos) << message;
  EXPECT_NE(message.find("supports scalar"), std::string::npos) << message;
  EXPECT_EQ(resolve_isa_request(""), best_isa());
  EXPECT_EQ(resolve_isa_request("auto"), best_isa());
  for (Isa isa : supported_isas()) EXPECT_EQ(resolve_isa_request(isa_name(isa)), isa);
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa_supported(isa)) continue;
    const std::string unsupported = error_of(isa_name(isa));
    EXPECT_NE(unsupported.find("not supported by this CPU"), std::string::npos) << unsupported;
  }
}

TEST(KernelsIsa, SupportedSetIsConsistent) {
  const auto isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::scalar);
  EXPECT_EQ(isas.back(), best_isa());
  // avx512 implies avx2 (the avx512 files also use AVX2/FMA/F16C instructions).
  if (isa_supported(Isa::avx512)) {
    EXPECT_TRUE(isa_supported(Isa::avx2));
  }
  if (cpu_has_avx512_bf16()) {
    EXPECT_TRUE(isa_supported(Isa::avx512));
  }
}

TEST(KernelsIsa, SetActiveIsaOverridesAndClears) {
  const Isa before = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    EXPECT_EQ(active_isa(), isa);
  }
  clear_active_isa_override();
  EXPECT_EQ(active_isa(), before);
  if (!isa_supported(Isa::avx512)) {
    EXPECT_THROW(set_active_isa(Isa::avx512), Error);
  }
}

}  // namespace
}  // namespace deepinfer::kernels
