// dtw_bench_kernels (`dtw bench kernels`): the model substrate's speed, each
// figure next to a peer measured in the same run:
//   1. matmul against the BLAS called directly (target: within 10% at 512³);
//   2. attention forward/backward, plain and blockwise, as GFLOP/s;
//   3. a training step of a model (default gpt-small): time per layer type,
//      tokens/s, and the step against its GEMM floor — every matmul of the
//      step timed on its own and summed (target: step ≤ 1.5× that floor, i.e.
//      the work between the matmuls is not the bottleneck).
// With --device cuda it reports the CUDA kernels instead (kernels_report_cuda.cpp).
#include <cblas.h>
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <map>
#include <tuple>
#include <vector>

#include "bench_main.h"
#include "cli_values.h"
#include "dtw/errors.h"
#include "exit_codes.h"
#include "kernels_report_cuda.h"
#include "dtw/kernels/attention.h"
#include "dtw/kernels/matmul.h"
#include "dtw/model/config.h"
#include "dtw/model/profile.h"
#include "dtw/model/trainer.h"
#include "dtw/train/run_spec.h"
#include "dtw/world_fit.h"

namespace {

using dtw::kernels::Trans;
using Clock = std::chrono::steady_clock;

// Median seconds of `fn` over `repeats` timed runs after one warm-up run.
double median_seconds(int repeats, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::ranges::sort(t);
  return t[t.size() / 2];
}

std::vector<float> filled(std::int64_t n, float value) {
  return std::vector<float>(static_cast<std::size_t>(n), value);
}

// 1. matmul through dtw against cblas_sgemm on the same operands.
void matmul_section(std::int64_t n, int repeats) {
  // blas_name() also sets the BLAS to one thread, as dtw's first matmul would;
  // without it the peer below would run multi-threaded and win unfairly.
  const std::string blas = dtw::kernels::blas_name();
  auto a = filled(n * n, 0.5f), b = filled(n * n, 0.25f), c = filled(n * n, 0.f);
  const double flops = 2.0 * static_cast<double>(n * n * n);
  const int ni = static_cast<int>(n);
  const double peer = median_seconds(repeats, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.f, a.data(), ni, b.data(),
                ni, 0.f, c.data(), ni);
  });
  const double ours = median_seconds(repeats, [&] {
    dtw::kernels::matmul(Trans::kNo, Trans::kNo, n, n, n, 1.f, a.data(), b.data(), 0.f, c.data());
  });
  fmt::print("== matmul {0}x{0}x{0} float, one thread ({1}) ==\n", n, blas);
  fmt::print("  {:<28} {:>10.1f} GFLOP/s  {:>9.3f} ms\n", "cblas_sgemm (peer)", flops / peer / 1e9, peer * 1e3);
  fmt::print("  {:<28} {:>10.1f} GFLOP/s  {:>9.3f} ms\n", "dtw::kernels::matmul", flops / ours / 1e9, ours * 1e3);
  fmt::print("  dtw / BLAS throughput: {:.3f}  (target >= 0.90)\n\n", peer / ours);
}

// 2. attention at a GPT-like shape.
void attention_section(int repeats) {
  dtw::kernels::AttentionShape s{.batch = 8, .heads = 8, .q_len = 128, .kv_len = 128, .head_dim = 32};
  const std::int64_t qn = s.batch * s.heads * s.q_len * s.head_dim;
  const std::int64_t rows = s.batch * s.heads * s.q_len;
  auto q = filled(qn, 0.01f), k = filled(qn, 0.02f), v = filled(qn, 0.03f), out = filled(qn, 0);
  auto dout = filled(qn, 0.001f), dq = filled(qn, 0), dk = filled(qn, 0), dv = filled(qn, 0);
  auto probs = filled(rows * s.kv_len, 0), lse = filled(rows, 0);
  // Useful FLOPs of causal attention: q kᵀ and p v each 2·T·T·d per head,
  // halved by the mask; the backward does twice the forward's products.
  const double fwd_flops = 2.0 * 2.0 * static_cast<double>(s.batch * s.heads * s.q_len * s.kv_len * s.head_dim) / 2;
  const double plain_f = median_seconds(repeats, [&] {
    dtw::kernels::attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), s);
  });
  const double plain_b = median_seconds(repeats, [&] {
    dtw::kernels::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), probs.data(),
                                     q.data(), k.data(), v.data(), s);
  });
  const double block_f = median_seconds(repeats, [&] {
    dtw::kernels::attention_blockwise_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, 32);
  });
  const double block_b = median_seconds(repeats, [&] {
    dtw::kernels::attention_blockwise_backward(dq.data(), dk.data(), dv.data(), dout.data(),
                                               out.data(), lse.data(), q.data(), k.data(),
                                               v.data(), s, 32);
  });
  fmt::print("== causal attention, batch {} heads {} T {} head_dim {}, float ==\n", s.batch,
             s.heads, s.q_len, s.head_dim);
  auto row = [&](const char* name, double sec, double flops) {
    fmt::print("  {:<28} {:>9.3f} ms  {:>7.1f} GFLOP/s (useful)\n", name, sec * 1e3, flops / sec / 1e9);
  };
  row("plain forward", plain_f, fwd_flops);
  row("plain backward", plain_b, 2 * fwd_flops);
  row("blockwise (32) forward", block_f, fwd_flops);
  row("blockwise (32) backward", block_b, 2 * fwd_flops);
  fmt::print("\n");
}

