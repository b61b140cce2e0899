#include "core/cpu_placement.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/log.h"

namespace deepinfer {
namespace {

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size(); ++i) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j;
  }
  return out;
}

}  // namespace

NumaStrategy parse_numa_strategy(std::string_view name, const std::string& origin) {
  if (name == "distribute") return NumaStrategy::distribute;
  if (name == "isolate") return NumaStrategy::isolate;
  if (name == "numactl") return NumaStrategy::numactl;
  fail(origin, " = \"", name, "\": expected distribute, isolate or numactl (llama.cpp's --numa)");
}

std::string_view numa_strategy_name(NumaStrategy strategy) {
  switch (strategy) {
    case NumaStrategy::distribute:
      return "distribute";
    case NumaStrategy::isolate:
      return "isolate";
    case NumaStrategy::numactl:
      return "numactl";
    case NumaStrategy::none:
      break;
  }
  return "none";
}

std::vector<int> parse_cpu_mask(std::string_view hex, const std::string& origin) {
  if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
  std::vector<int> cpus;
  const auto digits = static_cast<int>(hex.size());
  for (int i = 0; i < digits; ++i) {
    const char c = hex[static_cast<size_t>(digits - 1 - i)];  // lowest CPUs last, as written
    int value = 0;
    if (c >= '0' && c <= '9') {
      value = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      value = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      value = c - 'A' + 10;
    } else {
      fail(origin, " = \"", hex, "\": not a hex CPU mask (bit i = CPU i, e.g. 0xff)");
    }
    for (int bit = 0; bit < 4; ++bit)
      if (value & (1 << bit)) cpus.push_back(4 * i + bit);
  }
  std::sort(cpus.begin(), cpus.end());
  DI_CHECK(!cpus.empty(), origin, " = \"", hex, "\": the mask selects no CPU");
  DI_CHECK(cpus.back() < CPU_SETSIZE, origin, ": CPU ", cpus.back(), " is beyond the ", CPU_SETSIZE,
           " CPUs an affinity mask can name");
  return cpus;
}

std::vector<int> parse_cpu_list(std::string_view list) {
  std::vector<int> cpus;
  size_t at = 0;
  while (at < list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string_view::npos) end = list.size();
    const std::string part(list.substr(at, end - at));
    at = end + 1;
    if (part.empty() || part == "\n") continue;
    const auto dash = part.find('-');
    const int first = std::stoi(part.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::vector<std::vector<int>> numa_node_cpus() {
  namespace fs = std::filesystem;
  std::vector<std::pair<int, std::vector<int>>> nodes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 ||
        !std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::ifstream in(entry.path() / "cpulist");
    std::string text;
    std::getline(in, text);
    std::vector<int> cpus = parse_cpu_list(text);
    if (!cpus.empty()) nodes.emplace_back(std::stoi(name.substr(4)), std::move(cpus));
  }
  std::sort(nodes.begin(), nodes.end());
  std::vector<std::vector<int>> out;
  for (auto& node : nodes) out.push_back(std::move(node.second));
  if (out.empty()) out.push_back(allowed_cpus());
  return out;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

CpuPlacement plan_cpu_placement(int threads, NumaStrategy numa, const std::vector<int>& mask,
                                bool strict) {
  CpuPlacement plan;
  if (numa != NumaStrategy::none) {
    DI_CHECK(mask.empty() && !strict, "--numa ", numa_strategy_name(numa),
             " places the threads itself: give it or --cpu-mask / --cpu-strict, not both");
    const auto nodes = numa_node_cpus();
    if (nodes.size() <= 1) {
      plan.summary = str_cat("--numa ", numa_strategy_name(numa),
                             ": this host has one NUMA node, so threads and memory stay as "
                             "they are (nothing to spread or isolate)");
      return plan;
    }
    if (numa == NumaStrategy::distribute) {
      for (int i = 0; i < threads; ++i)
        plan.cpus.push_back(nodes[static_cast<size_t>(i) % nodes.size()]);
      plan.summary = str_cat("--numa distribute: ", threads, " threads round robin over ",
                             nodes.size(), " NUMA nodes");
    } else if (numa == NumaStrategy::isolate) {
      const int here = ::sched_getcpu();
      size_t node = 0;
      for (size_t n = 0; n < nodes.size(); ++n)
        if (std::find(nodes[n].begin(), nodes[n].end(), here) != nodes[n].end()) node = n;
      plan.cpus.push_back(nodes[node]);
      plan.summary = str_cat("--numa isolate: every thread on NUMA node ", node, " (CPUs ",
                             cpu_list_text(nodes[node]), ")");
    } else {
      plan.cpus.push_back(allowed_cpus());
      plan.summary = str_cat("--numa numactl: every thread on the CPUs numactl gave (",
                             cpu_list_text(plan.cpus[0]), ")");
    }
    return plan;
  }
  if (mask.empty() && !strict) return plan;
  const std::vector<int> cpus = mask.empty() ? allowed_cpus() : mask;
  if (cpus.empty()) return plan;
  if (strict) {
    for (int i = 0; i < threads; ++i)
      plan.cpus.push_back({cpus[static_cast<size_t>(i) % cpus.size()]});
    plan.summary = str_cat("--cpu-strict: thread i on CPU i of ", cpu_list_text(cpus));
  } else {
    plan.cpus.push_back(cpus);
    plan.summary = str_cat("--cpu-mask: every thread on CPUs ", cpu_list_text(cpus));
  }
  return plan;
}

bool pin_current_thread(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  const int err = ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
  if (err == 0) return true;
  log::warn("cannot pin a compute thread to CPUs ", cpu_list_text(cpus), ": ", std::strerror(err),
            " (CPUs outside this process's cpuset or offline?); it runs unpinned");
  return false;
}

}  // namespace deepinfer
