#pragma once
// The identity of the code running: the GNU build id (NT_GNU_BUILD_ID, a hash the linker
// puts in every Debian-built ELF object) of the object this function is linked into — the
// `deepinfer` binary, or the `_deepinfer` Python module. Two builds from other sources (or
// other flags) differ; two copies of one build agree. Ranks of one job compare it at start.
#include <string>

namespace deepinfer {

// Lowercase hex; when the object has no build-id note, "version-" + the version and the
// compile time of this file (weaker: equal for two builds of one source at one time).
std::string build_id();

}  // namespace deepinfer
