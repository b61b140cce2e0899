// MlaAttention against a direct double-precision transcription of the MLA equations (per-head
// keys and values expanded from the latent for every position, as transformers does), on random
// weights, for both forms, both rope layouts, with and without q LoRA, over a batch that mixes a
// continuing sequence with a fresh one on a paged cache whose blocks interleave.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/layers/mla/mla_attention.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

struct Params {
  MlaForm form;
  kernels::RopeLayout layout;
  bool q_lora;
  // The checkpoint also holds W_UK^T / W_UV per head in q8_0 (k_b_proj / v_b_proj, as a GGUF
  // file's attn_k_b / attn_v_b map), and kv_b_proj is their exact widening.
  bool block_heads = false;
};

class MlaLayer : public ::testing::TestWithParam<Params> {};

using Matrix = std::vector<double>;  // row-major

struct RefWeights {
  Matrix q_proj, q_a, q_a_bias, q_a_norm, q_b, kv_a, kv_a_bias, kv_a_norm, kv_b, o, o_bias;
};

Tensor to_tensor(const Matrix& m, Shape shape) {
  Tensor t = Tensor::zeros(std::move(shape), DType::f32);
  for (size_t i = 0; i < m.size(); ++i) t.data<float>()[i] = static_cast<float>(m[i]);
  return t;
}

// y = W x (+ b), W [out, in]
std::vector<double> matvec(const Matrix& w, const std::vector<double>& x, int64_t out,
                           const Matrix* bias = nullptr) {
  std::vector<double> y(static_cast<size_t>(out));
  const auto in = static_cast<int64_t>(x.size());
  for (int64_t o = 0; o < out; ++o) {
    double acc = bias ? (*bias)[static_cast<size_t>(o)] : 0.0;
    for (int64_t i = 0; i < in; ++i)
      acc += w[static_cast<size_t>(o * in + i)] * x[static_cast<size_t>(i)];
    y[static_cast<size_t>(o)] = acc;
  }
  return y;
}

void rms(std::vector<double>& x, int64_t begin, int64_t n, const Matrix& weight) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i)
    ss += x[static_cast<size_t>(begin + i)] * x[static_cast<size_t>(begin + i)];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(begin + i)] *= inv * weight[static_cast<size_t>(i)];
}

double angle(int32_t pos, int64_t i, int64_t rope) {
  return pos * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(rope));
}

// Rotates x[begin, begin + rope) for position pos.
void rotate(std::vector<double>& x, int64_t begin, int64_t rope, int32_t pos,
            kernels::RopeLayout layout) {
  for (int64_t i = 0; i < rope / 2; ++i) {
    const int64_t a = begin + (layout == kernels::RopeLayout::interleaved ? 2 * i : i);
    const int64_t b =
        begin + (layout == kernels::RopeLayout::interleaved ? 2 * i + 1 : i + rope / 2);
    const double c = std::cos(angle(pos, i, rope)), s = std::sin(angle(pos, i, rope));
    const double xa = x[static_cast<size_t>(a)], xb = x[static_cast<size_t>(b)];
    x[static_cast<size_t>(a)] = xa * c - xb * s;
    x[static_cast<size_t>(b)] = xb * c + xa * s;
  }
}

