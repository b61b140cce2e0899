// Peer harness for tools/make_smollm2_goldens.py: runs llama.cpp (libllama, built by
// tools/setup_llamacpp.sh) greedily and prints the TOKEN IDS it used and produced, which
// llama-completion does not print (it only prints text, and re-tokenizing text is not the same).
// Never part of the project build; the golden script compiles it against the peer's static libs.
//
// It does what llama-completion does for a plain (non-chat) prompt with --temp 0: tokenize with
// add_special=true / parse_special=true (common_tokenize), decode the whole prompt as one batch,
// then one token per decode, each time taking the argmax of the last position's logits. Unlike
// --ignore-eos it does not mask end-of-generation tokens; it reports them (the script rejects a
// prompt whose continuation contains one, so both conventions give the same ids).
//
//   llamacpp_greedy generate MODEL THREADS N_CTX N_PREDICT INPUT [DUMP_DIR]
//     INPUT: one prompt per line, "<dump 0|1> <hex of the UTF-8 prompt>".
//     prints first:        "eog <n> <ids...>": the vocabulary's end-of-generation tokens
//     then per prompt:     "prompt <i> <n> <ids...>"
//     then per step k:     "step <i> <k> <top1 id> <top1 logit> <top2 id> <top2 logit> <is_eog>"
//     and at the end:      "text <i> <hex>": the continuation as llama-completion prints it
//                          (token pieces without special tokens), to check against that tool.
//     with dump=1 also writes DUMP_DIR/<i>.f32: N_PREDICT x n_vocab float32 logits, step-major.
//   llamacpp_greedy tokenize MODEL INPUT
//     INPUT: one hex string per line; prints "tok <i> <n> <ids...>" (same tokenize flags).
// Both modes first print "system <llama_print_system_info()>" (the CPU features the kernels use).
// Logits are printed with %.9g (round-trips a float32).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "llamacpp_greedy: %s\n", message.c_str());
  std::exit(1);
}

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) die("odd-length hex line");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text) {
  std::vector<llama_token> ids(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                         static_cast<int32_t>(ids.size()), /*add_special=*/true,
                         /*parse_special=*/true);
  if (n < 0) {
    ids.resize(-n);
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                       static_cast<int32_t>(ids.size()), true, true);
  }
  if (n < 0) die("llama_tokenize failed");
  ids.resize(n);
  return ids;
}

void print_ids(const char* tag, size_t index, const std::vector<llama_token>& ids) {
  std::printf("%s %zu %zu", tag, index, ids.size());
  for (llama_token id : ids) std::printf(" %d", id);
  std::printf("\n");
}

llama_model* load_model(const std::string& path) {
  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(path.c_str(), params);
  if (model == nullptr) die("cannot load " + path);
  return model;
}

// The context llama-completion makes with its defaults (common_params) and -c N_CTX:
// n_batch 2048, n_ubatch 512, flash attention auto, f16 KV cache.
llama_context* make_context(llama_model* model, int threads, int n_ctx) {
  llama_context_params params = llama_context_default_params();
  params.n_ctx = static_cast<uint32_t>(n_ctx);
  params.n_batch = 2048;
  params.n_ubatch = 512;
  params.n_threads = threads;
  params.n_threads_batch = threads;
  params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  params.type_k = GGML_TYPE_F16;
  params.type_v = GGML_TYPE_F16;
  llama_context* ctx = llama_init_from_model(model, params);
  if (ctx == nullptr) die("cannot create a context");
  return ctx;
}

std::string piece(const llama_vocab* vocab, llama_token id) {
  std::vector<char> buf(64);
  int n = llama_token_to_piece(vocab, id, buf.data(), static_cast<int32_t>(buf.size()), 0, false);
  if (n < 0) {
    buf.resize(-n);
    n = llama_token_to_piece(vocab, id, buf.data(), static_cast<int32_t>(buf.size()), 0, false);
  }
  if (n < 0) die("llama_token_to_piece failed for " + std::to_string(id));
  return std::string(buf.data(), n);
}

