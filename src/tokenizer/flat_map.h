#pragma once
// Open-addressing hash tables for the tokenizer's hot lookups: token string -> id (vocab)
// and (left id, right id) -> merge. Built once at load, read-only afterwards, so they are
// safe to share between threads. Slots are 8 bytes so a 150k-token vocabulary's table
// (about 2 MB) mostly stays in cache while the merges are resolved at load time.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  }
  return mix64(h);
}

// Token string -> id. Keys live in one arena; a slot holds the key's place in it, so a
// lookup touches the slot and the key bytes only. Callers resolving many keys can hash
// and prefetch ahead (hash(), prefetch(), find(key, hash)) to overlap the cache misses.
class StringIdMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n + n / 2) cap <<= 1;
    rehash(cap);
    arena_.reserve(n * 8);
  }
  static uint64_t hash(std::string_view key) { return hash_bytes(key); }
  void prefetch(uint64_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }
  // Inserts or overwrites (a later duplicate key wins, as a JSON object parse would).
  void insert(std::string_view key, int32_t id) {
    if ((size_ + 1) * 3 > slots_.size() * 2) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const uint64_t h = hash(key);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{tag, id, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size())};
        arena_.append(key.data(), key.size());
        ++size_;
        return;
      }
      if (s.tag == tag && view(s) == key) {
        s.id = id;
        return;
      }
    }
  }
  int32_t find(std::string_view key) const { return find(key, hash(key)); }
  int32_t find(std::string_view key, uint64_t h) const {
    if (slots_.empty()) return -1;
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && view(s) == key) return s.id;
    }
  }
  size_t size() const { return size_; }
  // Calls fn(key, id) for every entry (in table order).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& s : slots_) {
      if (s.id >= 0) fn(view(s), s.id);
    }
  }

 private:
  struct Slot {
    uint32_t tag = 0;
    int32_t id = -1;
    uint32_t offset = 0;
    uint32_t len = 0;
  };
  std::string_view view(const Slot& s) const {
    return std::string_view(arena_.data() + s.offset, s.len);
  }
  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      for (size_t i = hash(view(s)) & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].id < 0) {
          slots_[i] = s;
          break;
        }
      }
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

struct MergeInfo {
  int32_t rank = -1;  // -1: no such merge
  int32_t new_id = -1;
};

// (left id, right id) -> merge rank and resulting id.
class PairMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n + n / 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Overwrites an existing pair: like a Rust HashMap collected in order, the last one wins.
  // reserve() must have made room for every pair first.
  void insert(int32_t left, int32_t right, MergeInfo info) {
    const uint64_t key = pack(left, right);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty || slots_[i].key == key) {
        slots_[i] = Slot{key, info};
        return;
      }
    }
  }
  MergeInfo find(int32_t left, int32_t right) const {
    if (slots_.empty()) return MergeInfo{};
    const uint64_t key = pack(left, right);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].info;
      if (slots_[i].key == kEmpty) return MergeInfo{};
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    MergeInfo info;
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace deepinfer::tokenizer
