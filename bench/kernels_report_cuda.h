#pragma once
// `dtw bench kernels --device cuda` (kernels_report_cuda.cpp, built where CUDA
// was found): the model's CUDA kernels at GPT-2-124M shapes, each next to its
// ceiling measured in the same run.

namespace dtw::bench {

/// Prints the report for CUDA device 0, each figure the median of `repeats`
/// timed runs; without a device it says so and returns 0. Throws CudaError
/// when a CUDA or cuBLAS call fails.
int cuda_kernels_report(int repeats);

}  // namespace dtw::bench
