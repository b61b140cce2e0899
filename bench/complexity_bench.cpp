// The algorithmic-complexity suite (issue #44): every parser and expander of a request or a
// model file, timed on inputs of size n and 4n. Linear work gives a cost ratio near 4, n log n
// a little more; the ratio must stay <= 6 (a quadratic one gives 16), and the peak RSS growth
// while the 4n input runs must stay within the case's stated bound.
//
//   complexity_bench            every case at full size (n = 1-4 MiB), 7 repeats
//   complexity_bench --quick    4x smaller, 3 repeats: the CI subset
//                               (tests/integration/test_complexity.py)
//   complexity_bench --filter S only the cases whose name contains S
//
// Times are the minimum of several runs (noise on a shared 2-core machine only adds). Exit
// status 1 when any case is over its bound. docs/TESTING.md lists the cases and bounds.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/request_parser.h"
#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "server/protocol.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace deepinfer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kMaxRatio = 6.0;
constexpr size_t kMiB = 1 << 20;

struct Case {
  std::string name;
  size_t n;                                     // the base size (--quick; the full run: 4 n)
  std::function<std::string(size_t)> make;      // an input of about that size
  std::function<void(const std::string&)> run;  // the work timed
  double rss_per_input_byte;                    // peak RSS bound: this x input + 16 MiB
};

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0 && line[len] == ':')
      return std::stol(line.substr(len + 1));
  }
  return 0;
}

void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

