#pragma once
// Instruction-set selection for CPU kernels. Chosen once at run time from CPUID, or forced
// with DEEPINFER_ISA=auto|scalar|avx2|avx512|amx (forcing an ISA the CPU lacks is an error;
// the variable is read once, on the first kernel call). amx is the avx512 kernels plus AMX
// tiles where they pay (amx_active() below); avx512 then means AVX-512 without tiles.
#include <string_view>
#include <vector>

namespace deepinfer::kernels {

enum class Isa { scalar, avx2, avx512 };

std::string_view isa_name(Isa isa);
Isa parse_isa(std::string_view name);  // throws Error on unknown names
bool isa_supported(Isa isa);           // by this CPU (avx512 = F+BW+VL+DQ)
Isa best_isa();                        // the widest supported
std::vector<Isa> supported_isas();     // for tests: every path this host can run

// The ISA kernels dispatch on: DEEPINFER_ISA if set, else best_isa().
Isa active_isa();
// Overrides the active ISA (tests and benchmarks); throws Error if unsupported.
void set_active_isa(Isa isa);
// Drops a set_active_isa() override: back to DEEPINFER_ISA / best_isa().
void clear_active_isa_override();

// What a DEEPINFER_ISA value selects: "" or "auto" -> best_isa(); otherwise the named ISA,
// which must be supported. Throws Error naming the value and what this CPU supports.
Isa resolve_isa_request(std::string_view value);
// Whether that value asks for AMX tiles: "amx" (an Error where the CPU lacks them), or ""/"auto"
// on a CPU that has them; the other names turn them off.
bool resolve_amx_request(std::string_view value);

// AVX512_BF16 (vdpbf16ps) is reported separately: only the opt-in bf16-activation linear
// (MatmulPrecision::bf16, linear_dpbf16_avx512.cpp) uses it.
bool cpu_has_avx512_bf16();
// AVX512_VNNI (vpdpbusd) likewise: the block-weight linear (linear_q8_avx512vnni.cpp) uses it
// when present, else the AVX-512BW path with the same integer results.
bool cpu_has_avx512_vnni();

// AMX (Sapphire Rapids and later): AMX-TILE, AMX-INT8 and AMX-BF16 by CPUID, AVX-512 with VNNI
// and BF16, and Linux's permission to use the tile state (arch_prctl(ARCH_REQ_XCOMP_PERM),
// asked once, here; a kernel or VM that refuses it means no AMX).
bool cpu_has_amx();
// Whether the block-weight GEMM uses AMX tiles now (large m; kernels.h): the active ISA is
// avx512 and AMX was requested (DEEPINFER_ISA=amx or auto on an AMX CPU) or set_amx(true).
bool amx_active();
// Overrides the DEEPINFER_ISA choice of AMX (tests and benchmarks); throws Error when enabling it
// on a CPU without it.
void set_amx(bool enabled);
void clear_amx_override();

}  // namespace deepinfer::kernels
