#include "kernels/isa.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace deepinfer::kernels {
namespace {

// F16C has no __builtin_cpu_supports name in clang 14, so read CPUID leaf 1 (ECX bit 29).
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & (1u << 29)) != 0;
}

// libgcc / compiler-rt also check (via XGETBV) that the OS saves the wider registers.
bool detect(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case Isa::avx512:
      return detect(Isa::avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
  }
  return false;
}

std::string supported_list() {
  std::string out;
  for (Isa isa : supported_isas()) {
    if (!out.empty()) out += ", ";
    out += isa_name(isa);
  }
  return out;
}

// What DEEPINFER_ISA asked for, resolved once. An invalid value is kept as its message so
// every kernel call reports it (rather than silently running another path).
struct EnvChoice {
  Isa isa = Isa::scalar;
  std::string error;
};

const EnvChoice& env_choice() {
  static const EnvChoice choice = [] {
    EnvChoice c;
    const char* value = std::getenv("DEEPINFER_ISA");
    try {
      c.isa = resolve_isa_request(value ? value : "");
    } catch (const Error& e) {
      c.error = e.what();
    }
    return c;
  }();
  return choice;
}

// -1: no override; otherwise the Isa value forced by set_active_isa().
std::atomic<int> forced_isa{-1};

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "invalid";
}

Isa parse_isa(std::string_view name) {
  if (name == "scalar") return Isa::scalar;
  if (name == "avx2") return Isa::avx2;
  if (name == "avx512") return Isa::avx512;
  fail("unknown instruction set '", name, "' (expected scalar, avx2 or avx512)");
}

bool isa_supported(Isa isa) {
  static const bool has_avx2 = detect(Isa::avx2);
  static const bool has_avx512 = detect(Isa::avx512);
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return has_avx2;
    case Isa::avx512:
      return has_avx512;
  }
  return false;
}

Isa best_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

bool cpu_has_avx512_bf16() {
  static const bool has = [] {
    __builtin_cpu_init();
    return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bf16");
  }();
  return has;
}

bool cpu_has_avx512_vnni() {
  static const bool has = [] {
    __builtin_cpu_init();
    return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512vnni");
  }();
  return has;
}

Isa resolve_isa_request(std::string_view value) {
  if (value.empty() || value == "auto") return best_isa();
  Isa isa;
  try {
    isa = parse_isa(value);
  } catch (const Error&) {
    fail("DEEPINFER_ISA='", value, "' is not an instruction set (expected auto, scalar, avx2 or ",
         "avx512; this CPU supports ", supported_list(), ")");
  }
  DI_CHECK(isa_supported(isa), "DEEPINFER_ISA='", value, "' is not supported by this CPU (it ",
           "supports ", supported_list(), "); unset DEEPINFER_ISA or pick one of those");
  return isa;
}

Isa active_isa() {
  const int forced = forced_isa.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<Isa>(forced);
  const EnvChoice& choice = env_choice();
  if (!choice.error.empty()) throw Error(choice.error);
  return choice.isa;
}

void set_active_isa(Isa isa) {
  DI_CHECK(isa_supported(isa), "cannot select instruction set ", isa_name(isa),
           ": this CPU supports ", supported_list());
  forced_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void clear_active_isa_override() {
  forced_isa.store(-1, std::memory_order_relaxed);
}

}  // namespace deepinfer::kernels
