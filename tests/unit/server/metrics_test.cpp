#include "server/metrics.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace deepinfer::server {
namespace {

// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

TEST(ServerMetrics, ValueFormatting) {
  EXPECT_EQ(format_metric_value(0), "0");
  EXPECT_EQ(format_metric_value(5), "5");
  EXPECT_EQ(format_metric_value(0.1), "0.1");
  EXPECT_EQ(format_metric_value(0.0025), "0.0025");
  EXPECT_EQ(format_metric_value(1234567), "1234567");
  EXPECT_EQ(format_metric_value(1.0 / 0.0), "+Inf");
  EXPECT_EQ(format_metric_value(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
  // Shortest round trip: the parsed text is the same double.
  const double third = 1.0 / 3.0;
  EXPECT_EQ(std::stod(format_metric_value(third)), third);
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(ServerMetrics, HistogramBucketsAreCumulativeAndInclusive) {
  Histogram h({0.1, 1.0, 10.0});
  for (double v : {0.05, 0.1, 0.5, 1.0, 3.0, 20.0, 100.0}) h.observe(v);
  const auto s = h.snapshot();
  // le=0.1: 0.05, 0.1; le=1: + 0.5, 1.0; le=10: + 3; +Inf: all 7.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 5, 7}));
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.sum, 0.05 + 0.1 + 0.5 + 1.0 + 3.0 + 20.0 + 100.0);
}

TEST(ServerMetrics, ExpositionText) {
  Metrics m("tiny \"q\"");
  m.add_prompt_tokens(12);
  m.add_prompt_tokens(3);
  m.add_generation_tokens(40);
  m.count_finished(engine::FinishReason::stop);
  m.count_finished(engine::FinishReason::length);
  m.count_finished(engine::FinishReason::length);
  m.count_http_response("/v1/completions", 200);
  m.count_http_response("/v1/completions", 400);
  m.count_http_response("/v1/completions", 200);
  m.observe_time_to_first_token(0.003);
  m.observe_time_to_first_token(30.0);
  engine::EngineStats stats;
  stats.running = 3;
  stats.waiting = 2;
  stats.num_preemptions = 4;
  stats.blocks.num_blocks = 8;
  stats.blocks.free_blocks = 6;
  stats.blocks.prefix_query_tokens = 40;
  stats.blocks.prefix_hit_tokens = 10;
  const std::string text = m.render(stats);
  const std::string label = "{model_name=\"tiny \\\"q\\\"\"";

  EXPECT_EQ(lines_with(text, "deepinfer:num_requests_running"),
            std::vector<std::string>{"deepinfer:num_requests_running" + label + "} 3"});
  EXPECT_EQ(lines_with(text, "deepinfer:num_requests_waiting"),
            std::vector<std::string>{"deepinfer:num_requests_waiting" + label + "} 2"});
  EXPECT_EQ(lines_with(text, "deepinfer:kv_cache_usage_perc"),
            std::vector<std::string>{"deepinfer:kv_cache_usage_perc" + label + "} 0.25"});
  EXPECT_EQ(lines_with(text, "deepinfer:kv_cache_total_blocks"),
            std::vector<std::string>{"deepinfer:kv_cache_total_blocks" + label + "} 8"});
  EXPECT_EQ(lines_with(text, "deepinfer:prefix_cache_hit_rate"),
            std::vector<std::string>{"deepinfer:prefix_cache_hit_rate" + label + "} 0.25"});
  EXPECT_EQ(lines_with(text, "deepinfer:num_preemptions_total"),
            std::vector<std::string>{"deepinfer:num_preemptions_total" + label + "} 4"});
  EXPECT_EQ(lines_with(text, "deepinfer:prompt_tokens_total"),
            std::vector<std::string>{"deepinfer:prompt_tokens_total" + label + "} 15"});
  EXPECT_EQ(lines_with(text, "deepinfer:generation_tokens_total"),
            std::vector<std::string>{"deepinfer:generation_tokens_total" + label + "} 40"});
  EXPECT_EQ(lines_with(text, "deepinfer:request_success_total"),
            (std::vector<std::string>{
                "deepinfer:request_success_total" + label + ",finished_reason=\"stop\"} 1",
                "deepinfer:request_success_total" + label + ",finished_reason=\"length\"} 2",
                "deepinfer:request_success_total" + label + ",finished_reason=\"abort\"} 0"}));
  EXPECT_EQ(lines_with(text, "deepinfer:http_requests_total"),
            (std::vector<std::string>{"deepinfer:http_requests_total" + label +
                                          ",endpoint=\"/v1/completions\",status=\"200\"} 2",
                                      "deepinfer:http_requests_total" + label +
                                          ",endpoint=\"/v1/completions\",status=\"400\"} 1"}));
  EXPECT_EQ(lines_with(text, "# TYPE deepinfer:time_to_first_token_seconds"),
            std::vector<std::string>{"# TYPE deepinfer:time_to_first_token_seconds histogram"});
  const auto ttft = lines_with(text, "deepinfer:time_to_first_token_seconds");
  ASSERT_GE(ttft.size(), 5u);
  EXPECT_EQ(ttft[0], "deepinfer:time_to_first_token_seconds_bucket" + label + ",le=\"0.001\"} 0");
  EXPECT_EQ(ttft[1], "deepinfer:time_to_first_token_seconds_bucket" + label + ",le=\"0.005\"} 1");
  EXPECT_EQ(ttft[ttft.size() - 3],
            "deepinfer:time_to_first_token_seconds_bucket" + label + ",le=\"+Inf\"} 2");
  EXPECT_EQ(ttft[ttft.size() - 2],
            "deepinfer:time_to_first_token_seconds_sum" + label + "} 30.003");
  EXPECT_EQ(ttft.back(), "deepinfer:time_to_first_token_seconds_count" + label + "} 2");
  // Every family has HELP and TYPE, and every sample line belongs to a declared family.
  for (const char* family :
       {"deepinfer:inter_token_latency_seconds", "deepinfer:e2e_request_latency_seconds",
        "deepinfer:request_queue_time_seconds", "deepinfer:request_prompt_tokens",
        "deepinfer:request_generation_tokens"}) {
    EXPECT_EQ(lines_with(text, std::string("# TYPE ") + family + " ").size(), 1u) << family;
    EXPECT_EQ(lines_with(text, std::string("# HELP ") + family + " ").size(), 1u) << family;
  }
  EXPECT_EQ(text.back(), '\n');
}

// MoE models: capacity drops always, balancedness and re-balances once EPLB layers reported.
TEST(ServerMetrics, MoeDropsAndBalancedness) {
  Metrics m("m");
  engine::EngineStats stats;
  const std::string dense = m.render(stats);
  EXPECT_EQ(
      lines_with(dense, "deepinfer:moe_dropped_assignments_total"),
      std::vector<std::string>{"deepinfer:moe_dropped_assignments_total{model_name=\"m\"} 0"});
  EXPECT_TRUE(lines_with(dense, "deepinfer:moe_balancedness").empty());
  stats.moe.layers = 2;
  stats.moe.dropped = 7;
  stats.moe.balancedness_default = 0.5;
  stats.moe.balancedness = 0.875;
  stats.moe.rebalances = 3;
  const std::string text = m.render(stats);
  EXPECT_EQ(
      lines_with(text, "deepinfer:moe_dropped_assignments_total"),
      std::vector<std::string>{"deepinfer:moe_dropped_assignments_total{model_name=\"m\"} 7"});
  EXPECT_EQ(lines_with(text, "deepinfer:moe_balancedness"),
            (std::vector<std::string>{
                "deepinfer:moe_balancedness{model_name=\"m\",placement=\"default\"} 0.5",
                "deepinfer:moe_balancedness{model_name=\"m\",placement=\"current\"} 0.875"}));
  EXPECT_EQ(lines_with(text, "deepinfer:eplb_rebalances_total"),
            std::vector<std::string>{"deepinfer:eplb_rebalances_total{model_name=\"m\"} 3"});
}

}  // namespace
}  // namespace deepinfer::server
