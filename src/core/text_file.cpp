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
  return parse_json_text(read_text_file(path), path);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": malformed JSON: ", e.what());
  }
}

}  // namespace deepinfer
