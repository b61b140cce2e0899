#pragma once
// Whole-file reads with errors that name the file.
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer {

std::string read_text_file(const std::string& path);
// Parses a JSON file; throws Error "<path>: malformed JSON: <where and why>".
nlohmann::json read_json_file(const std::string& path);
// The same for JSON text already in memory; `source` names it in the error.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

}  // namespace deepinfer
