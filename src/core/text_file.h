#pragma once
// Whole-file reads with errors that name the file.
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer {

std::string read_text_file(const std::string& path);
// Parses a JSON file; throws Error "<path>: malformed JSON: <where and why>".
nlohmann::json read_json_file(const std::string& path);

}  // namespace deepinfer
