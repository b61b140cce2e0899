#include "gemm_peers.h"

#ifdef DEEPINFER_WITH_OPENBLAS
#include <cblas.h>
#endif
#ifdef DEEPINFER_WITH_ONEDNN
#include <omp.h>

#include <dnnl.hpp>
#endif

namespace deepinfer::bench {
namespace {

#ifdef DEEPINFER_WITH_OPENBLAS
// f32 only: Debian's OpenBLAS is built without BUILD_BFLOAT16 (no cblas_sbgemm).
PeerGemm openblas_gemm(const float* x, const float* w, float* y, int64_t m, int64_t k, int64_t n,
                       int threads) {
  const auto M = static_cast<blasint>(m), K = static_cast<blasint>(k), N = static_cast<blasint>(n);
  return {"openblas", [=] {
            openblas_set_num_threads(threads);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y,
                        N);
          }};
}
#endif

#ifdef DEEPINFER_WITH_ONEDNN
// A matmul primitive for these shapes with the weights in the layout it picked ("any"),
// reordered once from w; false where this CPU has no implementation for the precision.
bool onednn_gemm(const float* x, const float* w, float* y, int64_t m, int64_t k, int64_t n,
                 PeerPrecision precision, int threads, PeerGemm& out) {
  using dnnl::memory;
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const auto type =
      precision == PeerPrecision::f32 ? memory::data_type::f32 : memory::data_type::bf16;
  try {
    dnnl::stream stream(engine);
    const memory::desc src({m, k}, type, memory::format_tag::ab);
    const memory::desc weights_any({k, n}, type, memory::format_tag::any);
    const memory::desc dst({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights_any, dst), engine);
    // w [n, k] row-major is the [k, n] matrix in layout "ba".
    memory user_w({{k, n}, memory::data_type::f32, memory::format_tag::ba}, engine,
                  const_cast<float*>(w));
    memory weights(pd.weights_desc(), engine);
    dnnl::reorder(user_w, weights).execute(stream, user_w, weights);
    memory src_mem(src, engine);
    memory user_x({{m, k}, memory::data_type::f32, memory::format_tag::ab}, engine,
                  const_cast<float*>(x));
    dnnl::reorder(user_x, src_mem).execute(stream, user_x, src_mem);  // bf16a: rounds x
    memory dst_mem(dst, engine, y);
    stream.wait();
    auto primitive = std::make_shared<dnnl::matmul>(pd);
    out = {"onednn", [=]() mutable {
             omp_set_num_threads(threads);
             dnnl::stream s(engine);
             primitive->execute(
                 s,
                 {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst_mem}});
             s.wait();
           }};
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}
#endif

}  // namespace

std::vector<PeerGemm> make_peer_gemms([[maybe_unused]] const float* x,
                                      [[maybe_unused]] const float* w, [[maybe_unused]] float* y,
                                      [[maybe_unused]] int64_t m, [[maybe_unused]] int64_t k,
                                      [[maybe_unused]] int64_t n,
                                      [[maybe_unused]] PeerPrecision precision,
                                      [[maybe_unused]] int threads) {
  std::vector<PeerGemm> peers;
#ifdef DEEPINFER_WITH_OPENBLAS
  if (precision == PeerPrecision::f32) peers.push_back(openblas_gemm(x, w, y, m, k, n, threads));
#endif
#ifdef DEEPINFER_WITH_ONEDNN
  PeerGemm onednn;
  if (onednn_gemm(x, w, y, m, k, n, precision, threads, onednn)) peers.push_back(onednn);
#endif
  return peers;
}

void limit_peers_to_avx2() {
#ifdef DEEPINFER_WITH_ONEDNN
  dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
#endif
}

std::string peer_versions() {
  std::string out;
#ifdef DEEPINFER_WITH_OPENBLAS
  out += openblas_get_config() + std::string(" (core ") + openblas_get_corename() + ")";
#endif
#ifdef DEEPINFER_WITH_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  if (!out.empty()) out += ", ";
  out += "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
#endif
  return out.empty() ? "none (tools/setup_gemm_peers.sh installs OpenBLAS and oneDNN)" : out;
}

}  // namespace deepinfer::bench
