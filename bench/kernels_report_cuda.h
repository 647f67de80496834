#pragma once
// `dtw bench kernels --device cuda` (kernels_report_cuda.cpp, built where CUDA
// was found): the model's CUDA kernels at GPT-2-124M shapes, each next to its
// ceiling measured in the same run.

#include <cstdint>
#include <functional>

namespace dtw::bench {

/// Prints the report for CUDA device 0, each figure the median of `repeats`
/// timed runs; without a device it says so and returns 0. Throws CudaError
/// when a CUDA or cuBLAS call fails.
int cuda_kernels_report(int repeats);

/// Median seconds of `fn` (which enqueues on `stream`, a cudaStream_t) over
/// `repeats` runs, each between two CUDA events, after one warm-up run.
double median_seconds(void* stream, int repeats, const std::function<void()>& fn);

/// The last section of that report: one GPT-2-124M training step (batch ×
/// 1024 tokens) of the model's own code on a device Place against the
/// cuBLAS time of its matrix products, with tokens/s and MFU
/// (train_step_cuda.cpp). `stream` is the report's cudaStream_t.
void cuda_step_report(void* stream, int repeats, std::int64_t batch);

}  // namespace dtw::bench
