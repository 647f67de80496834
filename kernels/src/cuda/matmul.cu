// matmul on a CUDA device: cuBLAS does the product, one small kernel the K = 0
// case. cuBLAS is column-major; a row-major M×N matrix C read column-major is
// Cᵀ (N×M, leading dimension N), so row-major C = op(A)·op(B) is computed as
// the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands and M with N, keep
// each operand's transpose flag and its row-major leading dimension.
#include <cublas_v2.h>

#include <cstdint>
#include <unordered_map>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_matmul.h"

namespace dtw::kernels {
namespace {

constexpr int kThreads = 256;

#define DTW_CUBLAS_CHECK(expr, m, n, k)                                                           \
  do {                                                                                            \
    const cublasStatus_t dtw_cublas_rc_ = (expr);                                                 \
    if (dtw_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::dtw::detail::raise<::dtw::CudaError>(                                                     \
          ::dtw::detail::Message() << #expr << " failed for m " << (m) << ", n " << (n) << ", k " \
                                   << (k) << ": " << cublasGetStatusName(dtw_cublas_rc_) << " ("  \
                                   << cublasGetStatusString(dtw_cublas_rc_) << ")",               \
          __FILE__, __LINE__);                                                                    \
  } while (0)

// The calling thread's handles, one per device (a handle is tied to the device
// current when it was created). Destroyed when the thread exits; thread-local
// objects go before static ones, so the CUDA runtime is still there then.
class ThreadHandles {
 public:
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    for (auto& [device, handle] : handles_) cublasDestroy(handle);  // errors at exit: nothing to do
  }
  cublasHandle_t get(int device, std::int64_t m, std::int64_t n, std::int64_t k) {
    auto it = handles_.find(device);
    if (it != handles_.end()) return it->second;
    cublasHandle_t handle = nullptr;
    DTW_CUBLAS_CHECK(cublasCreate(&handle), m, n, k);
    // True FP32/FP64 arithmetic: no TF32, no emulation (see cuda_matmul.h).
    const cublasStatus_t rc = cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
    if (rc != CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);
    DTW_CUBLAS_CHECK(rc, m, n, k);
    handles_.emplace(device, handle);
    return handle;
  }

 private:
  std::unordered_map<int, cublasHandle_t> handles_;
};

cublasHandle_t handle_for_this_thread(std::int64_t m, std::int64_t n, std::int64_t k) {
  thread_local ThreadHandles handles;
  int device = 0;
  DTW_CUDA_CHECK(cudaGetDevice(&device));
  return handles.get(device, m, n, k);
}

cublasOperation_t to_cublas(Trans t) {
  return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                    const float* beta, float* c, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const double* alpha, const double* a, int lda, const double* b, int ldb,
                    const double* beta, double* c, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// K = 0: c[i] = beta·c[i], with beta 0 writing exact zeros (NaN in C ignored),
// as the host matmul does; BLAS implementations disagree on this case. One
// thread per element in a grid-stride loop; 2 × sizeof(T) bytes per element
// (one for beta 0), one flop.
template <class T>
__global__ void scale_kernel(T* __restrict__ c, std::int64_t count, T beta) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    c[i] = beta == T(0) ? T(0) : beta * c[i];
}

void check_sizes(std::int64_t m, std::int64_t n, std::int64_t k) {
  DTW_CHECK_ARG(m >= 0 && n >= 0 && k >= 0, "device_matmul: sizes must not be negative (m "
                                                << m << ", n " << n << ", k " << k << ")");
  constexpr std::int64_t kMaxBlasInt = 2147483647;
  DTW_CHECK_ARG(m <= kMaxBlasInt && n <= kMaxBlasInt && k <= kMaxBlasInt,
                "device_matmul: sizes exceed cuBLAS's 32-bit int (m " << m << ", n " << n << ", k "
                                                                      << k << ")");
}

}  // namespace

template <class T>
void device_matmul(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                   T alpha, const T* a, const T* b, T beta, T* c, void* stream) {
  check_sizes(m, n, k);
  if (m == 0 || n == 0) return;
  DTW_CHECK_ARG(c != nullptr, "device_matmul: C is null for m " << m << ", n " << n);
  DTW_CHECK_ARG(k == 0 || (a != nullptr && b != nullptr),
                "device_matmul: A or B is null for m " << m << ", n " << n << ", k " << k);
  auto* st = static_cast<cudaStream_t>(stream);
  if (k == 0) {
    int device = 0, sms = 0;
    DTW_CUDA_CHECK(cudaGetDevice(&device));
    DTW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const std::int64_t count = m * n;  // ≤ (2³¹ − 1)², fits in int64
    const std::int64_t wanted = (count + kThreads - 1) / kThreads;
    const std::int64_t cap = static_cast<std::int64_t>(sms) * 8;
    const int grid = static_cast<int>(wanted < cap ? wanted : cap);  // ≥ 1: count > 0, sms > 0
    scale_kernel<T><<<grid, kThreads, 0, st>>>(c, count, beta);
    DTW_CUDA_CHECK_LAUNCH();
    return;
  }
  cublasHandle_t handle = handle_for_this_thread(m, n, k);
  // Every call sets the stream: the handle is the thread's, the stream the caller's.
  DTW_CUBLAS_CHECK(cublasSetStream(handle, st), m, n, k);
  // Row-major leading dimensions as stored: A is m×k (k×m transposed), B k×n (n×k), C m×n.
  const int lda = static_cast<int>(trans_a == Trans::kYes ? m : k);
  const int ldb = static_cast<int>(trans_b == Trans::kYes ? k : n);
  DTW_CUBLAS_CHECK(
      gemm(handle, to_cublas(trans_b), to_cublas(trans_a), static_cast<int>(n), static_cast<int>(m),
           static_cast<int>(k), &alpha, b, ldb, a, lda, &beta, c, static_cast<int>(n)),
      m, n, k);
}

#define DTW_INSTANTIATE(T)                                                                  \
  template void device_matmul<T>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, T, \
                                 const T*, const T*, T, T*, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
