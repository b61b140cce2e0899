#pragma once
// The read bandwidth of memory already in place, for the decode's roofline: a decode step
// streams every weight once, so its weight bytes per second against this rate, measured on the
// weights' own pages, is how close it runs to the memory (bench/llamacpp_bench.py, `generate
// --measure-bandwidth`; bench/bandwidth_probe.c measures a fresh buffer instead).
#include <span>

#include "core/huge_page_arena.h"
#include "core/thread_pool.h"

namespace deepinfer::kernels {

// GB/s of the fastest of `passes` parallel reads of `runs`: the bytes split evenly over the
// pool's threads (contiguous shares), each read with vector loads folded by xor, as
// bench/bandwidth_probe.c reads its buffer. 0 when the runs hold no bytes.
double read_bandwidth(std::span<const MemoryRun> runs, ThreadPool& pool, int passes = 3);

}  // namespace deepinfer::kernels