// The matmuls of one GPT training step (forward and backward), as
// (m, n, k, trans_a, trans_b) -> how many times. Derived from the shapes of
// the layers: y = x Wᵀ (forward), dx = dy W, dW += dyᵀ x (backward).
using Gemm = std::tuple<std::int64_t, std::int64_t, std::int64_t, Trans, Trans>;
std::map<Gemm, std::int64_t> gpt_step_gemms(const dtw::model::ModelConfig& c, std::int64_t batch,
                                            std::int64_t t) {
  std::map<Gemm, std::int64_t> g;
  const std::int64_t n = batch * t, d = c.dim, hd = c.dim / c.heads;
  auto linear = [&](std::int64_t in, std::int64_t out, std::int64_t times) {
    g[{n, out, in, Trans::kNo, Trans::kYes}] += times;  // y = x Wᵀ
    g[{n, in, out, Trans::kNo, Trans::kNo}] += times;   // dx = dy W
    g[{out, in, n, Trans::kYes, Trans::kNo}] += times;  // dW += dyᵀ x
  };
  linear(d, 3 * d, c.layers);
  linear(d, d, c.layers);
  linear(d, c.mlp_hidden, c.layers);
  linear(c.mlp_hidden, d, c.layers);
  linear(d, c.vocab, 1);  // the head
  const std::int64_t heads = batch * c.heads * c.layers;
  g[{t, t, hd, Trans::kNo, Trans::kYes}] += 2 * heads;  // scores q kᵀ; dP = dO vᵀ
  g[{t, hd, t, Trans::kNo, Trans::kNo}] += 2 * heads;   // out = P v; dq = dS k
  g[{t, hd, t, Trans::kYes, Trans::kNo}] += 2 * heads;  // dv = Pᵀ dO; dk = dSᵀ q
  return g;
}

void step_section(const std::string& name, std::int64_t batch, int steps) {
  const dtw::model::ModelConfig config = dtw::model::model_config(name);
  const std::int64_t t = config.context;
  // GEMM floor: each distinct product timed alone, times how often the step does it.
  double floor = 0, gemm_flops = 0;
  for (const auto& [gemm, times] : gpt_step_gemms(config, batch, t)) {
    const auto [m, n, k, ta, tb] = gemm;
    auto a = filled(m * k, 0.01f), b = filled(k * n, 0.02f), c = filled(m * n, 0);
    const double sec = median_seconds(5, [&] {
      dtw::kernels::matmul(ta, tb, m, n, k, 1.f, a.data(), b.data(), 0.f, c.data());
    });
    floor += sec * static_cast<double>(times);
    gemm_flops += 2.0 * static_cast<double>(m * n * k * times);
  }
  dtw::model::LayerTimes times;
  // The standard run (dtw::train::standard_run) at this batch.
  dtw::train::RunSpec spec = dtw::train::standard_run(name);
  spec.batch = batch;
  dtw::model::TrainOptions options = spec.options();
  options.times = &times;
  std::vector<double> step_seconds;
  options.on_step = [&](const dtw::model::StepInfo& s) { step_seconds.push_back(s.seconds); };
  const auto result = dtw::model::train_reference<float>(config, steps + 1, options);
  step_seconds.erase(step_seconds.begin());  // the first step warms caches and allocators
  std::ranges::sort(step_seconds);
  const double step = step_seconds[step_seconds.size() / 2];
  const double tokens = static_cast<double>(batch * t);
  fmt::print("== training step: {} ({} parameters), batch {} x {} tokens, float, AdamW ==\n",
             name, result.layout.size(), batch, t);
  fmt::print("  step time (median of {})      {:>9.1f} ms   {:.0f} tokens/s\n", steps, step * 1e3, tokens / step);
  fmt::print("  GEMM floor (its matmuls alone) {:>9.1f} ms   {:.1f} GFLOP/s over {:.2f} GFLOP\n",
             floor * 1e3, gemm_flops / floor / 1e9, gemm_flops / 1e9);
  fmt::print("  step / GEMM floor: {:.2f}  (target <= 1.5)\n", step / floor);
  fmt::print("  time per layer type over {} steps (first included):\n", steps + 1);
  const double total = times.total_seconds();
  for (const auto& e : times.entries())
    fmt::print("    {:<11} {:>9.1f} ms  {:>5.1f}%{}\n", e.kind, e.seconds * 1e3,
               total > 0 ? 100 * e.seconds / total : 0.0,
               e.flops > 0 ? fmt::format("  {:.1f} GFLOP/s", e.flops / e.seconds / 1e9) : "");
}

