#include <gtest/gtest.h>

#include "model/causal_lm.h"

namespace deepinfer::model {
namespace {

TEST(KvQuantGroup, AtMost32ElementsAndNeverAcrossAnMlaPartBoundary) {
  EXPECT_EQ(kv_quant_group({28, 4, 128, 128, 0}), 32);  // dense head rows: 4 scales each
  EXPECT_EQ(kv_quant_group({2, 2, 16, 16, 0}), 16);     // a small head: one scale
  EXPECT_EQ(kv_quant_group({2, 2, 20, 12, 0}), 4);      // K and V rows of other widths
  // MLA rows [latent | rope]: the layout asks for gcd(kv_lora_rank, qk_rope_head_dim).
  EXPECT_EQ(kv_quant_group({61, 1, 512 + 64, 0, 64}), 32);  // DeepSeek-V3
  // Without the layout's group, gcd(64, 32) = 32 would straddle the 48-element latent.
  EXPECT_EQ(kv_quant_group({2, 1, 48 + 16, 0, 16}), 16);
}

}  // namespace
}  // namespace deepinfer::model