TEST_P(MlaLayer, MatchesDirectEquationsOverAMixedBatch) {
  const Params param = GetParam();
  MlaShape s;
  s.hidden = 24;
  s.heads = 3;
  s.q_lora_rank = param.q_lora ? 10 : 0;
  s.kv_lora_rank = param.block_heads ? 32 : 12;  // whole q8_0 blocks for the per-head rows
  s.qk_nope_head_dim = param.block_heads ? 32 : 6;
  s.qk_rope_head_dim = 4;
  s.v_head_dim = param.block_heads ? 32 : 5;
  s.bias = true;
  s.rope_layout = param.layout;
  s.softmax_scale = 0.37f;
  const int64_t qk = s.qk_head_dim(), rank = s.kv_lora_rank, rope = s.qk_rope_head_dim;
  const int64_t width = s.cache_width(), per_head = s.qk_nope_head_dim + s.v_head_dim;

  std::mt19937 rng(1234);
  std::normal_distribution<double> normal;
  auto random = [&](int64_t n, double scale, double offset = 0.0) {
    Matrix m(static_cast<size_t>(n));
    for (auto& v : m) v = offset + scale * normal(rng);
    return m;
  };
  RefWeights w;
  std::vector<std::pair<std::string, Tensor>> tensors;
  const std::string p = "l.self_attn.";
  if (param.q_lora) {
    w.q_a = random(s.q_lora_rank * s.hidden, 0.3);
    w.q_a_bias = random(s.q_lora_rank, 0.1);
    w.q_a_norm = random(s.q_lora_rank, 0.2, 1.0);
    w.q_b = random(s.heads * qk * s.q_lora_rank, 0.4);
    tensors.emplace_back(p + "q_a_proj.weight", to_tensor(w.q_a, {s.q_lora_rank, s.hidden}));
    tensors.emplace_back(p + "q_a_proj.bias", to_tensor(w.q_a_bias, {s.q_lora_rank}));
    tensors.emplace_back(p + "q_a_layernorm.weight", to_tensor(w.q_a_norm, {s.q_lora_rank}));
    tensors.emplace_back(p + "q_b_proj.weight", to_tensor(w.q_b, {s.heads * qk, s.q_lora_rank}));
  } else {
    w.q_proj = random(s.heads * qk * s.hidden, 0.3);
    tensors.emplace_back(p + "q_proj.weight", to_tensor(w.q_proj, {s.heads * qk, s.hidden}));
  }
  w.kv_a = random(width * s.hidden, 0.3);
  w.kv_a_bias = random(width, 0.1);
  w.kv_a_norm = random(rank, 0.2, 1.0);
  w.kv_b = random(s.heads * per_head * rank, 0.4);
  w.o = random(s.hidden * s.heads * s.v_head_dim, 0.3);
  w.o_bias = random(s.hidden, 0.1);
  tensors.emplace_back(p + "kv_a_proj_with_mqa.weight", to_tensor(w.kv_a, {width, s.hidden}));
  tensors.emplace_back(p + "kv_a_proj_with_mqa.bias", to_tensor(w.kv_a_bias, {width}));
  tensors.emplace_back(p + "kv_a_layernorm.weight", to_tensor(w.kv_a_norm, {rank}));
  if (param.block_heads) {
    // Per head: W_UK^T [rank, nope] and W_UV [v, rank] in q8_0; kv_b becomes their widening.
    const int64_t nope = s.qk_nope_head_dim, v = s.v_head_dim;
    Matrix uk_t(static_cast<size_t>(s.heads * rank * nope)),
        uv(static_cast<size_t>(s.heads * v * rank));
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t r = 0; r < per_head; ++r)
        for (int64_t c = 0; c < rank; ++c) {
          const double x = w.kv_b[static_cast<size_t>((h * per_head + r) * rank + c)];
          if (r < nope) {
            uk_t[static_cast<size_t>((h * rank + c) * nope + r)] = x;
          } else {
            uv[static_cast<size_t>((h * v + r - nope) * rank + c)] = x;
          }
        }
    const Tensor k_b = quantize_matrix(to_tensor(uk_t, {s.heads * rank, nope}), DType::q8_0);
    const Tensor v_b = quantize_matrix(to_tensor(uv, {s.heads * v, rank}), DType::q8_0);
    const Tensor k_wide = k_b.to(DType::f32), v_wide = v_b.to(DType::f32);
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t r = 0; r < per_head; ++r)
        for (int64_t c = 0; c < rank; ++c)
          w.kv_b[static_cast<size_t>((h * per_head + r) * rank + c)] =
              r < nope ? k_wide.data<float>()[(h * rank + c) * nope + r]
                       : v_wide.data<float>()[(h * v + r - nope) * rank + c];
    tensors.emplace_back(p + "k_b_proj.weight", k_b);
    tensors.emplace_back(p + "v_b_proj.weight", v_b);
  }
  tensors.emplace_back(p + "kv_b_proj.weight", to_tensor(w.kv_b, {s.heads * per_head, rank}));
  tensors.emplace_back(p + "o_proj.weight", to_tensor(w.o, {s.hidden, s.heads * s.v_head_dim}));
  tensors.emplace_back(p + "o_proj.bias", to_tensor(w.o_bias, {s.hidden}));
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("deepinfer_mla_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
       std::to_string(::getpid()) + "_" + std::to_string(static_cast<int>(param.form)) +
       std::to_string(static_cast<int>(param.layout)) + std::to_string(param.q_lora) +
       std::to_string(param.block_heads));
  std::filesystem::create_directories(dir);
  io::write_safetensors((dir / "model.safetensors").string(), tensors);
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir.string());
  WeightLoader loader(checkpoint, {});
  auto attn = MlaAttention::load(loader, "l.self_attn", s, param.form);
  EXPECT_TRUE(loader.unused().empty());

  // Sequence A: 5 prompt tokens, then 3 more; sequence B: 4 prompt tokens, in A's second step.
  const int64_t a_total = 8, b_total = 4;
  std::vector<std::vector<double>> xa, xb;
  for (int64_t i = 0; i < a_total; ++i) xa.push_back(random(s.hidden, 1.0));
  for (int64_t i = 0; i < b_total; ++i) xb.push_back(random(s.hidden, 1.0));

  cache::KvCache cache({1, 1, width, 0, 2, 16});
  std::vector<int32_t> table_a, table_b;
  for (int i = 0; i < 8; ++i) {  // interleaved blocks: A 0, B 1, A 2, ...
    (i % 2 == 0 ? table_a : table_b).push_back(cache.allocate_block());
  }
  ThreadPool pool(2);
  auto step = [&](const std::vector<const std::vector<double>*>& xs,
                  const std::vector<int32_t>& pos, std::vector<SequenceSlice> seqs) {
    const auto n = static_cast<int64_t>(xs.size());
    std::vector<float> x(static_cast<size_t>(n * s.hidden)), cos, sin;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < s.hidden; ++i)
        x[static_cast<size_t>(t * s.hidden + i)] =
            static_cast<float>((*xs[static_cast<size_t>(t)])[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < rope / 2; ++i) {
        cos.push_back(static_cast<float>(std::cos(angle(pos[static_cast<size_t>(t)], i, rope))));
        sin.push_back(static_cast<float>(std::sin(angle(pos[static_cast<size_t>(t)], i, rope))));
      }
    }
    const std::vector<int32_t> tokens(static_cast<size_t>(n), 0);
    ForwardBatch batch{tokens, pos, std::move(seqs), {}};
    std::vector<float> out(static_cast<size_t>(n * s.hidden));
    attn->forward(x.data(), batch, cos.data(), sin.data(), cache, 0, out.data(), pool);
    return out;
  };
  step({&xa[0], &xa[1], &xa[2], &xa[3], &xa[4]}, {0, 1, 2, 3, 4}, {{0, 5, table_a}});
  const std::vector<float> got = step({&xa[5], &xa[6], &xa[7], &xb[0], &xb[1], &xb[2], &xb[3]},
                                      {5, 6, 7, 0, 1, 2, 3}, {{0, 3, table_a}, {3, 4, table_b}});

  // Reference: every position of a sequence from scratch.
  auto reference = [&](const std::vector<std::vector<double>>& xs, int64_t first,
                       std::vector<double>& cache_rows) {
    const auto n = static_cast<int64_t>(xs.size());
    std::vector<std::vector<double>> q(static_cast<size_t>(n)), keys(static_cast<size_t>(n)),
        values(static_cast<size_t>(n));
    cache_rows.clear();
    for (int64_t t = 0; t < n; ++t) {
      const auto pos = static_cast<int32_t>(t);
      std::vector<double> qt;
      if (param.q_lora) {
        auto qa = matvec(w.q_a, xs[static_cast<size_t>(t)], s.q_lora_rank, &w.q_a_bias);
        rms(qa, 0, s.q_lora_rank, w.q_a_norm);
        qt = matvec(w.q_b, qa, s.heads * qk);
      } else {
        qt = matvec(w.q_proj, xs[static_cast<size_t>(t)], s.heads * qk);
      }
      for (int64_t h = 0; h < s.heads; ++h)
        rotate(qt, h * qk + s.qk_nope_head_dim, rope, pos, s.rope_layout);
      auto kv = matvec(w.kv_a, xs[static_cast<size_t>(t)], width, &w.kv_a_bias);
      rms(kv, 0, rank, w.kv_a_norm);
      rotate(kv, rank, rope, pos, s.rope_layout);
      cache_rows.insert(cache_rows.end(), kv.begin(), kv.end());
      const std::vector<double> latent(kv.begin(), kv.begin() + rank);
      const auto kvb = matvec(w.kv_b, latent, s.heads * per_head);
      for (int64_t h = 0; h < s.heads; ++h) {
        for (int64_t d = 0; d < s.qk_nope_head_dim; ++d)
          keys[static_cast<size_t>(t)].push_back(kvb[static_cast<size_t>(h * per_head + d)]);
        for (int64_t d = 0; d < rope; ++d)
          keys[static_cast<size_t>(t)].push_back(kv[static_cast<size_t>(rank + d)]);
        for (int64_t d = 0; d < s.v_head_dim; ++d)
          values[static_cast<size_t>(t)].push_back(
              kvb[static_cast<size_t>(h * per_head + s.qk_nope_head_dim + d)]);
      }
      q[static_cast<size_t>(t)] = qt;
    }
    std::vector<std::vector<double>> outs;
    for (int64_t t = first; t < n; ++t) {
      std::vector<double> attended;
      for (int64_t h = 0; h < s.heads; ++h) {
        std::vector<double> score(static_cast<size_t>(t + 1));
        double max = -1e300, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (int64_t d = 0; d < qk; ++d)
            dot += q[static_cast<size_t>(t)][static_cast<size_t>(h * qk + d)] *
                   keys[static_cast<size_t>(u)][static_cast<size_t>(h * qk + d)];
          score[static_cast<size_t>(u)] = dot * s.softmax_scale;
          max = std::max(max, score[static_cast<size_t>(u)]);
        }
        for (auto& v : score) sum += (v = std::exp(v - max));
        for (int64_t d = 0; d < s.v_head_dim; ++d) {
          double acc = 0;
          for (int64_t u = 0; u <= t; ++u)
            acc += score[static_cast<size_t>(u)] *
                   values[static_cast<size_t>(u)][static_cast<size_t>(h * s.v_head_dim + d)];
          attended.push_back(acc / sum);
        }
      }
      outs.push_back(matvec(w.o, attended, s.hidden, &w.o_bias));
    }
    return outs;
  };
  std::vector<double> rows_a, rows_b;
  auto want = reference(xa, 5, rows_a);
  const auto want_b = reference(xb, 0, rows_b);
  want.insert(want.end(), want_b.begin(), want_b.end());

  double max_ref = 0, max_diff = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    for (int64_t i = 0; i < s.hidden; ++i) {
      const double ref = want[t][static_cast<size_t>(i)];
      max_ref = std::max(max_ref, std::abs(ref));
      max_diff =
          std::max(max_diff,
                   std::abs(ref - got[t * static_cast<size_t>(s.hidden) + static_cast<size_t>(i)]));
    }
  }
  if (param.block_heads && param.form == MlaForm::absorbed) {
    // The q8_0 per-head products take their inputs rounded to int8 blocks (as every block-type
    // linear does): within that rounding of the exact result, and not exact (which would mean
    // the f32 widening ran instead).
    EXPECT_LE(max_diff / max_ref, 2e-2) << "max |diff| " << max_diff << ", max |ref| " << max_ref;
    EXPECT_GT(max_diff / max_ref, 2e-6) << "max |diff| " << max_diff << ", max |ref| " << max_ref;
  } else {
    EXPECT_LE(max_diff / max_ref, 2e-6) << "max |diff| " << max_diff << ", max |ref| " << max_ref;
  }

  // The cache rows are exactly [normalised latent | roped k_pe] of each position.
  for (const auto& [table, rows, count] :
       {std::tuple{&table_a, &rows_a, a_total}, std::tuple{&table_b, &rows_b, b_total}}) {
    std::vector<float> cached(static_cast<size_t>(count * width));
    cache.gather_k(0, *table, count, cached.data());
    for (size_t i = 0; i < cached.size(); ++i)
      EXPECT_NEAR(cached[i], (*rows)[i], 1e-5 * (1 + std::abs((*rows)[i]))) << "cache value " << i;
  }
  std::filesystem::remove_all(dir);
}

