#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <mutex>

#include "dtw/kernels/reduce.h"

namespace dtw::kernels {

void ensure_kokkos_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (Kokkos::is_initialized()) return;
    Kokkos::initialize();
    std::atexit([] {
      if (Kokkos::is_initialized()) Kokkos::finalize();
    });
  });
}

}  // namespace dtw::kernels
