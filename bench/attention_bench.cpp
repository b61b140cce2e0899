// Decode attention at long context: kernels::paged_attention for one query token per sequence
// over a paged cache of `depth` keys, for the Qwen2.5-0.5B shape (14 query heads on 2 kv heads
// of 64) and the DeepSeek-V2-Lite MLA absorbed-decode shape (16 heads on one 576-wide latent
// row, V its first 512), per cache dtype. Reports us per layer call and the cache read rate
// (K/V bytes the call must read / time) beside the machine's streaming read bandwidth.
//
//   build/attention_bench [--isa avx2|avx512] [--threads 2] [--depths 4096,16384]
//                         [--seqs 1,8] [--dtypes f16,int8] [--shapes qwen,mla] [--query-tiles]
//                         [--hot] [--no-huge-pages] [--slot-major] [--reps N] [--prefill N]
//
// --query-tiles runs kernels::paged_attention_query_tiles (the AVX-512 span kernel for any
// group) instead of the kernel paged_attention picks by shape.
//
// --prefill N: each call is a prefill chunk of N query tokens at positions [depth - N, depth)
// (one sequence; --seqs is ignored), as a long prompt's last chunk; reports us per layer call
// and GFLOP/s (2 x (head_dim + v_head_dim) x query heads per (query, key) pair attended).
//
// Enough layers of cache are cycled through to exceed the last-level cache (as decode does:
// one cache per layer), so the rate is a DRAM rate; --hot keeps one layer whose cache stays in
// the CPU caches (the kernel's compute rate). The rows are laid out as KvCache lays them out,
// each kv head's rows contiguous (PagedKv::head_rows); --slot-major puts the kv heads of a slot
// side by side instead (the layout before session 18).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "cache/kv_quant.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

using namespace deepinfer;