std::string param_name(const ::testing::TestParamInfo<Params>& info) {
  static const char* const kForms[] = {"automatic", "expanded", "absorbed"};
  return std::string(kForms[static_cast<int>(info.param.form)]) +
         (info.param.layout == kernels::RopeLayout::interleaved ? "_interleaved" : "_half_split") +
         (info.param.q_lora ? "_q_lora" : "_q_proj") +
         (info.param.block_heads ? "_q8_0_heads" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Forms, MlaLayer,
    ::testing::Values(Params{MlaForm::expanded, kernels::RopeLayout::interleaved, true},
                      Params{MlaForm::absorbed, kernels::RopeLayout::interleaved, true},
                      Params{MlaForm::automatic, kernels::RopeLayout::interleaved, false},
                      Params{MlaForm::expanded, kernels::RopeLayout::half_split, false},
                      Params{MlaForm::absorbed, kernels::RopeLayout::half_split, false},
                      Params{MlaForm::expanded, kernels::RopeLayout::half_split, false, true},
                      Params{MlaForm::absorbed, kernels::RopeLayout::half_split, true, true}),
    param_name);

// Decode (one new token over a long context) takes the absorbed form, a long prefill the
// expanded one, for DeepSeek-V3's real dimensions.
TEST(MlaFormChoice, AbsorbedForDecodeExpandedForLongPrefill) {
  MlaShape v3;
  v3.heads = 128;
  v3.kv_lora_rank = 512;
  v3.qk_nope_head_dim = 128;
  v3.qk_rope_head_dim = 64;
  v3.v_head_dim = 128;
  EXPECT_EQ(choose_mla_form(v3, 1, 2), MlaForm::absorbed);
  EXPECT_EQ(choose_mla_form(v3, 1, 100000), MlaForm::absorbed);
  EXPECT_EQ(choose_mla_form(v3, 8, 4096), MlaForm::absorbed);  // a few speculative tokens
  EXPECT_EQ(choose_mla_form(v3, 512, 512), MlaForm::expanded);
  // 128 heads x (192 + 128) floats per position: 8K positions would expand to 1.3 GB.
  EXPECT_EQ(choose_mla_form(v3, 2048, 2048), MlaForm::expanded);
  EXPECT_EQ(choose_mla_form(v3, 8192, 8192), MlaForm::absorbed);
  // A fresh prompt (no cached context): expanding costs what absorbing the queries does, and
  // its narrower keys make the attention cheaper.
  EXPECT_EQ(choose_mla_form(v3, 16, 16), MlaForm::expanded);
}

}  // namespace
}  // namespace deepinfer::model
