#pragma once
// The one execution policy of dtw's host kernels: a flat range on the host
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
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace dtw::kernels::detail {

#if defined(KOKKOS_ENABLE_SERIAL) && !DTW_HOST_KERNELS_PARALLEL
using HostSpace = Kokkos::Serial;
#else
using HostSpace = Kokkos::DefaultHostExecutionSpace;
#endif

using HostPolicy = Kokkos::RangePolicy<HostSpace, Kokkos::IndexType<std::int64_t>>;

}  // namespace dtw::kernels::detail
