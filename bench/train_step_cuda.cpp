// The GPT-2-124M training step on one GPU, against its cuBLAS GEMM floor
// (`dtw bench kernels --device cuda`, last section).
//
// The step is the model's own code on a device Place (Gpt::set_place): zero
// the gradients, forward with the loss, backward, one AdamW step, in float,
// TF32 off. Its floor is what cuBLAS alone needs for the step's matrix
// products, each timed on its own at the step's shapes:
//   per block, forward: qkv N×3C×C, attention projection N×C×C, MLP up
//   N×4C×C, MLP down N×C×4C; QKᵀ and PV, B·H products of T×T×D and T×D×T;
//   the head N×V×C; the backward twice each (the input's gradient and the
//   weight's), timed as the forward's shape: same FLOPs, other transposes.
// The step cannot be faster than that floor unless it skips work, so
// step / floor says how much the rest (the plain attention kernels, the
// memory-bound kernels, launches) costs. Beside it: tokens/s and the model
// FLOPs utilisation (MFU) against the GPU's FP32 peak (no tensor cores:
// SMs × 128 FP32 lanes × 2 × clock, the lanes of sm_80+ parts with 128 per SM;
// an A100 has 64: its peak is then overstated 2×, and the report says which).
// The anchor is llm.c's published GPT-2 (124M) run, in bf16 with cuBLASLt and
// FlashAttention: about 60% MFU, 10 B tokens in about 90 minutes on 8 A100s
// (~230 K tokens/s per GPU) -- another precision and other kernels; the
// figure frames ours, it is not a like-for-like target.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dtw/cuda_check.h"
#include "dtw/errors.h"
#include "dtw/kernels/optim.h"
#include "dtw/kernels/place.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/gpt.h"
#include "dtw/model/params.h"
#include "kernels_report_cuda.h"

