// TEMPORARY: forwards to the scalar backend until the avx512 kernels land.
#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
int64_t linear_tile_n() {
  return scalar::linear_tile_n();
}
int64_t linear_pack_stride(int64_t k, DType d) {
  return scalar::linear_pack_stride(k, d);
}
void linear_pack_x(const float* x, int64_t m, int64_t k, DType d, float* p) {
  scalar::linear_pack_x(x, m, k, d, p);
}
int64_t linear_scratch_floats(int64_t k, DType d) {
  return scalar::linear_scratch_floats(k, d);
}
void linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* s) {
  scalar::linear_rows(a, m0, m1, n0, n1, s);
}
void rms_norm(const float* x, const float* w, int64_t r, int64_t d, float e, float* y) {
  scalar::rms_norm(x, w, r, d, e, y);
}
void rope(float* x, int64_t t, int64_t h, int64_t hd, int64_t rd, const float* c, const float* s,
          RopeLayout l) {
  scalar::rope(x, t, h, hd, rd, c, s, l);
}
void softmax(float* x, int64_t r, int64_t c) {
  scalar::softmax(x, r, c);
}
void silu_mul(const float* g, const float* u, float* o, int64_t n) {
  scalar::silu_mul(g, u, o, n);
}
void add(const float* a, const float* b, float* o, int64_t n) {
  scalar::add(a, b, o, n);
}
int64_t attend_scratch_floats(const AttendArgs& a) {
  return scalar::attend_scratch_floats(a);
}
void attend(const AttendArgs& a, const float* q, int64_t pos, int64_t h, float* o, float* s) {
  scalar::attend(a, q, pos, h, o, s);
}
}  // namespace deepinfer::kernels::detail::avx512
