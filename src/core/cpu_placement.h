#pragma once
// Which CPUs the compute threads run on: llama.cpp's -C/--cpu-mask and --cpu-strict, and its
// --numa strategies (distribute, isolate, numactl). Planned once at start-up
// (config/setup.cpp) and applied by ThreadPool as each thread starts.
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

enum class NumaStrategy {
  none,
  distribute,  // thread i on the CPUs of NUMA node i % nodes (spread over all nodes)
  isolate,     // every thread on the CPUs of the node the process started on
  numactl,     // every thread on the CPUs numactl (or taskset) gave the process
};
// "distribute" | "isolate" | "numactl" (llama.cpp's names); Error naming `origin` otherwise.
NumaStrategy parse_numa_strategy(std::string_view name, const std::string& origin);
std::string_view numa_strategy_name(NumaStrategy strategy);

// llama.cpp's --cpu-mask: hex digits, optionally "0x", bit i = CPU i ("5" = CPUs 0 and 2).
// Error naming `origin` for a bad digit or an empty mask.
std::vector<int> parse_cpu_mask(std::string_view hex, const std::string& origin);
// A kernel CPU list ("0-3,8,10-11") as in /sys/devices/system/node/node0/cpulist.
std::vector<int> parse_cpu_list(std::string_view list);
// The CPUs of each NUMA node (/sys/devices/system/node/node*/cpulist); one node holding every
// online CPU when the kernel exposes none.
std::vector<std::vector<int>> numa_node_cpus();
// The CPUs this thread may run on (sched_getaffinity).
std::vector<int> allowed_cpus();

struct CpuPlacement {
  // cpus[i]: the CPUs thread i (0: the thread that built the pool) may run on; empty: threads
  // are not pinned. Threads beyond cpus.size() take cpus[i % cpus.size()].
  std::vector<std::vector<int>> cpus;
  std::string summary;  // what was decided, for the start-up log
  bool pinned() const { return !cpus.empty(); }
  const std::vector<int>& of_thread(int index) const {
    return cpus[static_cast<size_t>(index) % cpus.size()];
  }
};

// `mask` empty: no --cpu-mask. strict (--cpu-strict 1): thread i on the i-th CPU of the mask
// (of the allowed CPUs without one), round robin; otherwise every thread on the whole mask.
// A NUMA strategy and a mask are exclusive (Error). On a host with one NUMA node the NUMA
// strategies pin nothing (there is nothing to spread or isolate) and say so in `summary`.
CpuPlacement plan_cpu_placement(int threads, NumaStrategy numa, const std::vector<int>& mask,
                                bool strict);

// Restricts the calling thread to `cpus` (pthread_setaffinity_np); on failure logs a warning
// naming the CPUs and the reason, and returns false.
bool pin_current_thread(const std::vector<int>& cpus);

}  // namespace deepinfer
