#pragma once
/// @file
/// Dense matrix multiply, the one kernel that dominates training time.
///
/// Every matrix is row-major and contiguous. The kernel hands the work to the
/// BLAS found at configure time (Debian's thread-safe OpenBLAS), set to one
/// thread per call: in dtw each rank is a thread, and a BLAS that spawned its
/// own threads inside every rank would oversubscribe the cores.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// Whether an operand is used as stored or transposed.
enum class Trans { kNo, kYes };

/// `C = alpha * op(A) * op(B) + beta * C` where op(A) is M×K, op(B) is K×N and
/// C is M×N, all row-major and contiguous (A is stored M×K, or K×M when
/// transposed; likewise B). `beta = 0` overwrites C (its old contents, NaN
/// included, are ignored); `beta = 1` accumulates into it. M, N or K of 0 is
/// allowed (K = 0 scales C by beta). Negative sizes raise InvalidArgument.
/// Safe to call from many rank threads at once. T is float or double.
template <class T>
void matmul(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
            const T* a, const T* b, T beta, T* c);

/// The same product as three plain loops (accumulating in double): the
/// reference matmul is tested against.
template <class T>
void matmul_reference(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                      T alpha, const T* a, const T* b, T beta, T* c);

/// The BLAS behind matmul and its build, e.g.
/// "OpenBLAS (OpenBLAS 0.3.21 DYNAMIC_ARCH ... Haswell MAX_THREADS=64, 1 thread per call)".
const char* blas_name();

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_matmul.h) on the Place's device and stream ----

/// matmul on `at`: the host kernel, or device_matmul on at's stream.
template <class T>
void matmul(const Place& at, Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n,
            std::int64_t k, T alpha, const T* a, const T* b, T beta, T* c);

}  // namespace dtw::kernels