namespace {

struct AttnShape {
  const char* name;
  int64_t heads, kv_heads, head_dim, v_head_dim;
  bool v_in_k;  // MLA: V = the leading v_head_dim features of the K row
};

const AttnShape kShapes[] = {{"qwen", 14, 2, 64, 64, false}, {"mla", 16, 1, 576, 512, true}};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// One layer's cache of `seqs` sequences of `depth` tokens, blocks of 16 laid out in order.
struct LayerCache {
  std::shared_ptr<Storage> k, v;  // allocated as the KV pool's (huge pages unless --no-huge-pages)
  uint8_t* k_data() const { return reinterpret_cast<uint8_t*>(k->data()); }
  uint8_t* v_data() const { return reinterpret_cast<uint8_t*>(v->data()); }
  std::vector<float> ks, vs;
};

double read_gbps(size_t bytes, ThreadPool& pool) {
  std::vector<uint64_t> data(bytes / sizeof(uint64_t), 1);
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()) * 8, 0);
  auto pass = [&] {
    pool.parallel_for(static_cast<int64_t>(data.size()), [&](int64_t begin, int64_t end) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = begin; i + 4 <= end; i += 4) {
        s0 += data[static_cast<size_t>(i)];
        s1 += data[static_cast<size_t>(i + 1)];
        s2 += data[static_cast<size_t>(i + 2)];
        s3 += data[static_cast<size_t>(i + 3)];
      }
      sums[static_cast<size_t>(begin * pool.size() / static_cast<int64_t>(data.size())) * 8] +=
          s0 + s1 + s2 + s3;
    });
  };
  pass();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return static_cast<double>(bytes) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  bool query_tiles = false;  // --query-tiles: the span kernel whatever the group
  bool hot = false;          // --hot: one layer, its cache left in the CPU caches
  bool huge_pages = true;    // --no-huge-pages: the cache in 4 KiB pages
  bool slot_major = false;   // --slot-major: PagedKv::head_rows 0
  int reps = 0;              // --reps N: timed passes (default 5, --hot 200); the best is shown
  int64_t prefill = 0;       // --prefill N: N query tokens per call, at the end of the context
  std::vector<std::string> depths = {"4096", "16384"}, seqs = {"1", "8"}, dtypes = {"f16", "int8"},
                           shapes = {"qwen", "mla"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--isa" && i + 1 < argc) {
      kernels::set_active_isa(kernels::parse_isa(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::stoi(argv[++i]);
    } else if (arg == "--depths" && i + 1 < argc) {
      depths = split(argv[++i]);
    } else if (arg == "--seqs" && i + 1 < argc) {
      seqs = split(argv[++i]);
    } else if (arg == "--dtypes" && i + 1 < argc) {
      dtypes = split(argv[++i]);
    } else if (arg == "--shapes" && i + 1 < argc) {
      shapes = split(argv[++i]);
    } else if (arg == "--query-tiles") {
      query_tiles = true;
    } else if (arg == "--hot") {
      hot = true;
    } else if (arg == "--slot-major") {
      slot_major = true;
    } else if (arg == "--no-huge-pages") {
      huge_pages = false;
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (arg == "--prefill" && i + 1 < argc) {
      prefill = std::stoll(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--isa NAME] [--threads N] [--depths A,B] [--seqs A,B] "
                   "[--dtypes f16,int8,bf16,f32] [--shapes qwen,mla] [--query-tiles] [--hot] "
                   "[--no-huge-pages] [--slot-major] [--reps N] [--prefill N]\n",
                   argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  std::printf("isa %s, %d threads, memory read bandwidth (256 MiB): %.1f GB/s\n",
              std::string(kernels::isa_name(kernels::active_isa())).c_str(), threads,
              read_gbps(size_t{256} << 20, pool));
  if (prefill > 0) seqs = {"1"};
  std::printf("%-5s %-5s %6s %4s %10s %10s %8s%s\n", "shape", "kv", "depth", "seqs", "us/layer",
              "cacheMB", "GB/s", prefill > 0 ? "   GFLOP/s" : "");
  for (const std::string& shape_name : shapes) {
    const AttnShape* sh = nullptr;
    for (const AttnShape& s : kShapes)
      if (shape_name == s.name) sh = &s;
    if (!sh) {
      std::fprintf(stderr, "unknown shape %s\n", shape_name.c_str());
      return 2;
    }
    for (const std::string& dname : dtypes) {
      const DType dtype = dname == "int8" ? DType::i8 : parse_dtype(dname);
      const int64_t group = 32;
      for (const std::string& dstr : depths) {
        for (const std::string& sstr : seqs) {
          const int64_t depth = std::stoll(dstr), nseq = std::stoll(sstr);
          const int64_t block = 16, blocks_per_seq = (depth + block - 1) / block;
          const int64_t slots = nseq * blocks_per_seq * block * sh->kv_heads;
          const int64_t k_width = sh->head_dim, v_width = sh->v_in_k ? 0 : sh->v_head_dim;
          const int64_t es = static_cast<int64_t>(dtype == DType::i8 ? 1 : dtype_size(dtype));
          // Bytes a decode step must read: every K element (and V when separate), + scales.
          const double scale_bytes = dtype == DType::i8 ? 4.0 / group : 0.0;
          const double layer_bytes = static_cast<double>(slots) *
                                     static_cast<double>(k_width + v_width) * (es + scale_bytes);
          const int layers = hot ? 1
                                 : static_cast<int>(std::max<double>(
                                       1.0, std::min(24.0, 512.0 * 1024 * 1024 / layer_bytes)));
          std::vector<LayerCache> caches(static_cast<size_t>(layers));
          std::vector<float> row(static_cast<size_t>(std::max(k_width, sh->v_head_dim)));
          for (size_t l = 0; l < caches.size(); ++l) {
            LayerCache& c = caches[l];
            c.k = Storage::allocate(static_cast<size_t>(slots * k_width * es), huge_pages);
            c.v = Storage::allocate(static_cast<size_t>(slots * v_width * es), huge_pages);
            if (dtype == DType::i8) {
              c.ks.resize(static_cast<size_t>(slots * k_width / group));
              c.vs.resize(static_cast<size_t>(slots * v_width / group));
            }
            for (int64_t r = 0; r < slots; ++r) {
              for (size_t i = 0; i < row.size(); ++i)
                row[i] =
                    static_cast<float>(
                        ((r * 131 + static_cast<int64_t>(i) * 7 + static_cast<int64_t>(l)) % 97)) /
                        97.0f -
                    0.5f;
              cache::store_kv_row(row.data(), k_width, dtype, group, c.k_data() + r * k_width * es,
                                  dtype == DType::i8 ? c.ks.data() + r * k_width / group : nullptr);
              if (v_width)
                cache::store_kv_row(
                    row.data(), v_width, dtype, group, c.v_data() + r * v_width * es,
                    dtype == DType::i8 ? c.vs.data() + r * v_width / group : nullptr);
            }
          }
          std::vector<int32_t> table(static_cast<size_t>(nseq * blocks_per_seq));
          std::iota(table.begin(), table.end(), 0);
          const int64_t tokens = prefill > 0 ? std::min(prefill, depth) : 1;
          std::vector<float> q(static_cast<size_t>(tokens * sh->heads * sh->head_dim), 0.01f);
          for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
          std::vector<float> out(static_cast<size_t>(tokens * sh->heads * sh->v_head_dim));
          std::vector<int32_t> positions(static_cast<size_t>(tokens));
          std::iota(positions.begin(), positions.end(), static_cast<int32_t>(depth - tokens));
          double pairs = 0;  // (query token, key) pairs attended
          for (const int32_t p : positions) pairs += static_cast<double>(p + 1);
          const double flops =
              2.0 * pairs * static_cast<double>(sh->heads * (sh->head_dim + sh->v_head_dim));
          auto step = [&](size_t l) {
            const LayerCache& c = caches[l];
            for (int64_t s = 0; s < nseq; ++s) {
              kernels::PagedKv kv;
              kv.k = c.k_data();
              kv.v = sh->v_in_k ? c.k_data() : c.v_data();
              kv.block_size = block;
              kv.kv_heads = sh->kv_heads;
              kv.head_dim = sh->head_dim;
              kv.v_head_dim = sh->v_head_dim;
              kv.v_row_stride = sh->v_in_k ? sh->head_dim : 0;
              kv.block_table = std::span<const int32_t>(table).subspan(
                  static_cast<size_t>(s * blocks_per_seq), static_cast<size_t>(blocks_per_seq));
              kv.dtype = dtype;
              kv.head_rows = slot_major ? 0 : slots / sh->kv_heads;
              if (dtype == DType::i8) {
                kv.k_scale = c.ks.data();
                kv.v_scale = sh->v_in_k ? c.ks.data() : c.vs.data();
                kv.quant_group = group;
              }
              (query_tiles ? kernels::paged_attention_query_tiles : kernels::paged_attention)(
                  q.data(), tokens, positions.data(), sh->heads, kv, 0.05f, out.data(), pool);
            }
          };
          for (size_t l = 0; l < caches.size(); ++l) step(l);  // warm-up
          double best = 1e30;
          for (int rep = 0; rep < (reps > 0 ? reps : hot ? 200 : 5); ++rep) {
            const auto start = std::chrono::steady_clock::now();
            for (size_t l = 0; l < caches.size(); ++l) step(l);
            best = std::min(
                best,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                    static_cast<double>(caches.size()));
          }
          std::printf("%-5s %-5s %6lld %4lld %10.1f %10.2f %8.1f", sh->name, dname.c_str(),
                      static_cast<long long>(depth), static_cast<long long>(nseq), best * 1e6,
                      layer_bytes / 1e6, layer_bytes / best / 1e9);
          if (prefill > 0) std::printf(" %9.1f", flops / best / 1e9);
          std::printf("\n");
        }
      }
    }
  }
  return 0;
}
