#include "cli/args.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace deepinfer::cli {
namespace {

// "unknown flag --X" with the nearest known spelling, so a typo costs one re-run.
[[noreturn]] void unknown_flag(const std::string& shown, const std::string& name,
                               const std::set<std::string>& known) {
  if (const auto near = nearest_name(name, known)) {
    fail("unknown flag ", shown, ": did you mean --", *near, "? (see --help)");
  }
  fail("unknown flag ", shown, " (see --help)");
}

}  // namespace

Args::Args(const std::vector<std::string>& argv, std::set<std::string> value_flags,
           std::set<std::string> bool_flags, const ArgsOptions& options) {
  std::set<std::string> known = value_flags;
  known.insert(bool_flags.begin(), bool_flags.end());
  bool positional_seen = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    std::string name;
    std::string shown = arg;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      name = arg.substr(2);
    } else if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-') {
      const auto alias = options.aliases.find(arg.substr(1));
      if (alias == options.aliases.end()) unknown_flag(arg, arg.substr(1), known);
      name = alias->second;
    } else if (!options.positional.empty() && !positional_seen && !arg.empty() && arg[0] != '-') {
      positional_seen = true;
      DI_CHECK(!values_.count(options.positional), "the ", options.positional,
               " is given twice: as '", arg, "' and with --", options.positional);
      values_[options.positional] = arg;
      continue;
    } else {
      fail("unexpected argument '", arg, "' (flags start with --; see --help)");
    }
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
      shown = shown.substr(0, shown.find('='));
    }
    if (bool_flags.count(name)) {
      DI_CHECK(!inline_value, "flag --", name, " takes no value");
      values_[name] = "1";
    } else if (value_flags.count(name)) {
      DI_CHECK(name != options.positional || !positional_seen, "the ", name,
               " is given twice: as a bare argument and with --", name);
      if (inline_value) {
        values_[name] = *inline_value;
      } else {
        DI_CHECK(i + 1 < argv.size(), "flag --", name, " needs a value");
        values_[name] = argv[++i];
      }
    } else {
      unknown_flag(shown, name, known);
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

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> nearest_name(const std::string& unknown,
                                        const std::set<std::string>& known) {
  if (unknown.empty()) return std::nullopt;
  // A unique prefix (--temp for --temperature) is the likeliest meaning.
  std::optional<std::string> prefixed;
  int prefix_matches = 0;
  for (const auto& name : known) {
    if (name.rfind(unknown, 0) == 0) {
      prefixed = name;
      ++prefix_matches;
    }
  }
  if (prefix_matches == 1) return prefixed;
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const auto& name : known) {
    const size_t d = edit_distance(unknown, name);
    if (!best || d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  const size_t limit = std::max<size_t>(2, unknown.size() / 3);
  if (best && best_distance <= limit) return best;
  return std::nullopt;
}

}  // namespace deepinfer::cli
