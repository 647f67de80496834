// `dtw bench kernels --device cuda`: every CUDA kernel of the model at the
// shapes of a GPT-2-124M step (12 layers, 768 wide, 12 heads, context 1024;
// gpt-small is too small to occupy a GPU), each next to its ceiling measured
// in the same run on the same device:
//   - memory-bound kernels against a device-to-device copy: the kernel's
//     fewest bytes (each input read once, each output written once) over its
//     time, as a fraction of the copy's bytes read plus written over its time;
//   - matmul (device_matmul) against cuBLAS called directly on the same
//     operands, and as TFLOP/s in true FP32 (TF32 off: dtw's default);
//   - attention as GFLOP/s (these are the plain, correct-first kernels; no
//     ceiling is claimed for them).
// Shapes are chosen past the 50 MiB L2 of an H100 where the kernel allows, so
// the rows measure device memory rather than the cache. Times are CUDA-event
// medians of `repeats` runs after a warm-up run, on inputs of random data.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtw/cuda_check.h"
#include "dtw/errors.h"
#include "dtw/kernels/cuda_activations.h"
#include "dtw/kernels/cuda_attention.h"
#include "dtw/kernels/cuda_cross_entropy.h"
#include "dtw/kernels/cuda_embedding.h"
#include "dtw/kernels/cuda_layernorm.h"
#include "dtw/kernels/cuda_matmul.h"
#include "dtw/kernels/cuda_optim.h"
#include "dtw/kernels/cuda_softmax.h"
#include "kernels_report_cuda.h"

namespace dtw::bench {
namespace {

using kernels::Trans;

// Device memory of n elements filled with values in [-1, 1) from a fixed
// hash (random-looking, never zeros: zeros can run faster than data).
template <class T>
class Buffer {
 public:
  explicit Buffer(std::int64_t n, std::uint64_t seed = 1) : n_(n) {
    void* raw = nullptr;
    DTW_CUDA_CHECK(cudaMalloc(&raw, static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T)));
    data_ = static_cast<T*>(raw);
    std::vector<T> host(static_cast<std::size_t>(n));
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& v : host) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = static_cast<T>(static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0);
    }
    DTW_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { cudaFree(data_); }
  T* get() const { return data_; }
  std::int64_t bytes() const { return n_ * static_cast<std::int64_t>(sizeof(T)); }

 private:
  T* data_ = nullptr;
  std::int64_t n_;
};

struct Row {
  std::string kernel, shape;
  double seconds = 0, bytes = 0, flops = 0;
};

void print_memory_rows(const std::vector<Row>& rows, double copy_gbps) {
  fmt::print("{:<28} {:<22} {:>10} {:>10} {:>9}\n", "kernel", "shape", "time(us)", "GB/s",
             "of copy");
  for (const Row& r : rows) {
    const double gbps = r.bytes / r.seconds / 1e9;
    fmt::print("{:<28} {:<22} {:>10.1f} {:>10.1f} {:>8.0f}%\n", r.kernel, r.shape, r.seconds * 1e6,
               gbps, 100 * gbps / copy_gbps);
  }
}

}  // namespace

double median_seconds(void* stream_handle, int repeats, const std::function<void()>& fn) {
  auto* stream = static_cast<cudaStream_t>(stream_handle);
  cudaEvent_t start, stop;
  DTW_CUDA_CHECK(cudaEventCreate(&start));
  DTW_CUDA_CHECK(cudaEventCreate(&stop));
  fn();
  DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    DTW_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    DTW_CUDA_CHECK(cudaEventRecord(stop, stream));
    DTW_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    DTW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::ranges::sort(t);
  return t[t.size() / 2];
}

