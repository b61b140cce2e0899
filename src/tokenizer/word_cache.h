#pragma once
// Word -> ids cache of the BPE model. Text repeats its words, so most words skip the merge
// loop. Shared by all threads: sharded by hash, each shard a flat open-addressing table with
// its keys and ids in two arenas (no allocation per entry); a shard that fills up starts over.
#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

class WordCache {
 public:
  // Appends the cached ids of `word` (whose hash_bytes is `hash`) to out; false on a miss.
  bool get(std::string_view word, uint64_t hash, std::vector<int32_t>& out);
  void put(std::string_view word, uint64_t hash, std::span<const int32_t> ids);

 private:
  static constexpr size_t kShards = 16;
  static constexpr size_t kSlots = 4096;  // per shard; cleared when half full
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t key_len = 0;
    uint16_t ids_len = 0;
    bool used = false;
  };
  struct alignas(64) Shard {
    std::mutex mu;
    std::vector<Slot> slots;  // allocated on first use
    std::string keys;
    std::vector<int32_t> ids;
    size_t count = 0;
  };
  std::array<Shard, kShards> shards_;
};

}  // namespace deepinfer::tokenizer
