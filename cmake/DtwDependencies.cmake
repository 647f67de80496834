# Finds every dependency in one place; optional parts are recorded in dtw/config.h.
find_package(Threads REQUIRED)

# Kokkos: Debian's libtrilinos-kokkos-dev, or a user's own install (-DKokkos_ROOT=...).
find_package(Kokkos REQUIRED)
# Debian's Kokkos::kokkos (Trilinos build) points its include directory at a
# folder that does not exist, while the headers live in include/trilinos
# (Kokkos_INCLUDE_DIRS names it). Repair the target here, once, so no other file
# needs to know. A Kokkos 4 install has a correct target and is left alone.
get_target_property(_dtw_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
if(_dtw_kokkos_inc)
  set(_dtw_fixed "")
  foreach(dir IN LISTS _dtw_kokkos_inc)
    if(dir MATCHES "^\\$<" OR EXISTS "${dir}")
      list(APPEND _dtw_fixed "${dir}")
    endif()
  endforeach()
  foreach(dir IN LISTS Kokkos_INCLUDE_DIRS)
    if(EXISTS "${dir}/Kokkos_Core.hpp")
      list(APPEND _dtw_fixed "${dir}")
    endif()
  endforeach()
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_dtw_fixed}")
endif()

find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
if(DTW_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(DTW_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# Optional peers and backends.
find_package(Gloo CONFIG QUIET)
set(DTW_HAVE_GLOO ${Gloo_FOUND})
find_package(MPI QUIET COMPONENTS CXX)
set(DTW_HAVE_MPI ${MPI_CXX_FOUND})
set(DTW_HAVE_CUDA OFF)
set(DTW_HAVE_NCCL OFF)
