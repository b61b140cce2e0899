#include "cli/args.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace deepinfer::cli {

Args::Args(const std::vector<std::string>& argv, std::set<std::string> value_flags,
           std::set<std::string> bool_flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    DI_CHECK(arg.rfind("--", 0) == 0 && arg.size() > 2, "unexpected argument '", arg,
             "' (flags start with --; see --help)");
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      DI_CHECK(!inline_value, "flag --", name, " takes no value");
      values_[name] = "1";
    } else if (value_flags.count(name)) {
      if (inline_value) {
        values_[name] = *inline_value;
      } else {
        DI_CHECK(i + 1 < argv.size(), "flag --", name, " needs a value");
        values_[name] = argv[++i];
      }
    } else {
      fail("unknown flag --", name, " (see --help)");
    }
  }
}

bool Args::has(const std::string& name) const {
  return values_.count(name) != 0;
}

std::optional<std::string> Args::get(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::string Args::require(const std::string& name) const {
  const auto value = get(name);
  DI_CHECK(value.has_value(), "missing required flag --", name);
  return *value;
}

int64_t Args::get_int(const std::string& name, int64_t fallback) const {
  const auto value = get(name);
  return value ? parse_int(*value, "--" + name) : fallback;
}

double Args::get_double(const std::string& name, double fallback) const {
  const auto value = get(name);
  return value ? parse_double(*value, "--" + name) : fallback;
}

std::vector<int64_t> Args::get_int_list(const std::string& name) const {
  return parse_int_list(require(name), "--" + name);
}

int64_t parse_int(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  DI_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0, what,
           ": expected an integer, got '", text, "'");
  return value;
}

double parse_double(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  DI_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0, what,
           ": expected a number, got '", text, "'");
  return value;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    out.push_back(parse_int(text.substr(start, end - start), what));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace deepinfer::cli
