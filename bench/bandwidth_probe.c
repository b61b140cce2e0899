// The two ceilings of decode that bench/llamacpp_bench.py compares both engines with, measured
// on this machine by the bench itself (it compiles this file with the system C compiler):
//
//   read   THREADS: DRAM read bandwidth, GB/s. Each thread sums its own slice of a buffer far
//                   larger than the last-level cache (vector loads, best of several passes), the
//                   access pattern of a decode step streaming every weight once. The buffer is
//                   advised for transparent huge pages, as deepinfer's weights are: on 4 KiB
//                   pages this VM's probe read 10-25 % less and swung with the pages it got.
//   q4dot  THREADS: the integer-dot roofline of 4-bit weights, in weight GB/s: q4_0 blocks
//                   (18 bytes: f16 scale + 32 nibbles) dotted with int8 activations from an
//                   L2-resident slice, so memory never waits: nibble split, u8 x s8 dot
//                   (vpdpbusd with AVX-512 VNNI, else vpmaddubsw + vpmaddwd), one f32 scale and
//                   FMA per block. A 4-bit decode cannot stream weights faster than this.
//   fma    THREADS: the f32 FMA peak, GFLOP/s: 12 independent accumulators per thread (more than
//                   FMA latency x throughput), 512-bit with AVX-512, else 256-bit. The ceiling of
//                   compute-bound work (prefill, batched decode) with f32 arithmetic.
//
//   cc -O3 -march=native -pthread bench/bandwidth_probe.c -o bandwidth_probe
//   ./bandwidth_probe read 2     # prints one number: GB/s
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
  const uint8_t* data;
  size_t bytes;
  int passes;
  pthread_barrier_t* start;
  double seconds;  // of the fastest pass
  volatile int64_t sink;
} Job;

// One pass over [data, data + bytes): 4 independent 64-byte loads per step, xor-folded so the
// loads cannot be elided.
static int64_t read_pass(const uint8_t* data, size_t bytes) {
#if defined(__AVX512F__)
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    a = _mm512_xor_si512(a, _mm512_load_si512((const void*)(data + i)));
    b = _mm512_xor_si512(b, _mm512_load_si512((const void*)(data + i + 64)));
    c = _mm512_xor_si512(c, _mm512_load_si512((const void*)(data + i + 128)));
    d = _mm512_xor_si512(d, _mm512_load_si512((const void*)(data + i + 192)));
  }
  a = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  return _mm512_reduce_add_epi64(a);
#else
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i*)(data + i)));
    b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i*)(data + i + 32)));
    c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i*)(data + i + 64)));
    d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i*)(data + i + 96)));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return _mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 3);
#endif
}

// One pass of q4_0 x int8 dot products over the job's blocks (two blocks per 512-bit step).
static int64_t q4dot_pass(const uint8_t* w, size_t bytes, const int8_t* x) {
  const size_t blocks = bytes / 18;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  // 4 accumulators, so the FMA latency never binds: the rate is the instructions' throughput.
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (size_t b = 0; b + 8 <= blocks; b += 8) {
    for (int s = 0; s < 4; ++s) {
      const uint8_t* p0 = w + (b + 2 * s) * 18;
      const uint8_t* p1 = p0 + 18;
      const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(p0 + 2)));
      const __m256i q1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(p1 + 2)));
      __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
      q = _mm512_and_si512(_mm512_srlv_epi64(q, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), low);
      const __m512i xv = _mm512_loadu_si512((const void*)(x + ((b + 2 * s) % 64) * 32));
#if defined(__AVX512VNNI__)
      const __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xv);
#else
      const __m512i t = _mm512_madd_epi16(_mm512_maddubs_epi16(q, xv), _mm512_set1_epi16(1));
#endif
      const __m128i h = _mm_unpacklo_epi16(_mm_loadu_si16(p0), _mm_loadu_si16(p1));
      const __m512 d = _mm512_permutexvar_ps(
          _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
          _mm512_castps128_ps512(_mm_cvtph_ps(h)));
      acc[s] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(t), acc[s]);
    }
  }
  return (int64_t)_mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
#else
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* p = w + b * 18;
    const __m128i qs = _mm_loadu_si128((const __m128i*)(p + 2));
    const __m256i q = _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0f));
    const __m256i xv = _mm256_loadu_si256((const __m256i*)(x + (b % 64) * 32));
    const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), _mm256_set1_epi16(1));
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(*(const uint16_t*)p));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(t), acc);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  return (int64_t)lanes[0];
#endif
}

