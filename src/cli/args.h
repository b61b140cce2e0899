#pragma once
// Minimal, strict flag parser: `--name value`, `--name=value` and boolean `--name`, plus
// optional short aliases (`-m DIR` for `--model DIR`, llama.cpp style) and one optional
// positional value (`deepinfer serve MODEL`, vLLM style). Unknown flags, missing values and
// malformed numbers are errors naming the flag; an unknown flag names the nearest known one
// ("did you mean --temperature?").
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace deepinfer::cli {

struct ArgsOptions {
  // Single-dash spellings: {"m", "model"} makes `-m X` mean `--model X`.
  std::map<std::string, std::string> aliases = {};
  // Non-empty: one bare argument (not starting with '-') is this flag's value, e.g. "model";
  // giving it both ways is an error.
  std::string positional = {};
};

class Args {
 public:
  // value_flags take a value; bool_flags do not. Both are given without the leading "--".
  Args(const std::vector<std::string>& argv, std::set<std::string> value_flags,
       std::set<std::string> bool_flags, const ArgsOptions& options = {});

  bool has(const std::string& name) const;
  bool flag(const std::string& name) const { return has(name); }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  std::string require(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_double(const std::string& name, double fallback) const;
  // Parses "1,2,3" into integers.
  std::vector<int64_t> get_int_list(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

int64_t parse_int(const std::string& text, const std::string& what);
double parse_double(const std::string& text, const std::string& what);
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);

// Levenshtein distance (insertions, deletions, substitutions of one byte each).
size_t edit_distance(const std::string& a, const std::string& b);
// The known name closest to `unknown` when it is plausibly a typo of it (a unique prefix, or
// within a third of its length in edits), else nullopt.
std::optional<std::string> nearest_name(const std::string& unknown,
                                        const std::set<std::string>& known);

}  // namespace deepinfer::cli
