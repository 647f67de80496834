#pragma once
// The one execution policy of dtw's host kernels: a flat range on a host
// execution space, 64-bit indices. Only RangePolicy parallel_for is used:
// Kokkos 3.4's Serial backend shares one scratch area between all threads for
// team policies and parallel_reduce, and every kernel here is called from many
// rank threads at once (docs/architecture.md, "Kokkos").
//
// Which space: every rank is already a thread, so by default each rank runs
// its kernels itself, on Kokkos::Serial (DTW_HOST_KERNELS=rank, the CMake
// default). A Kokkos without Serial, or DTW_HOST_KERNELS=parallel, uses
// Kokkos::DefaultHostExecutionSpace instead (with OpenMP: a parallel region of
// OMP_NUM_THREADS threads per kernel launch, from every rank thread at once;
// docs/kokkos4.md). On Debian's Kokkos 3.4 both are Serial.
//
// The space is always named, never left to Kokkos' default: a Kokkos built
// with CUDA makes Kokkos::DefaultExecutionSpace a device, and these kernels
// dereference host pointers.
//
// Which instance: Kokkos 4's Serial locks a mutex of the instance on every
// launch, so rank threads sharing the default instance would run their
// kernels one at a time. From Kokkos 4 on, each thread that launches a host
// kernel gets its own Serial instance (Kokkos::NewInstance), made on its first
// launch and released when the thread ends; on 3.4 (no such constructor, no
// such lock) the default instance is used.
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace dtw::kernels::detail {

#if defined(KOKKOS_ENABLE_SERIAL) && !DTW_HOST_KERNELS_PARALLEL
using HostSpace = Kokkos::Serial;
inline constexpr bool kInstancePerThread = KOKKOS_VERSION >= 40000;
#else
using HostSpace = Kokkos::DefaultHostExecutionSpace;
inline constexpr bool kInstancePerThread = false;
#endif

static_assert(Kokkos::SpaceAccessibility<HostSpace, Kokkos::HostSpace>::accessible,
              "dtw's host kernels must run where host memory is accessible");

using HostPolicy = Kokkos::RangePolicy<HostSpace, Kokkos::IndexType<std::int64_t>>;

// The instance the calling thread's host kernels run on.
inline HostSpace host_instance() {
  if constexpr (kInstancePerThread) {
#if KOKKOS_VERSION >= 40000
    thread_local const HostSpace instance{Kokkos::NewInstance{}};
    return instance;
#endif
  }
  return HostSpace{};
}

// [begin, end) on the calling thread's host instance.
inline HostPolicy host_range(std::int64_t begin, std::int64_t end) {
  return HostPolicy(host_instance(), begin, end);
}

}  // namespace dtw::kernels::detail
