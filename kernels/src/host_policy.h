#pragma once
// The one execution policy of dtw's host kernels: a flat range on the host
// execution space, 64-bit indices. Only RangePolicy parallel_for is used:
// Kokkos 3.4's Serial backend shares one scratch area between all threads for
// team policies and parallel_reduce, and every kernel here is called from many
// rank threads at once (docs/architecture.md, "Kokkos").
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace dtw::kernels::detail {

using HostPolicy =
    Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>;

}  // namespace dtw::kernels::detail
