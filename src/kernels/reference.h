#pragma once
// Plain scalar references of every op in kernels.h: the definition of correct, used by
// tests. Straightforward loops in double-free f32, no SIMD, no threads.
#include "kernels/kernels.h"

namespace deepinfer::kernels::reference {

// Block weights (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k): the arithmetic stated in
// kernels.h, step by step.
void linear(const float* x, int64_t m, int64_t k, const void* w, DType w_dtype, int64_t n,
            const float* bias, float* y);
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y);
void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
          const float* cos, const float* sin, RopeLayout layout);
void softmax(float* x, int64_t rows, int64_t cols);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void add(const float* a, const float* b, float* out, int64_t n);
// residual += x; y = rms_norm(residual): add() then rms_norm(), as the unfused decoder does.
void add_rms_norm(float* residual, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps, float* y);
void paged_attention(const float* q, int64_t tokens, const int32_t* positions, int64_t heads,
                     const PagedKv& kv, float scale, float* out);

}  // namespace deepinfer::kernels::reference