int generate(const std::string& model_path, int threads, int n_ctx, int n_predict,
             const std::string& input, const std::string& dump_dir) {
  llama_model* model = load_model(model_path);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::vector<llama_token> eog;
  for (llama_token id = 0; id < n_vocab; ++id) {
    if (llama_vocab_is_eog(vocab, id)) eog.push_back(id);
  }
  std::printf("eog %zu", eog.size());
  for (llama_token id : eog) std::printf(" %d", id);
  std::printf("\n");
  std::ifstream in(input);
  if (!in) die("cannot read " + input);
  std::string line;
  for (size_t index = 0; std::getline(in, line); ++index) {
    const bool dump = line.rfind("1 ", 0) == 0;
    if (line.size() < 2 || (line[0] != '0' && line[0] != '1') || line[1] != ' ') {
      die("bad input line " + std::to_string(index));
    }
    std::vector<llama_token> prompt = tokenize(vocab, from_hex(line.substr(2)));
    if (prompt.empty()) die("empty prompt " + std::to_string(index));
    print_ids("prompt", index, prompt);

    // A fresh context per prompt, as a fresh llama-completion run would have.
    llama_context* ctx = make_context(model, threads, n_ctx);
    std::vector<float> dumped;
    std::string text;
    std::vector<llama_token> pending = prompt;
    for (int step = 0; step < n_predict; ++step) {
      if (llama_decode(ctx, llama_batch_get_one(pending.data(),
                                                static_cast<int32_t>(pending.size()))) != 0) {
        die("llama_decode failed at step " + std::to_string(step));
      }
      const float* logits = llama_get_logits_ith(ctx, -1);
      int best = 0, second = -1;
      for (int v = 1; v < n_vocab; ++v) {  // strict '>' keeps the lowest id on ties, as greedy
        if (logits[v] > logits[best]) {
          second = best;
          best = v;
        } else if (second < 0 || logits[v] > logits[second]) {
          second = v;
        }
      }
      std::printf("step %zu %d %d %.9g %d %.9g %d\n", index, step, best, logits[best], second,
                  logits[second], llama_vocab_is_eog(vocab, best) ? 1 : 0);
      if (dump) dumped.insert(dumped.end(), logits, logits + n_vocab);
      text += piece(vocab, best);
      pending.assign(1, best);
    }
    llama_free(ctx);
    std::printf("text %zu ", index);
    for (unsigned char c : text) std::printf("%02x", c);
    std::printf("\n");
    if (dump) {
      const std::string path = dump_dir + "/" + std::to_string(index) + ".f32";
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(dumped.data()),
                static_cast<std::streamsize>(dumped.size() * sizeof(float)));
      if (!out) die("cannot write " + path);
    }
    std::fflush(stdout);
  }
  llama_model_free(model);
  return 0;
}

int tokenize_lines(const std::string& model_path, const std::string& input) {
  llama_model* model = load_model(model_path);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ifstream in(input);
  if (!in) die("cannot read " + input);
  std::string line;
  for (size_t index = 0; std::getline(in, line); ++index) {
    print_ids("tok", index, tokenize(vocab, from_hex(line)));
  }
  llama_model_free(model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  llama_backend_init();
  std::printf("system %s\n", llama_print_system_info());
  int rc = 2;
  if (args.size() >= 6 && args[0] == "generate") {
    rc = generate(args[1], std::atoi(args[2].c_str()), std::atoi(args[3].c_str()),
                  std::atoi(args[4].c_str()), args[5], args.size() > 6 ? args[6] : ".");
  } else if (args.size() == 3 && args[0] == "tokenize") {
    rc = tokenize_lines(args[1], args[2]);
  } else {
    std::fprintf(stderr,
                 "usage: llamacpp_greedy generate MODEL THREADS N_CTX N_PREDICT INPUT [DUMP_DIR]\n"
                 "       llamacpp_greedy tokenize MODEL INPUT\n");
  }
  llama_backend_free();
  return rc;
}
