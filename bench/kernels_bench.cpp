// Google Benchmark programs for the model substrate's kernels:
//   BM_BlasSgemm/N    cblas_sgemm called directly (the peer)
//   BM_Matmul/N       dtw::kernels::matmul on the same operands
//   BM_Attention*     causal attention, plain and blockwise, forward/backward
//   BM_TrainStep      one dtw::train_reference step of gpt-tiny / gpt-small
// Counters: GFLOP/s for the products, tokens/s for the step.
// `dtw bench kernels` (kernels_report.cpp) prints the same figures as ratios.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <vector>

#include "dtw/kernels/attention.h"
#include "dtw/kernels/matmul.h"
#include "dtw/model/config.h"
#include "dtw/model/trainer.h"
#include "dtw/train/run_spec.h"

namespace {

using dtw::kernels::Trans;

void BM_BlasSgemm(benchmark::State& state) {
  dtw::kernels::blas_name();  // sets the BLAS to one thread, as dtw's matmul does
  const int n = static_cast<int>(state.range(0));
  std::vector<float> a(static_cast<std::size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n,
                0.f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BlasSgemm)->Arg(128)->Arg(256)->Arg(512);

void BM_Matmul(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<float> a(static_cast<std::size_t>(n * n), 0.5f), b(a.size(), 0.25f), c(a.size());
  for (auto _ : state) {
    dtw::kernels::matmul(Trans::kNo, Trans::kNo, n, n, n, 1.f, a.data(), b.data(), 0.f, c.data());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n) * 1e-9 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Matmul)->Arg(128)->Arg(256)->Arg(512);

// Shape of a gpt-small layer's attention: batch 8, heads 8, T 128, head_dim 32.
struct AttentionData {
  dtw::kernels::AttentionShape s{.batch = 8, .heads = 8, .q_len = 128, .kv_len = 128, .head_dim = 32};
  std::size_t qn = static_cast<std::size_t>(s.batch * s.heads * s.q_len * s.head_dim);
  std::size_t rows = static_cast<std::size_t>(s.batch * s.heads * s.q_len);
  std::vector<float> q = std::vector<float>(qn, 0.01f), k = std::vector<float>(qn, 0.02f),
                     v = std::vector<float>(qn, 0.03f), out = std::vector<float>(qn),
                     dout = std::vector<float>(qn, 0.001f), dq = std::vector<float>(qn),
                     dk = std::vector<float>(qn), dv = std::vector<float>(qn),
                     probs = std::vector<float>(rows * 128), lse = std::vector<float>(rows);
  // Useful forward FLOPs: two products of 2·T·T·d per head, halved by the mask.
  double forward_flops() const {
    return 2.0 * static_cast<double>(s.batch * s.heads * s.q_len * s.kv_len * s.head_dim);
  }
};

void set_gflops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * 1e-9 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void BM_AttentionForward(benchmark::State& state) {
  AttentionData d;
  for (auto _ : state)
    dtw::kernels::attention_forward(d.out.data(), d.probs.data(), d.q.data(), d.k.data(), d.v.data(), d.s);
  set_gflops(state, d.forward_flops());
}
BENCHMARK(BM_AttentionForward)->Unit(benchmark::kMillisecond);

void BM_AttentionBackward(benchmark::State& state) {
  AttentionData d;
  dtw::kernels::attention_forward(d.out.data(), d.probs.data(), d.q.data(), d.k.data(), d.v.data(), d.s);
  for (auto _ : state)
    dtw::kernels::attention_backward(d.dq.data(), d.dk.data(), d.dv.data(), d.dout.data(),
                                     d.probs.data(), d.q.data(), d.k.data(), d.v.data(), d.s);
  set_gflops(state, 2 * d.forward_flops());
}
BENCHMARK(BM_AttentionBackward)->Unit(benchmark::kMillisecond);

void BM_AttentionBlockwiseForward(benchmark::State& state) {
  AttentionData d;
  for (auto _ : state)
    dtw::kernels::attention_blockwise_forward(d.out.data(), d.lse.data(), d.q.data(), d.k.data(),
                                              d.v.data(), d.s, state.range(0));
  set_gflops(state, d.forward_flops());
}
BENCHMARK(BM_AttentionBlockwiseForward)->Arg(32)->Unit(benchmark::kMillisecond);

void BM_AttentionBlockwiseBackward(benchmark::State& state) {
  AttentionData d;
  dtw::kernels::attention_blockwise_forward(d.out.data(), d.lse.data(), d.q.data(), d.k.data(),
                                            d.v.data(), d.s, state.range(0));
  for (auto _ : state)
    dtw::kernels::attention_blockwise_backward(d.dq.data(), d.dk.data(), d.dv.data(), d.dout.data(),
                                               d.out.data(), d.lse.data(), d.q.data(), d.k.data(),
                                               d.v.data(), d.s, state.range(0));
  set_gflops(state, 2 * d.forward_flops());
}
BENCHMARK(BM_AttentionBlockwiseBackward)->Arg(32)->Unit(benchmark::kMillisecond);

// One optimizer step (forward, backward, clip, AdamW) timed by the trainer
// itself, so model construction and initialisation are not counted.
void BM_TrainStep(benchmark::State& state, const char* model) {
  const dtw::model::ModelConfig config = dtw::model::model_config(model);
  dtw::model::TrainOptions options = dtw::train::standard_run(model).options();
  double seconds = 0;
  options.on_step = [&](const dtw::model::StepInfo& s) { seconds = s.seconds; };
  for (auto _ : state) {
    dtw::model::train_reference<float>(config, 1, options);
    state.SetIterationTime(seconds);
  }
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(options.batch * config.context) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_TrainStep, gpt_tiny, "gpt-tiny")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TrainStep, gpt_small, "gpt-small")->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
