#include "tokenizer/jinja/pystr.h"

#include <algorithm>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace deepinfer::tokenizer::jinja::pystr {

namespace {

std::string sub(const std::u32string& cps, size_t begin, size_t end) {
  return unicode::encode(std::u32string_view(cps).substr(begin, end - begin));
}

// Python's slice-style adjustment of start / end for str methods.
void adjust_bounds(int64_t length, std::optional<int64_t> start, std::optional<int64_t> end,
                   int64_t& lo, int64_t& hi) {
  lo = start.value_or(0);
  hi = end.value_or(length);
  if (hi > length) hi = length;
  if (hi < 0) hi = std::max<int64_t>(hi + length, 0);
  if (lo < 0) lo = std::max<int64_t>(lo + length, 0);
}

}  // namespace

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string cps = unicode::decode(s);
  const std::u32string set = chars ? unicode::decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : unicode::is_space(c);
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return sub(cps, begin, end);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep) {
    const std::u32string cps = unicode::decode(s);
    size_t i = 0;
    const size_t n = cps.size();
    int64_t splits = 0;
    while (true) {
      while (i < n && unicode::is_space(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && splits == maxsplit) {
        out.push_back(sub(cps, i, n));
        break;
      }
      size_t j = i;
      while (j < n && !unicode::is_space(cps[j])) ++j;
      out.push_back(sub(cps, i, j));
      ++splits;
      i = j;
    }
    return out;
  }
  if (sep->empty()) runtime_fail("empty separator");
  size_t pos = 0;
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    const size_t k = s.find(*sep, pos);
    if (k == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, k - pos));
    pos = k + sep->size();
    ++splits;
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep) {
    const std::u32string cps = unicode::decode(s);
    size_t i = cps.size();
    int64_t splits = 0;
    while (true) {
      while (i > 0 && unicode::is_space(cps[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && splits == maxsplit) {
        out.push_back(sub(cps, 0, i));
        break;
      }
      size_t j = i;
      while (j > 0 && !unicode::is_space(cps[j - 1])) --j;
      out.push_back(sub(cps, j, i));
      ++splits;
      i = j;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  if (sep->empty()) runtime_fail("empty separator");
  size_t end = s.size();
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < sep->size()) break;
    const size_t k = s.rfind(*sep, end - sep->size());
    if (k == std::string_view::npos) break;
    out.emplace_back(s.substr(k + sep->size(), end - k - sep->size()));
    end = k;
    ++splits;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string cps = unicode::decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    if (!unicode::is_linebreak(cps[i])) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (cps[i] == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
    out.push_back(sub(cps, start, keepends ? eol : i));
    start = i = eol;
  }
  if (start < cps.size()) out.push_back(sub(cps, start, cps.size()));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count,
                    size_t max_size) {
  std::string out;
  auto append = [&](std::string_view piece) {
    if (out.size() + piece.size() > max_size) limit_fail("string larger than ", max_size, " bytes");
    out.append(piece);
  };
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const std::u32string cps = unicode::decode(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        append(with);
        ++done;
      }
      std::string ch;
      unicode::append_utf8(ch, c);
      append(ch);
    }
    if (count < 0 || done < count) append(with);
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t k = s.find(old, pos);
    if (k == std::string_view::npos) break;
    append(s.substr(pos, k - pos));
    append(with);
    pos = k + old.size();
    ++done;
  }
  append(s.substr(pos));
  return out;
}

int64_t find(std::string_view s, std::string_view needle, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse) {
  const std::u32string cps = unicode::decode(s);
  const std::u32string n = unicode::decode(needle);
  int64_t lo, hi;
  adjust_bounds(static_cast<int64_t>(cps.size()), start, end, lo, hi);
  if (lo > static_cast<int64_t>(cps.size())) return -1;
  if (hi - lo < static_cast<int64_t>(n.size())) return -1;
  const std::u32string_view window =
      std::u32string_view(cps).substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  const size_t k = reverse ? window.rfind(n) : window.find(n);
  return k == std::u32string_view::npos ? -1 : lo + static_cast<int64_t>(k);
}

int64_t count(std::string_view s, std::string_view needle, std::optional<int64_t> start,
              std::optional<int64_t> end) {
  const std::u32string cps = unicode::decode(s);
  const std::u32string n = unicode::decode(needle);
  int64_t lo, hi;
  adjust_bounds(static_cast<int64_t>(cps.size()), start, end, lo, hi);
  if (lo > static_cast<int64_t>(cps.size()) || hi < lo) return 0;
  if (n.empty()) return hi - lo + 1;
  const std::u32string_view window =
      std::u32string_view(cps).substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  int64_t total = 0;
  for (size_t k = window.find(n); k != std::u32string_view::npos;
       k = window.find(n, k + n.size())) {
    ++total;
  }
  return total;
}

bool starts_with(std::string_view s, std::string_view affix, std::optional<int64_t> start,
                 std::optional<int64_t> end, bool at_end) {
  if (!start && !end) {
    if (affix.size() > s.size()) return false;
    return at_end ? s.substr(s.size() - affix.size()) == affix : s.substr(0, affix.size()) == affix;
  }
  const std::u32string cps = unicode::decode(s);
  const std::u32string a = unicode::decode(affix);
  int64_t lo, hi;
  adjust_bounds(static_cast<int64_t>(cps.size()), start, end, lo, hi);
  if (lo > static_cast<int64_t>(cps.size())) return false;
  if (hi - lo < static_cast<int64_t>(a.size())) return false;
  const std::u32string_view window =
      std::u32string_view(cps).substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  return at_end ? window.substr(window.size() - a.size()) == a : window.substr(0, a.size()) == a;
}

std::string pad(std::string_view s, int64_t width, std::string_view fill, char align,
                size_t max_size) {
  if (unicode::length(fill) != 1)
    runtime_fail("The fill character must be exactly one character long");
  const auto len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return std::string(s);
  if (static_cast<uint64_t>(width) * fill.size() > max_size)
    limit_fail("string larger than ", max_size, " bytes");
  const int64_t marg = width - len;
  int64_t left = 0;
  if (align == 'c') left = marg / 2 + (marg & width & 1);
  if (align == 'r') left = marg;
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return out;
}

std::string zfill(std::string_view s, int64_t width, size_t max_size) {
  const auto len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return std::string(s);
  if (static_cast<uint64_t>(width) > max_size)
    limit_fail("string larger than ", max_size, " bytes");
  std::string out(s);
  const size_t at = (!out.empty() && (out[0] == '+' || out[0] == '-')) ? 1 : 0;
  out.insert(at, static_cast<size_t>(width - len), '0');
  return out;
}

bool is_title(std::string_view s) {
  bool cased = false, previous_cased = false;
  for (char32_t c : unicode::decode(s)) {
    if (unicode::is_upper(c) || (unicode::is_cased(c) && !unicode::is_lower(c))) {
      if (previous_cased) return false;
      previous_cased = cased = true;
    } else if (unicode::is_lower(c)) {
      if (!previous_cased) return false;
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return cased;
}

}  // namespace deepinfer::tokenizer::jinja::pystr
