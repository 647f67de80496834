# Finds Kokkos for dtw's build, and (installed beside dtwConfig.cmake) for
# projects that find_package(dtw): Debian's Kokkos 3.4, or a user's own
# install given with -DKokkos_ROOT=... (docs/kokkos4.md).
#
# dtw's code uses only what Kokkos 3.4 and 4.x both have
# (DefaultHostExecutionSpace, RangePolicy, parallel_for, initialize/finalize),
# so any Kokkos from 3.4 on is accepted; an older one is refused here rather
# than with compile errors later.
include_guard(GLOBAL)
set(_dtw_kokkos_min 3.4)

# A Kokkos_ROOT given on a later configure of an existing build folder would
# otherwise be ignored: the first configure cached Kokkos_DIR, and find_package
# looks no further. When the cached Kokkos_DIR is not inside the Kokkos_ROOT
# now given, forget it and look again (the folder's other settings stay).
set(_dtw_kokkos_root "${Kokkos_ROOT}")
if(NOT _dtw_kokkos_root AND DEFINED ENV{Kokkos_ROOT})
  set(_dtw_kokkos_root "$ENV{Kokkos_ROOT}")
endif()
if(_dtw_kokkos_root)
  get_filename_component(_dtw_kokkos_root "${_dtw_kokkos_root}" ABSOLUTE)
endif()
if(_dtw_kokkos_root AND Kokkos_DIR AND NOT Kokkos_DIR MATCHES "-NOTFOUND$")
  get_filename_component(_dtw_cached_dir "${Kokkos_DIR}" ABSOLUTE)
  string(FIND "${_dtw_cached_dir}/" "${_dtw_kokkos_root}/" _dtw_at)
  if(NOT _dtw_at EQUAL 0)
    message(STATUS "dtw: Kokkos_ROOT=${_dtw_kokkos_root} differs from the Kokkos this build "
                   "folder found before (Kokkos_DIR=${Kokkos_DIR}): looking for Kokkos in "
                   "Kokkos_ROOT instead. (`cmake --fresh ...` starts a build folder afresh.)")
    unset(Kokkos_DIR CACHE)
  endif()
endif()

find_package(Kokkos REQUIRED)

if(_dtw_kokkos_root)
  get_filename_component(_dtw_found_dir "${Kokkos_DIR}" ABSOLUTE)
  string(FIND "${_dtw_found_dir}/" "${_dtw_kokkos_root}/" _dtw_at)
  if(NOT _dtw_at EQUAL 0)
    message(FATAL_ERROR "dtw: Kokkos_ROOT is ${_dtw_kokkos_root}, but no KokkosConfig.cmake was "
                        "found there; CMake found Kokkos ${Kokkos_VERSION} at ${Kokkos_DIR} "
                        "instead. Point Kokkos_ROOT at the prefix Kokkos was installed to (the "
                        "folder holding lib/cmake/Kokkos or lib64/cmake/Kokkos).")
  endif()
endif()
if(NOT Kokkos_VERSION)
  message(FATAL_ERROR "dtw: the Kokkos at ${Kokkos_DIR} does not say its version "
                      "(Kokkos_VERSION is empty); dtw needs Kokkos ${_dtw_kokkos_min} or newer")
endif()
if(Kokkos_VERSION VERSION_LESS _dtw_kokkos_min)
  message(FATAL_ERROR "dtw: Kokkos ${Kokkos_VERSION} at ${Kokkos_DIR} is too old: dtw needs "
                      "Kokkos ${_dtw_kokkos_min} or newer (Debian's libtrilinos-kokkos-dev is "
                      "3.4; docs/kokkos4.md builds a 4.x)")
endif()
if(NOT DTW_KOKKOS_QUIET)
  message(STATUS "dtw Kokkos: ${Kokkos_VERSION} (${Kokkos_DIR}; backends: ${Kokkos_DEVICES})")
endif()

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