namespace dtw::bench {
namespace {

void check(cublasStatus_t st, const char* what) {
  DTW_CHECK(st == CUBLAS_STATUS_SUCCESS, CudaError,
            what << " failed with status " << static_cast<int>(st));
}

}  // namespace

void cuda_step_report(void* stream_handle, int repeats, std::int64_t batch) {
  auto* stream = static_cast<cudaStream_t>(stream_handle);
  const model::ModelConfig c = model::model_config("gpt2-124m");
  const std::int64_t B = batch, T = c.context, C = c.dim, H = c.heads, D = c.head_dim(),
                     V = c.vocab;
  const std::int64_t N = B * T, L = c.layers;
  fmt::print("\n# the GPT-2-124M step on this GPU: batch {} x {} tokens, float, TF32 off\n", B, T);

  // ---- the floor: cuBLAS alone on every product of the step ----
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublasCreate");
  check(cublasSetStream(handle, stream), "cublasSetStream");
  check(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  const float one = 1, zero = 0;
  double floor_s = 0;
  {
    // Row-major m×k by k×n: column-major Cᵀ = Bᵀ Aᵀ.
    const auto gemm = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
      kernels::Vector<float> a(kernels::Place::cuda(0, stream)), b(a.place()), out(a.place());
      a.resize(static_cast<std::size_t>(m * k));
      b.resize(static_cast<std::size_t>(k * n));
      out.resize(static_cast<std::size_t>(m * n));
      return median_seconds(stream, repeats, [&] {
        check(
            cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                        static_cast<int>(k), &one, b.data(), static_cast<int>(n), a.data(),
                        static_cast<int>(k), &zero, out.data(), static_cast<int>(n)),
            "cublasSgemm");
      });
    };
    const auto batched = [&](std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count) {
      kernels::Vector<float> a(kernels::Place::cuda(0, stream)), b(a.place()), out(a.place());
      a.resize(static_cast<std::size_t>(count * m * k));
      b.resize(static_cast<std::size_t>(count * k * n));
      out.resize(static_cast<std::size_t>(count * m * n));
      return median_seconds(stream, repeats, [&] {
        check(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                                        static_cast<int>(m), static_cast<int>(k), &one, b.data(),
                                        static_cast<int>(n), k * n, a.data(), static_cast<int>(k),
                                        m * k, &zero, out.data(), static_cast<int>(n), m * n,
                                        static_cast<int>(count)),
              "cublasSgemmStridedBatched");
      });
    };
    const double block = gemm(N, 3 * C, C) + gemm(N, C, C) + gemm(N, 4 * C, C) + gemm(N, C, 4 * C) +
                         batched(T, T, D, B * H) + batched(T, D, T, B * H);
    const double head = gemm(N, V, C);
    floor_s = 3 * (static_cast<double>(L) * block + head);
  }
  cublasDestroy(handle);

  // ---- the step: the model's own code on the device ----
  const kernels::Place at = kernels::Place::cuda(0, stream);
  model::Gpt<float> gpt(c);
  gpt.set_place(at);
  const std::int64_t P = gpt.layout().size();
  std::vector<float> host(static_cast<std::size_t>(P));
  model::init_params(c, gpt.layout(), 1, host.data());
  kernels::Vector<float> params(at), grads(at), m(at), v(at);
  params.assign(host.begin(), host.end());
  for (kernels::Vector<float>* x : {&grads, &m, &v}) x->resize(static_cast<std::size_t>(P));
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(N)), targets(tokens.size());
  for (std::int64_t i = 0; i < N; ++i) {
    tokens[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % V);
    targets[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 104729 + 1) % V);
  }
  kernels::AdamWConfig adamw;
  adamw.lr = 3e-4;
  std::vector<double> seconds;
  double loss = 0;
  for (int step = 0; step <= std::max(repeats / 4, 3); ++step) {
    const auto start = std::chrono::steady_clock::now();
    DTW_CUDA_CHECK(cudaMemsetAsync(grads.data(), 0, grads.size() * sizeof(float), stream));
    loss = gpt.forward(params.data(), tokens.data(), targets.data(), B, T);  // waits for the loss
    gpt.backward(params.data(), grads.data());
    kernels::adamw_step(at, params.data(), static_cast<const float*>(grads.data()), m.data(),
                        v.data(), P, step + 1, adamw);
    DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (step > 0) seconds.push_back(took.count());  // the first allocates the caches
  }
  std::ranges::sort(seconds);
  const double step_s = seconds[seconds.size() / 2];

  // ---- tokens/s and MFU ----
  int device = 0, sms = 0, khz = 0, major = 0;
  DTW_CUDA_CHECK(cudaGetDevice(&device));
  DTW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  DTW_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  DTW_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const double peak = static_cast<double>(sms) * 128 * 2 * static_cast<double>(khz) * 1e3;
  // PaLM's count (as llm.c's MFU): 6 FLOPs per parameter per token, plus
  // attention's 12·L·C·T per token; the causal mask not discounted.
  const double flops_per_token =
      6.0 * static_cast<double>(P) + 12.0 * static_cast<double>(L * C * T);
  const double tokens_per_s = static_cast<double>(N) / step_s;
  fmt::print("{:<44} {:>12.1f}\n", "step (zero, forward, backward, AdamW) ms", step_s * 1e3);
  fmt::print("{:<44} {:>12.1f}\n", "cuBLAS GEMM floor of the step ms", floor_s * 1e3);
  fmt::print("{:<44} {:>12.2f}   (target <= 1.5)\n", "step / floor", step_s / floor_s);
  fmt::print("{:<44} {:>12.0f}\n", "tokens/s", tokens_per_s);
  fmt::print("{:<44} {:>12.1f}%   of {:.1f} TFLOP/s FP32 ({} SMs x 128 x 2 x {:.2f} GHz{})\n",
             "MFU", 100 * flops_per_token * tokens_per_s / peak, peak / 1e12, sms,
             static_cast<double>(khz) / 1e6, major == 8 ? "; an A100 has 64 lanes per SM: 2x" : "");
  fmt::print("{:<44} {:>12.4f}   (first steps of random tokens: about ln {} = {:.2f})\n", "loss",
             loss, V, std::log(static_cast<double>(V)));
  fmt::print(
      "  anchor: llm.c's GPT-2 (124M), bf16 + cuBLASLt + FlashAttention, ~60% MFU, ~230K tokens/s "
      "per A100 (10B tokens in ~90 min on 8)\n");
}

}  // namespace dtw::bench