// Refuses, before anything is allocated, sizes whose largest section needs
// more memory than the machine has available (or `ulimit -v` leaves): the
// matmul's three n x n matrices, or the training step (its largest GEMM's
// operands, and the run itself as train::rank_bytes_estimate counts it).
std::string mib_or_gib(double bytes) {
  return bytes >= (1 << 30) ? fmt::format("{:.1f} GiB", bytes / (1 << 30))
                            : fmt::format("{:.1f} MiB", bytes / (1 << 20));
}

void check_memory(std::int64_t n, const std::string& model, std::int64_t batch) {
  const double matmul = 3.0 * static_cast<double>(n) * static_cast<double>(n) * sizeof(float);
  dtw::train::RunSpec spec = dtw::train::standard_run(model);
  spec.batch = batch;
  const dtw::model::ModelConfig config = spec.config();
  double gemm = 0;
  for (const auto& [g, times] : gpt_step_gemms(config, batch, config.context)) {
    const auto [m, gn, k, ta, tb] = g;
    gemm = std::max(gemm, static_cast<double>(m * k + k * gn + m * gn) * sizeof(float));
  }
  const double step = std::max(gemm, static_cast<double>(dtw::train::rank_bytes_estimate(spec, 1)));
  const dtw::MachineRoom room = dtw::machine_room();
  const auto check = [&](double need, const std::string& what) {
    for (const auto& [left, limit] : {std::pair{room.bytes_available, "available memory"},
                                      std::pair{room.address_space_left, "address space left by ulimit -v"}})
      DTW_CHECK_ARG(left < 0 || need <= static_cast<double>(left),
                    what << " needs an estimated " << mib_or_gib(need) << ", more than the "
                         << mib_or_gib(static_cast<double>(left)) << " of " << limit
                         << " (out of memory before it starts): use smaller sizes");
  };
  check(matmul, fmt::format("--size {} (three {}x{} float matrices)", n, n, n));
  check(step, fmt::format("--batch {} with --model {} (the training step)", batch, model));
}

}  // namespace

int main(int argc, char** argv) {
  using dtw::cli::add_int;
  CLI::App app{"dtw_bench_kernels: matmul vs the BLAS, attention, and a training step vs its GEMM floor",
               "dtw bench kernels"};
  std::int64_t size = 512, batch = 8;
  int repeats = 9, steps = 4;
  std::string model = "gpt-small";
  std::string device = "host";
  // Three n x n matrices of floats: 16384 needs 3 GiB.
  add_int(app, "--size", size, "matmul size n (n x n x n)", {1, 16384});
  add_int(app, "--repeats", repeats, "timed runs per kernel (median)", {1, 100000});
  app.add_option("--model", model, "model of the training-step section (a GPT)")->capture_default_str();
  add_int(app, "--batch", batch, "sequences per step", {1, 1 << 20});
  add_int(app, "--steps", steps, "timed training steps (median)", {1, 100000});
  app.add_option("--device", device,
                 "host (the sections above) or cuda (every CUDA kernel at GPT-2-124M shapes, each against "
                 "its ceiling: a device copy, or cuBLAS called directly)")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->capture_default_str();
  return dtw::cli::bench_main(app, argc, argv, [&] {
    if (device == "cuda") return dtw::bench::cuda_kernels_report(repeats);
    // Every value is checked before the first section measures anything.
    const dtw::model::ModelConfig config = dtw::model::model_config(model);
    DTW_CHECK_ARG(
        config.kind == dtw::model::ModelKind::kGpt,
        "--model must be a GPT (gpt-tiny, gpt-small, gpt-base, gpt2-124m), not " << model);
    check_memory(size, model, batch);
    matmul_section(size, repeats);
    attention_section(repeats);
    step_section(model, batch, steps);
    return dtw::cli::kExitOk;
  });
}
