#pragma once
// Library GEMMs that kernels_bench --gemm times beside ours on the same shapes: OpenBLAS
// (cblas_sgemm; Debian's build has no bf16 GEMM) and oneDNN (matmul primitives, weights reordered
// once into the layout the primitive asks for, as our packed panels are made once). Built only
// where tools/setup_gemm_peers.sh installed them (CMake finds them); never part of the engine.
//
// Every peer computes y[m, n] = x[m, k] · wᵀ with w stored [n, k] like our weights, in one of
// two precisions: "f32" (f32 x and weights) or "bf16a" (x and weights rounded to bf16, f32
// accumulation: our --matmul-precision bf16). No library here multiplies f32 activations by bf16
// weights exactly (our default for bf16 checkpoints).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace deepinfer::bench {

enum class PeerPrecision { f32, bf16a };

// One prepared problem: run() computes y from x once (weights already in the peer's layout).
struct PeerGemm {
  std::string name;  // "openblas", "onednn"
  std::function<void()> run;
};

// The peers built into this binary, each prepared for x [m, k], w [n, k] (f32 values; bf16a
// rounds them to bf16 here, outside the timed call) and y [m, n], at `threads` threads. A peer
// that cannot do the precision on this CPU is left out (oneDNN 2.6 has no bf16 matmul without
// AVX-512). x, w and y must outlive the returned objects.
std::vector<PeerGemm> make_peer_gemms(const float* x, const float* w, float* y, int64_t m,
                                      int64_t k, int64_t n, PeerPrecision precision, int threads);

// Holds the peers to AVX2 for `kernels_bench --isa avx2` (oneDNN: dnnl_set_max_cpu_isa, before
// its first primitive). OpenBLAS picks its kernels when it loads: run the bench under
// OPENBLAS_CORETYPE=Haswell for that (peer_versions() names the core it uses).
void limit_peers_to_avx2();

// The libraries, their versions and OpenBLAS's core, or "none (tools/setup_gemm_peers.sh ...)".
std::string peer_versions();

}  // namespace deepinfer::bench
