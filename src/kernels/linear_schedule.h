#pragma once
// How linear() deals its work items to threads (kernels.cpp): each thread owns a contiguous
// share and walks it in order (so the decode kernels' prefetch of the next weight tile stays
// useful), and a thread that finishes early takes grabs from the front of the others' remaining
// shares. A worker woken late (the pool wakes its threads through a condition variable, which
// costs tens of microseconds on a busy machine: as long as a whole small projection) then no
// longer holds up the call. Which thread computes an item never changes its result.
#include <cstdint>
#include <functional>

#include "core/thread_pool.h"

namespace deepinfer::kernels::detail {

// Calls body(begin, end) over disjoint ranges covering [0, items), from up to pool.size()
// threads, each range at least min_chunk items long (except at the end of a share); a call
// with fewer than 2 * min_chunk items runs inline.
void run_items_stealing(ThreadPool& pool, int64_t items, int64_t min_chunk,
                        const std::function<void(int64_t, int64_t)>& body);

// The output tiles of an [m, n] = [m, k] x [n, k]^T product with scale-carrying weights (the
// FP8 and W8A8 linears): tiles of tile_n outputs by up to row_block rows, numbered n-tile major
// (so a thread keeps its weight rows), dealt by run_items_stealing with at least 2^16
// multiply-adds a grab. rows(r0, r1, j0, j1) computes y[r0 .. r1, j0 .. j1).
void run_output_tiles(ThreadPool& pool, int64_t m, int64_t n, int64_t k, int64_t tile_n,
                      int64_t row_block,
                      const std::function<void(int64_t, int64_t, int64_t, int64_t)>& rows);

}  // namespace deepinfer::kernels::detail
