#include "core/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

#ifndef DEEPINFER_VERSION
#define DEEPINFER_VERSION "unknown"
#endif

namespace deepinfer {
namespace {

struct Search {
  uintptr_t address = 0;  // inside the object we look for
  std::string id;
};

// Align a note field to 4 bytes, as ELF notes are laid out.
size_t align4(size_t n) {
  return (n + 3) & ~size_t{3};
}

std::string hex(const unsigned char* bytes, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && search->address >= begin && search->address < begin + ph.p_memsz) {
      contains = true;
    }
  }
  if (!contains) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* at = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = at + ph.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, at, sizeof(note));
      const unsigned char* name = at + sizeof(note);
      const unsigned char* desc = name + align4(note.n_namesz);
      if (desc + note.n_descsz > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        search->id = hex(desc, note.n_descsz);
        return 1;
      }
      at = desc + align4(note.n_descsz);
    }
  }
  return 1;  // the object was found; it has no build id
}

}  // namespace

std::string build_id() {
  Search search;
  search.address = reinterpret_cast<uintptr_t>(&build_id);
  dl_iterate_phdr(&visit, &search);
  if (!search.id.empty()) return search.id;
  return std::string("version-") + DEEPINFER_VERSION + "-" + __DATE__ + " " + __TIME__;
}

}  // namespace deepinfer
