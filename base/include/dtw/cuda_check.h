#pragma once
/// @file
/// Check macros for CUDA runtime and NCCL calls: a failure becomes a
/// dtw::CudaError or dtw::NcclError naming the call, the error and file:line.
///
/// Only sources that talk to CUDA include this header (it pulls in the CUDA
/// runtime API); no other public dtw header includes a CUDA header, so a build
/// without the toolkit never sees one. DTW_NCCL_CHECK expands to NCCL calls:
/// include <nccl.h> before using it.

#include <cuda_runtime_api.h>

#include "dtw/errors.h"

/// Throws dtw::CudaError when the CUDA runtime call `expr` does not return cudaSuccess:
/// `DTW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));`
#define DTW_CUDA_CHECK(expr)                                                                   \
  do {                                                                                         \
    const cudaError_t dtw_cuda_rc_ = (expr);                                                   \
    if (dtw_cuda_rc_ != cudaSuccess)                                                           \
      ::dtw::detail::raise<::dtw::CudaError>(                                                  \
          ::dtw::detail::Message() << #expr << " failed: " << cudaGetErrorName(dtw_cuda_rc_)  \
                                   << " (" << cudaGetErrorString(dtw_cuda_rc_) << ")",         \
          __FILE__, __LINE__);                                                                 \
  } while (0)

/// Checks the launch that was just enqueued (bad configuration, no kernel image
/// for this GPU): every `<<<...>>>` is followed by this.
#define DTW_CUDA_CHECK_LAUNCH() DTW_CUDA_CHECK(cudaGetLastError())

/// Throws dtw::NcclError when the NCCL call `expr` fails. `ncclInProgress` (a
/// non-blocking communicator still working) is not a failure; the message adds
/// NCCL's own explanation from ncclGetLastError.
#define DTW_NCCL_CHECK(expr)                                                                  \
  do {                                                                                        \
    const ncclResult_t dtw_nccl_rc_ = (expr);                                                 \
    if (dtw_nccl_rc_ != ncclSuccess && dtw_nccl_rc_ != ncclInProgress)                        \
      ::dtw::detail::raise<::dtw::NcclError>(                                                 \
          ::dtw::detail::Message() << #expr << " failed: " << ncclGetErrorString(dtw_nccl_rc_) \
                                   << " (" << ncclGetLastError(nullptr) << ")",               \
          __FILE__, __LINE__);                                                                \
  } while (0)