// One pass of kFmaSteps x 12 register FMAs; returns a lane so that nothing is elided.
enum { kFmaSteps = 1 << 22 };
#if defined(__AVX512F__)
enum { kFmaLanes = 16 };
#else
enum { kFmaLanes = 8 };
#endif
static int64_t fma_pass(void) {
#if defined(__AVX512F__)
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps((float)i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int s = 0; s < kFmaSteps; ++s)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return (int64_t)_mm512_reduce_add_ps(acc[0]);
#else
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps((float)i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int s = 0; s < kFmaSteps; ++s)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  return (int64_t)lanes[0];
#endif
}

enum Kind { kRead, kQ4dot, kFma };
static enum Kind g_kind;

static void* worker(void* arg) {
  Job* job = (Job*)arg;
  static int8_t x[64 * 32];
  for (int i = 0; i < 64 * 32; ++i) x[i] = (int8_t)(i * 37 % 255 - 127);
  int64_t sink = 0;
  job->seconds = 1e30;
  for (int p = 0; p < job->passes; ++p) {
    pthread_barrier_wait(job->start);
    const double t0 = now();
    sink ^= g_kind == kFma     ? fma_pass()
            : g_kind == kQ4dot ? q4dot_pass(job->data, job->bytes, x)
                               : read_pass(job->data, job->bytes);
    const double dt = now() - t0;
    if (dt < job->seconds) job->seconds = dt;
  }
  job->sink = sink;
  return NULL;
}

int main(int argc, char** argv) {
  const char* kind = argc == 3 ? argv[1] : "";
  g_kind = strcmp(kind, "fma") == 0 ? kFma : strcmp(kind, "q4dot") == 0 ? kQ4dot : kRead;
  if (argc != 3 || (g_kind == kRead && strcmp(kind, "read") != 0)) {
    fprintf(stderr, "usage: %s read|q4dot|fma THREADS\n", argv[0]);
    return 2;
  }
  const int g_q4dot = g_kind == kQ4dot;
  const int threads = atoi(argv[2]);
  if (threads < 1 || threads > 1024) {
    fprintf(stderr, "%s: THREADS must be 1..1024, got %s\n", argv[0], argv[2]);
    return 2;
  }
  // read: 512 MiB per thread (far beyond any L3); q4dot: 18 KiB x 16 per thread (L2-resident),
  // repeated enough times to run for a while; fma reads no memory.
  const size_t slice = g_kind != kRead ? (size_t)18 * 1024 * 16 : (size_t)512 << 20;
  const int passes = g_kind == kFma ? 20 : g_q4dot ? 2000 : 5;
  const size_t huge = (size_t)2 << 20;
  uint8_t* data = aligned_alloc(huge, (slice * (size_t)threads + huge - 1) / huge * huge);
  if (data == NULL) {
    fprintf(stderr, "%s: cannot allocate %zu bytes\n", argv[0], slice * (size_t)threads);
    return 1;
  }
  madvise(data, slice * (size_t)threads, MADV_HUGEPAGE);  // best effort (THP "never": no-op)
  // Scales 0x30.. are normal f16 values; nibbles vary.
  for (size_t i = 0; i < slice * (size_t)threads; ++i) data[i] = (uint8_t)(0x30 | (i * 2654435761u >> 13 & 0x0f));
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  Job* jobs = calloc((size_t)threads, sizeof(Job));
  pthread_t* ids = calloc((size_t)threads, sizeof(pthread_t));
  for (int t = 0; t < threads; ++t) {
    jobs[t] = (Job){data + slice * (size_t)t, slice, passes, &start, 0.0, 0};
    pthread_create(&ids[t], NULL, worker, &jobs[t]);
  }
  double slowest = 0.0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    if (jobs[t].seconds > slowest) slowest = jobs[t].seconds;
  }
  // Every thread's best pass, and the slowest of those: all threads were working at once.
  const double work = g_kind == kFma ? 2.0 * kFmaSteps * 12 * kFmaLanes * threads
                                     : (double)(slice * (size_t)threads);
  printf("%.2f\n", work / slowest * 1e-9);
  return 0;
}
