#pragma once
// The start-up check of a distributed run: every rank must run the same deepinfer build on
// the same checkpoint, or the lockstep steps and the expert exchanges would silently mean
// different things on different ranks. Each rank fingerprints what it runs — its build id
// (core/build_id.h), config.json, every safetensors header (tensor names, dtypes, shapes,
// offsets) and the weight files' sizes; not the weights themselves, which would take as long
// as loading — and rank 0 compares every rank's with its own before any weight is read.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "parallel/communicator.h"

namespace deepinfer::config {

struct RankFingerprint {
  uint64_t build = 0;
  uint64_t config = 0;   // config.json's bytes (0 when there is none: a GGUF file)
  uint64_t headers = 0;  // the safetensors headers (a GGUF file: its first MiB)
  uint64_t sizes = 0;    // the weight files' count and sizes
};

// Of this process, for the model at `model_dir` (a directory or a .gguf file).
RankFingerprint fingerprint_of(const std::string& model_dir);

// The first rank whose fingerprint differs from rank 0's (fingerprints[0]), as one line
// naming it and what differs; nullopt when all agree.
std::optional<std::string> first_mismatch(std::span<const RankFingerprint> fingerprints);

// Collective over `world`: gathers every rank's fingerprint. On a mismatch rank 0 throws
// ConfigError with first_mismatch's line (its caller ends the job: every rank exits non-zero)
// and the other ranks wait for that end rather than each printing the line too.
void check_ranks_agree(parallel::Communicator& world, const std::string& model_dir);

}  // namespace deepinfer::config
