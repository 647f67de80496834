// --backend nccl: chapter 01's allreduce algorithms on the GPUs, one rank per
// GPU (threads of this process, dtw::launch with backend "nccl"), next to
// NCCL's own ncclAllReduce (the backend's reference_allreduce) at every size;
// then reduce_into against a device-to-device copy (gpu_bandwidth.cpp).
// Buffers are device memory: each rank copies its input up from a host
// pattern, and the result back down for the #wrong column, outside the timed
// loops. Compiled only in builds with NCCL.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <span>

#include "../gpu_bandwidth.h"
#include "dispatch.h"
#include "dtw/cuda_check.h"
#include "dtw/dtw.h"
#include "report.h"
#if DTW_BENCH_HAVE_CH01
#include "collectives.h"
#endif

namespace dtw::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One rank's device buffer, freed when the rank is done (or fails).
template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(std::int64_t count) {
    DTW_CUDA_CHECK(cudaMalloc(&p_, static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T)));
  }
  ~DeviceVector() { cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  std::span<T> first(std::int64_t count) const { return {static_cast<T*>(p_), static_cast<std::size_t>(count)}; }
  void upload(std::span<const T> host) {
    DTW_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
    // A copy from pageable memory may return before the data is on the device,
    // and the rank's NCCL work runs on a non-blocking stream that does not wait
    // for the legacy stream: wait here, or the first call may read old data.
    DTW_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  void download(std::span<T> host) const {
    DTW_CUDA_CHECK(cudaMemcpy(host.data(), p_, host.size_bytes(), cudaMemcpyDeviceToHost));
  }

 private:
  void* p_ = nullptr;
};

// NCCL's allreduce when `algo` is empty, else chapter 01's algorithm of that name.
template <class T>
Series run_on_gpus(const Options& o, const std::string& algo) {
  const bool is_nccl = algo.empty();
  const int p = o.ranks;
  const std::size_t nsizes = o.sizes.size(), trials = static_cast<std::size_t>(o.trials);
  Series s{is_nccl ? "NCCL" : algo, is_nccl ? "peer" : "dtw", 2.0 * (p - 1) / p, "", {}};
#if DTW_BENCH_HAVE_CH01
  const ch01::AllreduceAlgo which = is_nccl ? ch01::AllreduceAlgo::kRing : ch01::parse_allreduce_algo(algo);
#else
  if (!is_nccl) {
    s.note = "skipped: chapter 01's solution library (dtw_ch01_solution) is not built";
    return s;
  }
#endif
  if (is_nccl) s.note = "ncclAllReduce (the nccl backend's reference_allreduce)";
  std::vector<double> secs(nsizes * trials * static_cast<std::size_t>(p));
  std::vector<std::int64_t> wrong(nsizes * static_cast<std::size_t>(p));
  LaunchOptions lo;
  lo.backend = "nccl";
  lo.timeout = std::chrono::minutes(5);
  const std::int64_t max_count = *std::ranges::max_element(o.sizes) / static_cast<std::int64_t>(sizeof(T));
  launch(p, lo, [&](Comm& comm) {
    const int r = comm.rank();
    DeviceVector<T> device(max_count);
    std::vector<T> host(static_cast<std::size_t>(max_count));
    const auto once = [&](std::span<T> x) {
      if (is_nccl) {
        comm.reference_allreduce(as_buffer(x), o.op);
        return;
      }
#if DTW_BENCH_HAVE_CH01
      ch01::allreduce(comm, x, o.op, which);
#endif
    };
    for (std::size_t k = 0; k < nsizes; ++k) {
      const std::int64_t count = o.sizes[k] / static_cast<std::int64_t>(sizeof(T));
      const std::span<T> h(host.data(), static_cast<std::size_t>(count));
      const std::span<T> d = device.first(count);
      // Correctness first, against the exact result: NCCL's row is checked too.
      for (std::int64_t i = 0; i < count; ++i) h[i] = static_cast<T>(input_value(r, i, o.op, false));
      device.upload(h);
      once(d);
      device.download(h);
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < count; ++i)
        bad += close_enough(static_cast<double>(h[i]), expected_value(p, i, o.op), o.dtype, p) ? 0 : 1;
      wrong[k * p + r] = bad;
      // Then the timed calls, in place on the same buffer. Every call returns
      // once its work on the GPU is done, so the host clock times it whole.
      for (std::int64_t i = 0; i < count; ++i) h[i] = static_cast<T>(input_value(r, i, o.op, true));
      device.upload(h);
      const int iters = iters_for(o, o.sizes[k]);
      for (int w = 0; w < warmup_for(o, o.sizes[k]); ++w) once(d);
      for (std::size_t t = 0; t < trials; ++t) {
        comm.barrier();
        const auto t0 = Clock::now();
        for (int it = 0; it < iters; ++it) once(d);
        secs[(k * trials + t) * p + r] = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
      }
    }
  });
  for (std::size_t k = 0; k < nsizes; ++k) {
    Sample x = sample_from_ranks(o.sizes[k], sizeof(T), k, trials, p, secs, wrong);
    s.samples.push_back(x);  // no model: its α, β and γ describe the threads backend
  }
  return s;
}

}  // namespace

int nccl_main(Options o, bool ranks_given) {
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "dtw_bench_collectives: --backend nccl: no CUDA device: %s\n",
                 rc != cudaSuccess ? cudaGetErrorString(rc) : "cudaGetDeviceCount found 0");
    return 3;  // a run that failed (dtw --help), as dtw run --backend nccl without a device
  }
  if (!ranks_given) o.ranks = devices;
  DTW_CHECK_ARG(o.ranks <= devices, "--ranks " << o.ranks << ": the nccl backend runs one rank per GPU, "
                                               << "and this machine has " << devices);
  GpuInfo gpu;
  gpu.count = devices;
  cudaDeviceProp prop{};
  DTW_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  gpu.name = prop.name;

  std::vector<Series> all;
  with_type(o.dtype, [&](auto zero) {
    using T = decltype(zero);
    all.push_back(run_on_gpus<T>(o, ""));
    for (const std::string& name : o.algos) all.push_back(run_on_gpus<T>(o, name));
  });
  // The kernel on its own, on GPU 0 (kAvg's kernel is the sum; the division is another pass).
  DTW_CUDA_CHECK(cudaSetDevice(0));
  const ReduceOp op = o.op == ReduceOp::kAvg ? ReduceOp::kSum : o.op;
  for (const DeviceBandwidth& b : measure_reduce_vs_copy(o.sizes, o.dtype, op))
    gpu.bandwidth.push_back({b.bytes, b.reduce_gbps(), b.copy_gbps()});

  print_nccl_report(o, gpu, all);
  if (!o.json_path.empty()) write_json(o, Model{}, all, &gpu);
  if (!o.plot_path.empty()) write_plot(o, all);
  return 0;
}

}  // namespace dtw::bench
