#include "tokenizer/word_cache.h"

#include <cstring>

namespace deepinfer::tokenizer {

bool WordCache::get(std::string_view word, uint64_t hash, std::vector<int32_t>& out) {
  Shard& shard = shards_[hash >> 60];
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.slots.empty()) return false;
  for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    const Slot& s = shard.slots[i];
    if (!s.used) return false;
    if (s.hash == hash && s.key_len == word.size() &&
        std::memcmp(shard.keys.data() + s.key_offset, word.data(), word.size()) == 0) {
      const int32_t* ids = shard.ids.data() + s.ids_offset;
      out.insert(out.end(), ids, ids + s.ids_len);
      return true;
    }
  }
}

void WordCache::put(std::string_view word, uint64_t hash, std::span<const int32_t> ids) {
  if (word.size() > UINT16_MAX || ids.size() > UINT16_MAX) return;
  Shard& shard = shards_[hash >> 60];
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.slots.empty() || shard.count * 2 >= kSlots) {
    shard.slots.assign(kSlots, Slot{});
    shard.keys.clear();
    shard.ids.clear();
    shard.count = 0;
  }
  for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    Slot& s = shard.slots[i];
    if (s.used) {
      if (s.hash == hash && s.key_len == word.size() &&
          std::memcmp(shard.keys.data() + s.key_offset, word.data(), word.size()) == 0) {
        return;  // another thread got here first
      }
      continue;
    }
    s = Slot{hash,
             static_cast<uint32_t>(shard.keys.size()),
             static_cast<uint32_t>(shard.ids.size()),
             static_cast<uint16_t>(word.size()),
             static_cast<uint16_t>(ids.size()),
             true};
    shard.keys.append(word);
    shard.ids.insert(shard.ids.end(), ids.begin(), ids.end());
    ++shard.count;
    return;
  }
}

}  // namespace deepinfer::tokenizer
