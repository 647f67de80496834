// The local reduction as a Kokkos kernel, next to the plain loop it must match.
#include "dtw/kernels/reduce.h"

#include <algorithm>

#include "dtw/errors.h"
#include "host_policy.h"

namespace dtw::kernels {
namespace {

template <class T>
KOKKOS_INLINE_FUNCTION T apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kProd: return a * b;
    case ReduceOp::kMin: return b < a ? b : a;
    case ReduceOp::kMax: return a < b ? b : a;
    case ReduceOp::kSum:
    case ReduceOp::kAvg: break;
  }
  return a + b;
}

// One functor per op (the op is a template parameter) so the inner loop has no
// branch and the compiler can vectorise it.
template <class T, ReduceOp kOp>
struct ReduceFunctor {
  T* __restrict__ dst;
  const T* __restrict__ src;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    dst[i] = apply(kOp, dst[i], src[i]);
  }
};

template <class T, ReduceOp kOp>
void run(T* dst, const T* src, std::int64_t count) {
  using detail::host_range;
  Kokkos::parallel_for("dtw::reduce_into", host_range(0, count), ReduceFunctor<T, kOp>{dst, src});
}

}  // namespace

template <NumericElement T>
void reduce_into(T* dst, const T* src, std::int64_t count, ReduceOp op) {
  DTW_CHECK_ARG(count >= 0, "reduce_into: count " << count << " is negative");
  DTW_CHECK_ARG(is_valid(op), "reduce_into: op " << static_cast<int>(op)
                                                 << " is not a ReduceOp (sum, prod, min, max, avg)");
  if (count == 0) return;
  ensure_kokkos_initialized();
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: run<T, ReduceOp::kSum>(dst, src, count); break;
    case ReduceOp::kProd: run<T, ReduceOp::kProd>(dst, src, count); break;
    case ReduceOp::kMin: run<T, ReduceOp::kMin>(dst, src, count); break;
    case ReduceOp::kMax: run<T, ReduceOp::kMax>(dst, src, count); break;
  }
}

template <NumericElement T>
void reduce_into_reference(T* dst, const T* src, std::int64_t count, ReduceOp op) {
  for (std::int64_t i = 0; i < count; ++i) dst[i] = apply(op, dst[i], src[i]);
}

void reduce_into(Buffer dst, ConstBuffer src, ReduceOp op) {
  DTW_CHECK_ARG(dst.type == src.type, "reduce_into: destination holds " << name_of(dst.type)
                                                                        << " but source holds "
                                                                        << name_of(src.type));
  DTW_CHECK_ARG(dst.count == src.count, "reduce_into: destination has "
                                            << dst.count << " elements but source has "
                                            << src.count);
  DTW_CHECK_ARG(dst.type != DataType::kByte, "reduce_into: raw bytes cannot be reduced");
  visit(dst.type, [&](auto t) {
    using T = typename decltype(t)::type;
    if constexpr (!std::is_same_v<T, std::byte>)
      reduce_into(static_cast<T*>(dst.data), static_cast<const T*>(src.data), dst.count, op);
  });
}

#define DTW_INSTANTIATE(T)                                            \
  template void reduce_into<T>(T*, const T*, std::int64_t, ReduceOp); \
  template void reduce_into_reference<T>(T*, const T*, std::int64_t, ReduceOp);
DTW_INSTANTIATE(std::int32_t)
DTW_INSTANTIATE(std::int64_t)
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
