#pragma once
// What chapter 06's tests share: worlds to run a layer on (threads, or
// processes under the MPI twin), a small GPT every t in {1, 2, 3, 4}
// divides, weights cut the way a shard holds them, comparisons in double,
// and the traffic a rank sent between two points.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "dtw/model/shard.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "dtw_expect_error.h"
#include "dtw_train_test.h"
#include "tensor_parallel.h"

namespace dtw::ch06::testing {

inline constexpr double kTol = 1e-12;

/// Harness options: `ranks` ranks, blocked calls give up after 20 s.
inline train::HarnessOptions on(int ranks, bool compare = true) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(20);
  o.compare = compare;
  return o;
}

/// gpt-tiny made small: `steps` steps of `batch` sequences in double, one
/// warm-up step, a clip of 0.05 that binds (a wrong norm shows).
inline train::RunSpec tiny(std::int64_t steps = 3, std::int64_t batch = 4) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = steps;
  spec.batch = batch;
  spec.warmup_steps = 1;
  spec.clip_norm = 0.05;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

/// gpt-tiny with a vocabulary of 99, which 4 ranks cut unevenly (25, 25,
/// 25, 24 rows), over `steps` steps.
inline train::RunSpec tiny_vocab99(std::int64_t steps = 2) {
  train::RunSpec spec = tiny(steps);
  model::ModelConfig c = spec.config();
  c.vocab = 99;
  c.name = "gpt-tiny-vocab99";
  spec.model = c.name;
  spec.custom_config = c;
  return spec;
}

/// A GPT every t in {1, 2, 3, 4} divides: 12 heads of 2, 24 hidden units,
/// a vocabulary of `vocab`, sequences of up to 16 tokens, one block.
inline model::ModelConfig divisible_gpt(std::int64_t vocab = 12) {
  model::ModelConfig c = train::standard_run("gpt-tiny").config();
  c.name = "gpt-divisible";
  c.vocab = vocab;
  c.context = 16;
  c.dim = 24;
  c.heads = 12;
  c.mlp_hidden = 24;
  c.layers = 1;
  return c;
}

/// Rank r of t's heads, hidden units and vocabulary rows, computed here
/// (not by the lab's megatron_shard, so a layer test runs only its layer's
/// step): equal parts; t must divide all three.
inline model::ModelShard test_shard(const model::ModelConfig& c, int r, int t) {
  model::ModelShard s;
  s.heads = {r * c.heads / t, (r + 1) * c.heads / t};
  s.hidden = {r * c.mlp_hidden / t, (r + 1) * c.mlp_hidden / t};
  s.vocab = {r * c.vocab / t, (r + 1) * c.vocab / t};
  return s;
}

/// Runs fn(comm) on `t` ranks (threads, or the twin's processes) and fails
/// the test with any rank's error.
inline void on_ranks(int t, const std::function<void(Comm&)>& fn) {
  train::RunSpec spec = tiny(1, 4);
  train::run_ranks<double>(spec, on(t, false), [&](train::RankRun<double>& run) { fn(run.comm()); });
}

/// Deterministic values in [−1, 1).
inline std::vector<double> random_values(std::int64_t n, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (double& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<double>(s >> 11) / 9007199254740992.0 * 2 - 1;
  }
  return v;
}

/// The local tensors of `local`, cut from `whole_values` laid out as `whole`.
inline std::vector<double> cut(const model::ParamLayout& whole, const model::ParamLayout& local,
                               const std::vector<double>& whole_values) {
  std::vector<double> out(static_cast<std::size_t>(local.size()));
  for (const model::ParamView& v : local.views()) {
    const model::ParamView& w = whole.find(v.name);
    for (std::int64_t i = 0; i < v.size; ++i)
      out[static_cast<std::size_t>(v.offset + i)] =
          whole_values[static_cast<std::size_t>(w.offset + v.slice.whole_index(i))];
  }
  return out;
}

/// Expects every element of `got` within kTol·max(1, |want|) of `want`.
inline void expect_near(int rank, const std::vector<double>& want, const std::vector<double>& got,
                        const std::string& what) {
  const std::string m = dtw::testing::compare<double>(rank, want, got, kTol);
  if (!m.empty()) ADD_FAILURE() << what << ": " << m;
}

/// What this rank sent: bytes and messages, from its traffic counters.
struct Sent {
  std::int64_t bytes = 0, messages = 0;
  static Sent now(const Comm& comm) {
    Sent s;
    for (const PeerTraffic& p : comm.traffic().peers()) {
      s.bytes += p.bytes_sent;
      s.messages += p.messages_sent;
    }
    return s;
  }
  Sent operator-(const Sent& o) const { return {bytes - o.bytes, messages - o.messages}; }
};

/// Expects `sent` to be `allreduces` ring allreduces of n values each (2(t−1)
/// messages and ring_allreduce_values bytes each) and nothing else.
inline void expect_allreduces(const Comm& comm, const Sent& sent, std::int64_t allreduces,
                              std::int64_t n, const std::string& what) {
  const int t = comm.size(), r = comm.rank();
  EXPECT_EQ(sent.messages, allreduces * 2 * (t - 1))
      << what << ", rank " << r << " of " << t << ": messages sent (" << allreduces
      << " ring allreduces of 2(t-1) messages expected)";
  EXPECT_EQ(sent.bytes, allreduces * ring_allreduce_values(n, r, t) * 8)
      << what << ", rank " << r << " of " << t << ": bytes sent";
}

// The bad-input check shared by the training chapters (tests/support).
using dtw::testing::expect_error;

}  // namespace dtw::ch06::testing
