#include "kernels/isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

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

// CPUID leaf 7 EDX: AMX-BF16 (bit 22), AMX-TILE (24), AMX-INT8 (25); then the OS must let
// this process use the 8 KiB tile state (Linux 5.16+: XFEATURE_XTILEDATA = 18 by
// ARCH_REQ_XCOMP_PERM = 0x1023), else the first tile instruction faults.
bool detect_amx() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned bits = (1u << 22) | (1u << 24) | (1u << 25);
  if ((edx & bits) != bits) return false;
  constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
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
  if (cpu_has_amx()) out += ", amx";
  return out;
}

// What DEEPINFER_ISA asked for, resolved once. An invalid value is kept as its message so
// every kernel call reports it (rather than silently running another path).
struct EnvChoice {
  Isa isa = Isa::scalar;
  bool amx = false;
  std::string error;
};

const EnvChoice& env_choice() {
  static const EnvChoice choice = [] {
    EnvChoice c;
    const char* value = std::getenv("DEEPINFER_ISA");
    try {
      c.isa = resolve_isa_request(value ? value : "");
      c.amx = resolve_amx_request(value ? value : "");
    } catch (const Error& e) {
      c.error = e.what();
    }
    return c;
  }();
  return choice;
}

// -1: no override; otherwise the Isa value forced by set_active_isa().
std::atomic<int> forced_isa{-1};
// -1: no override; otherwise set_amx()'s value.
std::atomic<int> forced_amx{-1};

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

bool cpu_has_amx() {
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx512_vnni() && cpu_has_avx512_bf16() && detect_amx();
  }();
  return has;
}

bool resolve_amx_request(std::string_view value) {
  if (value.empty() || value == "auto") return cpu_has_amx();
  if (value != "amx") return false;
  DI_CHECK(cpu_has_amx(), "DEEPINFER_ISA='amx' is not supported by this CPU (it supports ",
           supported_list(), "; AMX needs AMX-TILE, AMX-INT8, AMX-BF16 and the OS's permission)");
  return true;
}

Isa resolve_isa_request(std::string_view value) {
  if (value.empty() || value == "auto") return best_isa();
  if (value == "amx") {
    resolve_amx_request(value);
    return Isa::avx512;
  }
  Isa isa;
  try {
    isa = parse_isa(value);
  } catch (const Error&) {
    fail("DEEPINFER_ISA='", value, "' is not an instruction set (expected auto, scalar, avx2, ",
         "avx512 or amx; this CPU supports ", supported_list(), ")");
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

bool amx_active() {
  if (active_isa() != Isa::avx512) return false;
  const int forced = forced_amx.load(std::memory_order_relaxed);
  return forced >= 0 ? forced == 1 : env_choice().amx;
}

void set_amx(bool enabled) {
  DI_CHECK(!enabled || cpu_has_amx(), "cannot enable AMX: this CPU (or its OS) does not offer ",
           "AMX-TILE, AMX-INT8 and AMX-BF16");
  forced_amx.store(enabled ? 1 : 0, std::memory_order_relaxed);
}

void clear_amx_override() {
  forced_amx.store(-1, std::memory_order_relaxed);
}

}  // namespace deepinfer::kernels
