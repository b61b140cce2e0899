#include "engine/sequence.h"

namespace deepinfer::engine {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::abort:
      return "abort";
    case FinishReason::none:
      break;
  }
  return "";
}

uint64_t sibling_seed(uint64_t seed, int64_t index) {
  if (index == 0) return seed;
  // splitmix64 of (seed, index): siblings draw independent streams.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index) + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace deepinfer::engine
