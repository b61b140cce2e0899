// The lockstep wire format: a step survives encode -> decode whole, and a header of another
// protocol version (a rank built from other sources) is refused, naming both versions.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "engine/step_message.h"

namespace deepinfer::engine {
namespace {

TEST(StepMessage, RoundTripsAStep) {
  const std::vector<int32_t> tokens = {11, 12, 13, 14, 15}, positions = {0, 1, 2, 7, 8};
  const std::vector<int32_t> table_a = {3, 4}, table_b = {9};
  model::ForwardBatch batch;
  batch.tokens = tokens;
  batch.positions = positions;
  batch.sequences = {{0, 3, table_a}, {3, 2, table_b, 1}};
  batch.logit_rows = {2, 4};
  cache::KvCacheSpec spec;
  spec.num_layers = 3;
  spec.kv_heads = 2;
  spec.head_dim = 8;
  spec.v_head_dim = 4;
  spec.block_size = 4;
  spec.num_blocks = 10;
  spec.dtype = DType::bf16;
  spec.quant_group = 2;

  const StepHeader header = step_header(1, spec, batch);
  EXPECT_EQ(header.table_entries, 3);
  EXPECT_EQ(header.payload_bytes(), (4 * 2 + 2) * 8 + (2 * 5 + 3) * 4);
  const StepHeader back = decode_header(encode_header(header));
  EXPECT_EQ(back.kind, StepKind::step);
  EXPECT_EQ(back.model, 1);
  EXPECT_EQ(back.cache.num_layers, 3);
  EXPECT_EQ(back.cache.v_head_dim, 4);
  EXPECT_EQ(back.cache.num_blocks, 10);
  EXPECT_EQ(back.cache.dtype, DType::bf16);
  EXPECT_EQ(back.cache.quant_group, 2);

  ReceivedStep step;
  decode_payload(back, encode_payload(header, batch), step);
  EXPECT_EQ(std::vector<int32_t>(step.batch.tokens.begin(), step.batch.tokens.end()), tokens);
  EXPECT_EQ(std::vector<int32_t>(step.batch.positions.begin(), step.batch.positions.end()),
            positions);
  ASSERT_EQ(step.batch.sequences.size(), 2u);
  EXPECT_EQ(step.batch.sequences[1].begin, 3);
  EXPECT_EQ(step.batch.sequences[1].count, 2);
  EXPECT_EQ(step.batch.sequences[0].attention_group, 0);
  EXPECT_EQ(step.batch.sequences[1].attention_group, 1);
  EXPECT_EQ(std::vector<int32_t>(step.batch.sequences[0].block_table.begin(),
                                 step.batch.sequences[0].block_table.end()),
            table_a);
  EXPECT_EQ(step.batch.sequences[1].block_table[0], 9);
  EXPECT_EQ(step.batch.logit_rows, batch.logit_rows);
}

TEST(StepMessage, RefusesAnotherProtocolVersion) {
  WireHeader wire = encode_header(StepHeader{});
  wire[0] = kWireMagic | 1;
  try {
    decode_header(wire);
    FAIL() << "a v1 header was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step protocol v1, this rank v3"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("mismatched deepinfer binaries"), std::string::npos);
  }
}

TEST(StepMessage, RefusesAPayloadThatDisagreesWithItsHeader) {
  StepHeader header;
  header.kind = StepKind::step;
  header.tokens = 2;
  header.sequences = 1;
  std::vector<std::byte> bytes(static_cast<size_t>(header.payload_bytes()));
  const int64_t bad[3] = {1, 5, 0};  // rows [1, 6) of a 2-token step
  std::memcpy(bytes.data(), bad, sizeof(bad));
  ReceivedStep step;
  EXPECT_THROW(decode_payload(header, bytes, step), Error);
  EXPECT_THROW(decode_payload(header, std::span(bytes).first(4), step), Error);
}

}  // namespace
}  // namespace deepinfer::engine
