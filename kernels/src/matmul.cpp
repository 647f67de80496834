// Matrix multiply through the BLAS, next to the triple loop it must match.
//
// Row-major C = op(A) op(B) is computed by a column-major BLAS as
// Cᵀ = op(B)ᵀ op(A)ᵀ; cblas does that bookkeeping when told CblasRowMajor.
#include "dtw/kernels/matmul.h"

#include <cblas.h>

#include <mutex>
#include <string>

#include "dtw/errors.h"

namespace dtw::kernels {
namespace {

// One BLAS thread per rank thread (see matmul.h): the threaded OpenBLAS is
// told once. It stays safe to call from many threads at once because it is
// built with locking around its buffers -- unlike Debian's serial build, which
// returns wrong products when rank threads call it together (see
// cmake/DtwDependencies.cmake).
void ensure_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_get_parallel() != 0) openblas_set_num_threads(1);
  });
}

// A serial OpenBLAS (openblas_get_parallel() == 0) has no locks: calls from
// two threads at once can return wrong products. Such a build, if it is what
// was found, gets its calls serialised; the thread-safe builds run unlocked.
std::mutex serial_blas_mutex;
std::unique_lock<std::mutex> lock_if_serial_blas() {
  static const bool serial = openblas_get_parallel() == 0;
  return serial ? std::unique_lock<std::mutex>(serial_blas_mutex) : std::unique_lock<std::mutex>();
}

CBLAS_TRANSPOSE to_cblas(Trans t) {
  return t == Trans::kYes ? CblasTrans : CblasNoTrans;
}

void check_sizes(std::int64_t m, std::int64_t n, std::int64_t k) {
  DTW_CHECK_ARG(m >= 0 && n >= 0 && k >= 0,
                "matmul: sizes must not be negative (m " << m << ", n " << n << ", k " << k << ")");
  constexpr std::int64_t kMaxBlasInt = 2147483647;
  DTW_CHECK_ARG(
      m <= kMaxBlasInt && n <= kMaxBlasInt && k <= kMaxBlasInt,
      "matmul: sizes exceed the BLAS's 32-bit int (m " << m << ", n " << n << ", k " << k << ")");
}

void gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}
void gemm(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

}  // namespace

template <class T>
void matmul(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
            const T* a, const T* b, T beta, T* c) {
  check_sizes(m, n, k);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // BLAS implementations differ on k = 0; define it here: C = beta·C.
    for (std::int64_t i = 0; i < m * n; ++i) c[i] = beta == T(0) ? T(0) : beta * c[i];
    return;
  }
  ensure_single_threaded_blas();
  const std::unique_lock<std::mutex> lock = lock_if_serial_blas();
  // Leading dimensions are row lengths as stored: A is m×k (k×m when
  // transposed), B is k×n (n×k), C is m×n.
  const int lda = static_cast<int>(trans_a == Trans::kYes ? m : k);
  const int ldb = static_cast<int>(trans_b == Trans::kYes ? k : n);
  gemm(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
       lda, b, ldb, beta, c, static_cast<int>(n));
}

template <class T>
void matmul_reference(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                      T alpha, const T* a, const T* b, T beta, T* c) {
  check_sizes(m, n, k);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const T aip = trans_a == Trans::kYes ? a[p * m + i] : a[i * k + p];
        const T bpj = trans_b == Trans::kYes ? b[j * k + p] : b[p * n + j];
        sum += static_cast<double>(aip) * static_cast<double>(bpj);
      }
      const double old = beta == T(0) ? 0.0 : static_cast<double>(beta) * c[i * n + j];
      c[i * n + j] = static_cast<T>(static_cast<double>(alpha) * sum + old);
    }
  }
}

const char* blas_name() {
  static const std::string name = [] {
    ensure_single_threaded_blas();
    std::string config = openblas_get_config();
    return "OpenBLAS (" + config + ", " + std::to_string(openblas_get_num_threads()) +
           " thread per call)";
  }();
  return name.c_str();
}

#define DTW_INSTANTIATE(T)                                                                     \
  template void matmul<T>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, T, const T*, \
                          const T*, T, T*);                                                    \
  template void matmul_reference<T>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, T, \
                                    const T*, const T*, T, T*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
