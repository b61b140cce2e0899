#include "io/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace deepinfer::io {

void write_npy_f32(const std::string& path, std::span<const float> data,
                   const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  DI_CHECK(count == static_cast<int64_t>(data.size()), path, ": shape does not match ", data.size(),
           " values");
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();  // (n,) keeps its comma; (a,b) does not
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic(6) + version(2) + length(2) + header + '\n' padded to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');

  const std::string tmp = path + ".tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "wb");
  if (out == nullptr) fail(path, ": cannot write: ", std::strerror(errno));
  const unsigned char preamble[10] = {0x93,
                                      'N',
                                      'U',
                                      'M',
                                      'P',
                                      'Y',
                                      1,
                                      0,
                                      static_cast<unsigned char>(header.size() & 0xff),
                                      static_cast<unsigned char>(header.size() >> 8)};
  bool ok = std::fwrite(preamble, 1, sizeof(preamble), out) == sizeof(preamble) &&
            std::fwrite(header.data(), 1, header.size(), out) == header.size() &&
            std::fwrite(data.data(), sizeof(float), data.size(), out) == data.size();
  ok = (std::fclose(out) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail(path, ": write failed (disk full?)");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace deepinfer::io