double seconds_of(const Case& c, const std::string& input, int repeats) {
  double best = std::numeric_limits<double>::max();
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    c.run(input);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// ------------------------------------------------------------------------- inputs

std::string repeat_to(const std::string& unit, size_t bytes) {
  std::string out;
  out.reserve(bytes + unit.size());
  while (out.size() < bytes) out += unit;
  return out;
}

const std::string kProse =
    "The quick brown fox, 42 times; jumps over the lazy dog's back. Ünïcödé àçcénts ﬁ 123! ";

// A byte-level BPE tokenizer: the 256 byte characters and a few merges, with `normalizer`
// and `pre_tokenizer` (the final ByteLevel step maps the bytes).
std::shared_ptr<tokenizer::Tokenizer> tokenizer_with(const json& normalizer,
                                                     const json& pre_tokenizer) {
  json vocab = json::object();
  int id = 0;
  int extra = 0;
  // GPT-2's byte -> character table.
  for (int b = 0; b < 256; ++b) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
      cp = 256 + extra++;
    }
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    vocab[s] = id++;
  }
  json merges = json::array();
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"t", "h"}, {"th", "e"}, {"o", "x"}, {"a", "a"}, {"aa", "aa"}, {"\xC4\xA0", "t"}}) {
    if (!vocab.contains(a + b)) vocab[a + b] = id++;
    merges.push_back({a, b});
  }
  json pre = json::array();
  if (!pre_tokenizer.is_null()) pre.push_back(pre_tokenizer);
  pre.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  const json doc = {{"version", "1.0"},
                    {"added_tokens", json::array()},
                    {"normalizer", normalizer},
                    {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", pre}}},
                    {"post_processor", nullptr},
                    {"decoder", {{"type", "ByteLevel"}}},
                    {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  return std::make_shared<tokenizer::Tokenizer>(
      tokenizer::Tokenizer::from_json_text(doc.dump(), "complexity.json"));
}

Case tokenizer_case(const std::string& name, const json& normalizer, const json& pre_tokenizer,
                    const std::string& unit = kProse) {
  auto tok = tokenizer_with(normalizer, pre_tokenizer);
  return {"tokenizer " + name, 256 * 1024, [unit](size_t n) { return repeat_to(unit, n); },
          [tok](const std::string& text) { (void)tok->encode(text, false); }, 64};
}

std::string chat_body(size_t bytes) {
  json messages = json::array();
  size_t size = 0;
  for (int i = 0; size < bytes; ++i) {
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", kProse}});
    size += kProse.size() + 40;
  }
  return json{{"messages", messages}, {"max_tokens", 1}}.dump();
}

// A chat request with objects of 1000 keys each (the most-keys case below the cap).
std::string many_keys_body(size_t bytes) {
  std::string body = R"({"messages": [{"role": "user", "content": "hi"}], "metadata_blobs": [)";
  int object = 0;
  while (body.size() < bytes) {
    body += object++ ? ",{" : "{";
    for (int k = 0; k < 1000; ++k) body += (k ? ",\"key" : "\"key") + std::to_string(k) + "\":1";
    body += "}";
  }
  return body + "]}";
}

std::string gguf_bytes(size_t bytes) {
  // n string metadata entries and n one-element f32 tensors.
  const size_t n = bytes / 64 + 1;
  std::string out;
  const auto uint = [&](uint64_t v, int width) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  const auto str = [&](const std::string& s) {
    uint(s.size(), 8);
    out += s;
  };
  out += "GGUF";
  uint(3, 4);
  uint(n, 8);
  uint(n, 8);
  for (size_t i = 0; i < n; ++i) {
    str("meta.key." + std::to_string(i));
    uint(8, 4);  // string
    str("value " + std::to_string(i));
  }
  for (size_t i = 0; i < n; ++i) {
    str("blk." + std::to_string(i) + ".weight");
    uint(1, 4);  // one dimension
    uint(8, 8);  // of 8 elements
    uint(0, 4);  // f32
    uint(i * 32, 8);
  }
  while (out.size() % 32 != 0) out.push_back('\0');
  out.append(n * 32, '\0');
  return out;
}

std::string safetensors_bytes(size_t bytes) {
  const size_t n = bytes / 80 + 1;
  json header = json::object();
  for (size_t i = 0; i < n; ++i) {
    header["model.layers." + std::to_string(i) + ".weight"] = {
        {"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {i * 8, i * 8 + 8}}};
  }
  const std::string text = header.dump();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  out += text;
  out.append(n * 8, '\0');
  return out;
}

std::string config_json(size_t bytes) {
  json config = {{"architectures", {"Qwen2ForCausalLM"}},
                 {"model_type", "qwen2"},
                 {"vocab_size", 1000},
                 {"hidden_size", 64},
                 {"intermediate_size", 128},
                 {"num_hidden_layers", 2},
                 {"num_attention_heads", 4},
                 {"num_key_value_heads", 2},
                 {"max_position_embeddings", 512},
                 {"rms_norm_eps", 1e-6},
                 {"rope_theta", 10000.0}};
  for (size_t i = 0; config.dump().size() < bytes; i += 1000) {
    for (size_t k = i; k < i + 1000; ++k) config["extra_field_" + std::to_string(k)] = k;
  }
  return config.dump();
}

std::string http_chunked_request(size_t bytes) {
  std::string out =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  while (out.size() < bytes) out += "5\r\nabcde\r\n";
  return out + "0\r\n\r\n";
}

const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  cases.push_back({"http request parser (chunked body)", 1 * kMiB, http_chunked_request,
                   [](const std::string& raw) {
                     http::Limits limits;
                     limits.max_body_bytes = 64 * kMiB;
                     http::RequestParser parser(limits);
                     // Fed in 64 KiB reads, as the server does.
                     std::string_view rest = raw;
                     while (!rest.empty() &&
                            parser.status() == http::RequestParser::Status::need_more) {
                       rest.remove_prefix(parser.feed(rest.substr(0, 64 * 1024)));
                     }
                     if (parser.status() != http::RequestParser::Status::complete) std::abort();
                   },
                   8});
  cases.push_back({"json request: chat messages", 1 * kMiB, chat_body,
                   [](const std::string& body) {
                     (void)server::parse_chat_request(server::parse_json_body(body), {});
                   },
                   64});
  cases.push_back({"json request: objects of 1000 keys", 1 * kMiB, many_keys_body,
                   [](const std::string& body) {
                     (void)server::parse_chat_request(server::parse_json_body(body), {});
                   },
                   64});
  auto chatml = std::make_shared<tokenizer::ChatTemplate>(tokenizer::ChatTemplate::parse(kChatMl));
  cases.push_back({"chat template render (ChatML)", 512 * 1024, chat_body,
                   [chatml](const std::string& body) {
                     const auto request = nlohmann::ordered_json::parse(body);
                     (void)chatml->render(request.at("messages"), nlohmann::ordered_json(), true,
                                          "", "");
                   },
                   64});
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", "o"}}}, {"content", "0o"}};
  const std::vector<std::pair<std::string, json>> normalizers = {
      {"NFC", {{"type", "NFC"}}},
      {"NFD", {{"type", "NFD"}}},
      {"NFKC", {{"type", "NFKC"}}},
      {"NFKD", {{"type", "NFKD"}}},
      {"Lowercase", {{"type", "Lowercase"}}},
      {"Replace", replace},
      {"Replace (regex)",
       {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}},
      {"Prepend", {{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}},
      {"Append", {{"type", "Append"}, {"append", "!"}}},
      {"Strip", {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}},
      {"StripAccents", {{"type", "StripAccents"}}},
      {"ByteLevel", {{"type", "ByteLevel"}}},
      {"Sequence", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, replace}}}}};
  for (const auto& [name, spec] : normalizers) {
    cases.push_back(tokenizer_case("normalizer " + name, spec, nullptr));
  }
  const std::vector<std::pair<std::string, json>> pre_tokenizers = {
      {"Split",
       {{"type", "Split"},
        {"pattern", {{"Regex", "\\s+"}}},
        {"behavior", "Isolated"},
        {"invert", false}}},
      {"ByteLevel (regex)",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}},
      {"Digits", {{"type", "Digits"}, {"individual_digits", true}}},
      {"Metaspace",
       {{"type", "Metaspace"},
        {"replacement", "\xE2\x96\x81"},
        {"prepend_scheme", "always"},
        {"split", true}}},
      {"Whitespace", {{"type", "Whitespace"}}},
      {"WhitespaceSplit", {{"type", "WhitespaceSplit"}}},
      {"Punctuation", {{"type", "Punctuation"}, {"behavior", "Isolated"}}},
      {"CharDelimiterSplit", {{"type", "CharDelimiterSplit"}, {"delimiter", " "}}},
      {"Sequence",
       {{"type", "Sequence"},
        {"pretokenizers", {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}}}}}}};
  for (const auto& [name, spec] : pre_tokenizers) {
    cases.push_back(tokenizer_case("pre-tokenizer " + name, nullptr, spec));
  }
  cases.push_back(tokenizer_case("BPE one long word", nullptr, nullptr, "a"));
  cases.push_back({"gguf header", 1 * kMiB, gguf_bytes,
                   [](const std::string& file) {
                     (void)io::parse_gguf_header(
                         {reinterpret_cast<const std::byte*>(file.data()), file.size()}, "bench");
                   },
                   32});
  cases.push_back({"safetensors header", 1 * kMiB, safetensors_bytes,
                   [](const std::string& file) {
                     (void)io::parse_safetensors_header(
                         {reinterpret_cast<const std::byte*>(file.data()), file.size()}, "bench");
                   },
                   32});
  cases.push_back({"config.json", 1 * kMiB, config_json,
                   [](const std::string& text) {
                     (void)io::ModelConfig::parse(json::parse(text), "config.json");
                   },
                   32});
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else {
      std::fprintf(stderr, "usage: complexity_bench [--quick] [--filter SUBSTRING]\n");
      return 2;
    }
  }
  const int repeats = quick ? 3 : 7;
  int failures = 0;
  std::printf("%-44s %10s %10s %10s %7s %10s %10s\n", "case", "n bytes", "t(n) ms", "t(4n) ms",
              "ratio", "rss MiB", "bound MiB");
  for (const Case& c : all_cases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    const size_t n = quick ? c.n : 4 * c.n;
    const std::string small = c.make(n);
    const std::string large = c.make(4 * n);
    c.run(small);  // warm caches and lazy tables
    const double t_small = seconds_of(c, small, repeats);
    reset_peak_rss();
    const long rss_before = status_kib("VmRSS");
    const double t_large = seconds_of(c, large, repeats);
    const double rss = static_cast<double>(status_kib("VmHWM") - rss_before) / 1024.0;
    const double bound =
        (c.rss_per_input_byte * static_cast<double>(large.size()) + 16.0 * kMiB) / kMiB;
    const double ratio = t_large / std::max(t_small, 1e-9);
    const bool ok = ratio <= kMaxRatio && rss <= bound;
    if (!ok) ++failures;
    std::printf("%-44s %10zu %10.2f %10.2f %7.2f %10.1f %10.1f%s\n", c.name.c_str(), small.size(),
                t_small * 1e3, t_large * 1e3, ratio, rss, bound, ok ? "" : "  OVER");
    std::fflush(stdout);
  }
  if (failures > 0) std::printf("%d case(s) over their bound (ratio %.0f)\n", failures, kMaxRatio);
  return failures > 0 ? 1 : 0;
}
