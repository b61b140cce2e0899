#include "parallel/eplb_state.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/text_file.h"
#include "parallel/eplb.h"

namespace deepinfer::parallel {

constexpr const char* kFormat = "deepinfer-eplb-load-v1";

EplbState::EplbState(EplbOptions options, int num_ranks, bool record_writer)
    : options_(std::move(options)), num_ranks_(num_ranks), record_writer_(record_writer) {
  if (options_.load_file.empty()) return;
  const std::string& path = options_.load_file;
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not a JSON expert load file (", e.what(), ")");
  }
  DI_CHECK(json.is_object() && json.value("format", "") == kFormat, path,
           ": not an expert load file (\"format\": \"", kFormat,
           "\" expected; written by --eplb-record)");
  DI_CHECK(json.contains("layers") && json["layers"].is_array(), path, ": no \"layers\" array");
  for (const auto& layer : json["layers"]) {
    DI_CHECK(layer.is_object() && layer.contains("name") && layer["name"].is_string() &&
                 layer.contains("load") && layer["load"].is_array(),
             path, ": each layer needs a \"name\" and a \"load\" array");
    std::vector<double> load;
    for (const auto& v : layer["load"]) {
      DI_CHECK(v.is_number() && v.get<double>() >= 0, path, ": layer ",
               layer["name"].get<std::string>(), ": loads must be non-negative numbers");
      load.push_back(v.get<double>());
    }
    recorded_.emplace_back(layer["name"].get<std::string>(), std::move(load));
  }
}

EplbState::~EplbState() {
  if (!record_writer_ || !options_.active()) return;
  try {
    const EplbSummary s = summary();
    if (s.layers == 0) return;
    char text[160];
    std::snprintf(text, sizeof(text),
                  "EPLB: balancedness over the last window of %d MoE layers: %.3f with the "
                  "default placement, %.3f measured; %lld re-balances",
                  static_cast<int>(s.layers), s.balancedness_default, s.balancedness,
                  static_cast<long long>(s.rebalances));
    log::info(text);
  } catch (...) {
    // Logging at shutdown must not throw.
  }
}

std::optional<std::vector<double>> EplbState::recorded_load(const std::string& layer) const {
  for (const auto& [name, load] : recorded_) {
    if (name == layer) return load;
  }
  return std::nullopt;
}

int EplbState::register_layer(const std::string& name) {
  std::lock_guard lock(mutex_);
  LayerBalance balance;
  balance.name = name;
  layers_.push_back(std::move(balance));
  default_rank_loads_.emplace_back();
  rank_loads_.emplace_back();
  return static_cast<int>(layers_.size()) - 1;
}

void EplbState::report(int layer, LayerBalance balance) {
  std::lock_guard lock(mutex_);
  DI_CHECK(layer >= 0 && layer < static_cast<int>(layers_.size()), "EPLB: unknown layer ", layer);
  layers_[static_cast<size_t>(layer)] = std::move(balance);
  if (record_writer_ && !options_.record_file.empty() &&
      layer == static_cast<int>(layers_.size()) - 1) {
    write_record();
  }
}

void EplbState::set_rank_loads(int layer, std::vector<double> default_loads,
                               std::vector<double> loads) {
  std::lock_guard lock(mutex_);
  default_rank_loads_.at(static_cast<size_t>(layer)) = std::move(default_loads);
  rank_loads_.at(static_cast<size_t>(layer)) = std::move(loads);
}

void EplbState::add_dropped(uint64_t assignments) {
  std::lock_guard lock(mutex_);
  dropped_ += assignments;
}

std::vector<LayerBalance> EplbState::layers() const {
  std::lock_guard lock(mutex_);
  return layers_;
}

EplbSummary EplbState::summary() const {
  std::lock_guard lock(mutex_);
  EplbSummary s;
  s.dropped = dropped_;
  std::vector<double> before(static_cast<size_t>(num_ranks_), 0.0), after = before;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l].forward_calls == 0) continue;
    ++s.layers;
    s.rebalances += layers_[l].rebalances;
    for (size_t r = 0; r < before.size() && r < rank_loads_[l].size(); ++r) {
      before[r] += default_rank_loads_[l][r];
      after[r] += rank_loads_[l][r];
    }
  }
  s.balancedness_default = balancedness(before);
  s.balancedness = balancedness(after);
  return s;
}

void EplbState::write_record() const {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerBalance& l : layers_) {
    layers.push_back({{"name", l.name},
                      {"forward_calls", l.forward_calls},
                      {"load", l.load},
                      {"placement", l.placement},
                      {"balancedness_default", l.balancedness_default},
                      {"balancedness", l.balancedness},
                      {"rebalances", l.rebalances},
                      {"dropped_assignments", l.dropped}});
  }
  const nlohmann::json json = {{"format", kFormat},
                               {"window", options_.window},
                               {"num_ranks", num_ranks_},
                               {"layers", layers}};
  // Written whole to a neighbour, then renamed: a reader never sees half a file.
  const std::string& path = options_.record_file;
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    DI_CHECK(out.good(), path, ": cannot write the expert load record");
    out << json.dump() << "\n";
    DI_CHECK(out.good(), path, ": writing the expert load record failed");
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  DI_CHECK(!error, path, ": cannot write the expert load record (", error.message(), ")");
}

}  // namespace deepinfer::parallel
