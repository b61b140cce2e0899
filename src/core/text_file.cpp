#include "core/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace deepinfer {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) fail(path, ": cannot open: ", std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  DI_CHECK(!in.bad(), path, ": read error");
  return buffer.str();
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": malformed JSON: ", e.what());
  }
}

}  // namespace deepinfer
