// Division in place on the host: what ReduceOp::kAvg adds to a sum. The same
// expression as the CUDA kernel in cuda/divide.cu, so both round alike.
#include <cstddef>
#include <type_traits>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"

namespace dtw::kernels {

void divide(Buffer data, int divisor) {
  DTW_CHECK_ARG(divisor > 0, "divide: divisor " << divisor << " is not positive");
  DTW_CHECK_ARG(data.count >= 0, "divide: count " << data.count << " is negative");
  DTW_CHECK_ARG(data.type != DataType::kByte, "divide: raw bytes cannot be divided");
  if (data.count == 0 || divisor == 1) return;
  visit(data.type, [&](auto t) {
    using T = typename decltype(t)::type;
    if constexpr (!std::is_same_v<T, std::byte>) {
      T* x = static_cast<T*>(data.data);
      const T d = static_cast<T>(divisor);
      for (std::int64_t i = 0; i < data.count; ++i) x[i] = static_cast<T>(x[i] / d);
    }
  });
}

}  // namespace dtw::kernels
