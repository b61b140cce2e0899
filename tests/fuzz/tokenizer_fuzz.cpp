// Fuzzes the tokenizer. The first byte picks what the rest of the input is:
//   0-3  text for encode() with one of the test tokenizers (tiny Qwen-style byte-level BPE,
//        and the synthetic SentencePiece-, Metaspace- and ByteLevel-style ones). For the
//        tiny tokenizer decode(encode(x)) must give back NFC(lossy(x)) exactly.
//   4-7  little-endian 16-bit token ids for decode() and the streaming detokenizer, whose
//        pieces must be valid UTF-8 and add up to the full decode.
//   8    a tokenizer.json document: loading it must succeed or throw deepinfer::Error.
// A crash, a hang, a sanitizer report, another exception or a broken invariant is a bug.
// Tokenizers come from tests/data (next to this file) or $DEEPINFER_TEST_DATA_DIR.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using deepinfer::tokenizer::StreamingDetokenizer;
using deepinfer::tokenizer::Tokenizer;

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("DEEPINFER_TEST_DATA_DIR")) return env;
  // Not __FILE__: ccache's base dir makes it relative to the build directory.
  return DEEPINFER_TEST_DATA_DIR;
}

const std::vector<std::unique_ptr<Tokenizer>>& tokenizers() {
  static const auto all = [] {
    std::vector<std::unique_ptr<Tokenizer>> out;
    const auto dir = data_dir();
    out.push_back(std::make_unique<Tokenizer>(Tokenizer::load_dir((dir / "tiny-qwen3").string())));
    for (const char* name : {"spm_bpe", "metaspace", "bytelevel"}) {
      out.push_back(std::make_unique<Tokenizer>(
          Tokenizer::load((dir / "tokenizer/synthetic" / name / "tokenizer.json").string())));
    }
    return out;
  }();
  return all;
}

void check(bool ok) {
  if (!ok) std::abort();
}

void fuzz_encode(const Tokenizer& tok, bool exact_round_trip, std::string_view text,
                 bool trusted = true) {
  for (const bool special : {false, true}) {
    const auto ids = tok.encode(text, special);
    // A fuzzed tokenizer.json may name any id in its post-processor; ours may not.
    for (const int32_t id : ids) check(!trusted || (id >= 0 && id < tok.vocab_size()));
    const std::string back = tok.decode(ids, false);
    check(deepinfer::tokenizer::unicode::is_valid_utf8(back));
    if (exact_round_trip && !special) {
      const std::string repaired = deepinfer::tokenizer::unicode::to_valid_utf8(text);
      check(back == deepinfer::tokenizer::unicode::normalize(
                        repaired, deepinfer::tokenizer::unicode::NormalForm::kNFC));
    }
  }
}

void fuzz_decode(const Tokenizer& tok, const uint8_t* data, size_t size) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < size; i += 2) {
    // Mostly valid ids, some unknown ones (past the vocabulary) too.
    ids.push_back(static_cast<int32_t>((data[i] | (data[i + 1] << 8)) % (tok.vocab_size() + 16)));
  }
  for (const bool skip : {false, true}) {
    const std::string full = tok.decode(ids, skip);
    check(deepinfer::tokenizer::unicode::is_valid_utf8(full));
    StreamingDetokenizer stream(tok, skip);
    std::string all;
    for (const int32_t id : ids) {
      const std::string piece = stream.push(id);
      check(deepinfer::tokenizer::unicode::is_valid_utf8(piece));
      all += piece;
    }
    all += stream.flush();
    check(all == full);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& toks = tokenizers();
  const uint8_t mode = data[0] % 9;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode < 4) {
    fuzz_encode(*toks[mode], mode == 0, rest);
  } else if (mode < 8) {
    fuzz_decode(*toks[mode - 4], data + 1, size - 1);
  } else {
    try {
      const auto tok = Tokenizer::from_json_text(std::string(rest), "<fuzz input>");
      fuzz_encode(tok, false, "Hello, world! \xE4\xBD\xA0 123 \xFF", false);
    } catch (const deepinfer::Error&) {
    }
  }
  return 0;
}