int cuda_kernels_report(int repeats) {
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): nothing to measure\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "cudaGetDeviceCount found 0");
    cudaGetLastError();
    return 0;
  }
  cudaDeviceProp prop{};
  DTW_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  DTW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* s = stream;
  fmt::print("# dtw bench kernels --device cuda: {} (sm_{}{}, {} SMs, L2 {} MiB), float, median of {}\n",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, repeats);

  // GPT-2-124M: C = 768, 4C = 3072, V = 50257, 12 heads of 64; B x T tokens.
  const std::int64_t C = 768, H = 12, D = 64, V = 50257, T = 1024;
  const std::int64_t N = 16 * T;  // 16 sequences: every activation below is past the L2

  // The ceiling of memory-bound kernels: a 256 MiB device-to-device copy.
  const std::int64_t copy_n = std::int64_t{64} << 20;
  Buffer<float> copy_a(copy_n), copy_b(copy_n, 2);
  const double copy_s = median_seconds(stream, repeats, [&] {
    DTW_CUDA_CHECK(cudaMemcpyAsync(copy_b.get(), copy_a.get(), copy_a.bytes(), cudaMemcpyDeviceToDevice, stream));
  });
  const double copy_gbps = 2.0 * static_cast<double>(copy_a.bytes()) / copy_s / 1e9;
  fmt::print("# ceiling: device-to-device copy of 256 MiB, {:.0f} GB/s (bytes read + written)\n\n", copy_gbps);

  // ---- memory-bound kernels ----
  std::vector<Row> rows;
  const auto f = static_cast<double>(sizeof(float));
  {
    Buffer<float> x(N * 4 * C), y(N * 4 * C, 3), dy(N * 4 * C, 4), bias(4 * C, 5);
    const double n = static_cast<double>(N * 4 * C);
    const std::string shape = fmt::format("{}x{}", N, 4 * C);
    rows.push_back({"bias_add", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_bias_add(y.get(), bias.get(), N, 4 * C, s);
                    }), 2 * n * f});
    rows.push_back({"bias_backward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_bias_backward(bias.get(), dy.get(), N, 4 * C, s);
                    }), n * f});
    rows.push_back({"gelu_forward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_gelu_forward(y.get(), x.get(), N * 4 * C, s);
                    }), 2 * n * f});
    rows.push_back({"gelu_backward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_gelu_backward(y.get(), x.get(), dy.get(), N * 4 * C, s);
                    }), 3 * n * f});
    rows.push_back({"add_into", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_add_into(y.get(), x.get(), N * 4 * C, s);
                    }), 3 * n * f});
  }
  {
    Buffer<float> x(N * C), y(N * C, 2), dy(N * C, 3), dx(N * C, 4), g(C, 5), b(C, 6), dg(C), db(C);
    Buffer<float> mean(N), rstd(N);
    const double n = static_cast<double>(N * C);
    const std::string shape = fmt::format("{}x{}", N, C);
    rows.push_back({"layernorm_forward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_layernorm_forward(y.get(), mean.get(), rstd.get(), x.get(), g.get(),
                                                        b.get(), N, C, 1e-5f, s);
                    }), 2 * n * f});
    rows.push_back({"layernorm_backward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_layernorm_backward(dx.get(), dg.get(), db.get(), dy.get(), x.get(),
                                                         mean.get(), rstd.get(), g.get(), N, C, s);
                    }), 3 * n * f});
  }
  {
    // Attention probabilities of one layer at batch 1: 12 heads x 1024 x 1024.
    const std::int64_t r = H * T;
    Buffer<float> x(r * T), y(r * T, 2), dy(r * T, 3);
    const double n = static_cast<double>(r * T);
    const std::string shape = fmt::format("{}x{}", r, T);
    rows.push_back({"softmax_forward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_softmax_forward(y.get(), x.get(), r, T, s);
                    }), 2 * n * f});
    rows.push_back({"softmax_backward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_softmax_backward(x.get(), y.get(), dy.get(), r, T, s);
                    }), 3 * n * f});
  }
  {
    // The loss over 1024 tokens: the logits are 1024 x 50257 (206 MB).
    const std::int64_t r = T;
    Buffer<float> logits(r * V), probs(r * V, 2), losses(r);
    std::vector<std::int32_t> host_targets(static_cast<std::size_t>(r));
    for (std::int64_t i = 0; i < r; ++i) host_targets[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % V);
    void* raw_targets = nullptr;
    DTW_CUDA_CHECK(cudaMalloc(&raw_targets, host_targets.size() * sizeof(std::int32_t)));
    auto* targets = static_cast<std::int32_t*>(raw_targets);
    DTW_CUDA_CHECK(cudaMemcpy(targets, host_targets.data(), host_targets.size() * sizeof(std::int32_t),
                              cudaMemcpyHostToDevice));
    const double n = static_cast<double>(r * V);
    const std::string shape = fmt::format("{}x{}", r, V);
    rows.push_back({"cross_entropy_forward*", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_cross_entropy_forward(probs.get(), losses.get(), logits.get(), targets, r, V, s);
                    }), 2 * n * f});
    rows.push_back({"cross_entropy_backward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_cross_entropy_backward(logits.get(), probs.get(), targets, r, V, 1.0f, s);
                    }), 2 * n * f});
    cudaFree(targets);
  }
  {
    Buffer<float> table(V * C), out(N * C, 2), dtable(V * C, 3);
    std::vector<std::int32_t> host_ids(static_cast<std::size_t>(N));
    for (std::int64_t i = 0; i < N; ++i) host_ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 104729) % V);
    void* raw_ids = nullptr;
    DTW_CUDA_CHECK(cudaMalloc(&raw_ids, host_ids.size() * sizeof(std::int32_t)));
    auto* ids = static_cast<std::int32_t*>(raw_ids);
    DTW_CUDA_CHECK(cudaMemcpy(ids, host_ids.data(), host_ids.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    const double n = static_cast<double>(N * C);
    const std::string shape = fmt::format("{} ids x {}", N, C);
    rows.push_back({"embedding_forward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_embedding_forward(out.get(), ids, table.get(), N, C, V, false, s);
                    }), 2 * n * f});
    // The backward reads dout once and writes the rows it touches.
    rows.push_back({"embedding_backward", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_embedding_backward(dtable.get(), ids, out.get(), N, C, V, s);
                    }), 2 * n * f});
    cudaFree(ids);
  }
  {
    // GPT-2-124M's parameters, one flat array.
    const std::int64_t P = 124'439'808;
    Buffer<float> p(P), g(P, 2), m(P, 3), v(P, 4);
    const double n = static_cast<double>(P);
    const std::string shape = fmt::format("{} params", P);
    kernels::AdamWConfig adamw;
    std::int64_t step = 1;
    rows.push_back({"adamw_step", shape, median_seconds(stream, repeats, [&] {
                      kernels::device_adamw_step(p.get(), g.get(), m.get(), v.get(), P, step++, adamw, s);
                    }), 7 * n * f});
    rows.push_back({"sum_of_squares*", shape, median_seconds(stream, repeats, [&] {
                      (void)kernels::device_sum_of_squares(g.get(), P, s);
                    }), n * f});
  }
  print_memory_rows(rows, copy_gbps);
  fmt::print("  * returns a value to the host: the time includes the wait and one small copy back\n\n");

  // ---- matmul: dtw's device_matmul against cuBLAS called directly ----
  fmt::print("{:<34} {:>10} {:>10} {:>12} {:>9}\n", "matmul (m x n x k, float)", "time(us)", "TFLOP/s",
             "cuBLAS(us)", "x cuBLAS");
  cublasHandle_t handle;
  DTW_CHECK(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS, CudaError, "cublasCreate failed");
  DTW_CHECK(cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS, CudaError, "cublasSetStream failed");
  // True FP32, as dtw's default (no TF32 tensor-core path).
  DTW_CHECK(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) == CUBLAS_STATUS_SUCCESS, CudaError,
            "cublasSetMathMode failed");
  struct Gemm { const char* what; std::int64_t m, n, k; };
  for (const Gemm& gm : {Gemm{"qkv: tokens x 3C x C", N, 3 * C, C}, Gemm{"mlp up: tokens x 4C x C", N, 4 * C, C},
                         Gemm{"mlp down: tokens x C x 4C", N, C, 4 * C}, Gemm{"lm head: 1024 x V x C", T, V, C}}) {
    Buffer<float> a(gm.m * gm.k), b(gm.k * gm.n, 2), c(gm.m * gm.n, 3);
    const double ours = median_seconds(stream, repeats, [&] {
      kernels::device_matmul(Trans::kNo, Trans::kNo, gm.m, gm.n, gm.k, 1.0f, a.get(), b.get(), 0.0f, c.get(), s);
    });
    const float one = 1, zero = 0;
    // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ.
    const double theirs = median_seconds(stream, repeats, [&] {
      const cublasStatus_t st =
          cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(gm.n), static_cast<int>(gm.m),
                      static_cast<int>(gm.k), &one, b.get(), static_cast<int>(gm.n), a.get(),
                      static_cast<int>(gm.k), &zero, c.get(), static_cast<int>(gm.n));
      DTW_CHECK(st == CUBLAS_STATUS_SUCCESS, CudaError, "cublasSgemm failed with status " << static_cast<int>(st));
    });
    const double flops = 2.0 * static_cast<double>(gm.m) * static_cast<double>(gm.n) * static_cast<double>(gm.k);
    fmt::print("{:<34} {:>10.1f} {:>10.1f} {:>12.1f} {:>9.2f}\n", gm.what, ours * 1e6, flops / ours / 1e12,
               theirs * 1e6, ours / theirs);
  }
  cublasDestroy(handle);

  // ---- attention: GFLOP/s of the plain and blockwise kernels ----
  fmt::print("\n{:<34} {:>10} {:>10}\n", "attention (batch 1, 12 heads, 1024, d 64)", "time(us)", "GFLOP/s");
  {
    kernels::AttentionShape shape{1, H, T, T, D};
    const std::int64_t qkv = H * T * D;
    Buffer<float> q(qkv), k(qkv, 2), v(qkv, 3), out(qkv, 4), dout(qkv, 5), dq(qkv), dk(qkv), dv(qkv);
    Buffer<float> probs(H * T * T), lse(H * T);
    // Causal: about half the scores; QKᵀ and PV, 2 flops per multiply-add each.
    const double fwd = 2.0 * 2.0 * static_cast<double>(H * T * T * D) / 2;
    const auto line = [&](const char* what, double flops, double sec) {
      fmt::print("{:<34} {:>10.1f} {:>10.1f}\n", what, sec * 1e6, flops / sec / 1e9);
    };
    line("forward (with probs)", fwd, median_seconds(stream, repeats, [&] {
           kernels::device_attention_forward(out.get(), probs.get(), q.get(), k.get(), v.get(), shape, true, s);
         }));
    line("backward (from probs)", 2 * fwd, median_seconds(stream, repeats, [&] {
           kernels::device_attention_backward(dq.get(), dk.get(), dv.get(), dout.get(), probs.get(), q.get(),
                                              k.get(), v.get(), shape, s);
         }));
    line("blockwise forward (block 256)", fwd, median_seconds(stream, repeats, [&] {
           kernels::device_attention_blockwise_forward(out.get(), lse.get(), q.get(), k.get(), v.get(), shape,
                                                       256, true, s);
         }));
    line("blockwise backward (block 256)", 2 * fwd, median_seconds(stream, repeats, [&] {
           kernels::device_attention_blockwise_backward(dq.get(), dk.get(), dv.get(), dout.get(), out.get(),
                                                        lse.get(), q.get(), k.get(), v.get(), shape, 256, true, s);
         }));
  }
  cuda_step_report(stream, repeats, 4);
  DTW_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace dtw::bench
