#pragma once
/// @file
/// Dense matrix multiply on a CUDA device through cuBLAS (built only where CUDA
/// was found: DTW_HAVE_CUDA in dtw/config.h). The stream is a `void*` so that
/// this header needs no CUDA header; pass a `cudaStream_t`, or nullptr for the
/// default stream.
///
/// Precision: every call runs with CUBLAS_PEDANTIC_MATH, so float products are
/// true FP32 (no TF32 tensor cores, no BF16x9 emulation) and double products
/// true FP64 (no fixed-point emulation) -- the same arithmetic the host BLAS
/// does, and what the error bound in tests/gpu/cuda_matmul_test.cpp assumes.
/// The environment variable NVIDIA_TF32_OVERRIDE, read by NVIDIA's libraries,
/// takes precedence over per-handle TF32 settings: 0 forbids TF32 everywhere,
/// and a value that allows it may make float products run in TF32 despite this
/// mode (10-bit mantissas: the GPU test then fails its FP32 bound).
///
/// Determinism: cuBLAS documents that a routine gives bitwise identical
/// results run to run on GPUs of the same architecture and SM count, with the
/// same toolkit, while one stream is active. When several streams run gemms at
/// once, cuBLAS may pick a different implementation depending on the workspace
/// left; set CUBLAS_WORKSPACE_CONFIG=:4096:8 to keep that case deterministic.
///
/// Threads: each host thread gets its own cuBLAS handle per device, created
/// lazily on first use and destroyed when the thread exits, so rank threads
/// never share a handle (cuBLAS advises against sharing: a stream or mode
/// change on a shared handle affects every thread's later calls). Safe to call
/// from many host threads at once.

#include <cstdint>

#include "dtw/kernels/matmul.h"

namespace dtw::kernels {

/// `C = alpha * op(A) * op(B) + beta * C` on the current device, as
/// dtw::kernels::matmul does on the host: op(A) is M×K, op(B) is K×N and C is
/// M×N, all row-major and contiguous device memory (A is stored M×K, or K×M
/// when transposed; likewise B). `beta = 0` overwrites C (NaN in it included);
/// K = 0 sets C to beta·C (exact zeros for beta 0) without reading A or B; M
/// or N of 0 launches nothing. alpha and beta are host values. Enqueued on
/// `stream`: the call returns before the product is done. Negative sizes,
/// sizes above 2³¹ − 1 (cuBLAS's int) and null pointers that would be read
/// raise dtw::InvalidArgument before any CUDA call; a failing cuBLAS or CUDA
/// call raises dtw::CudaError naming the call and the sizes. T is float or double.
template <class T>
void device_matmul(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   T alpha, const T* a, const T* b, T beta, T* c, void* stream = nullptr);

}  // namespace dtw::kernels
