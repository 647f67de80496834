# Finds every dependency in one place; optional parts are recorded in dtw/config.h.
find_package(Threads REQUIRED)

# Kokkos: Debian's libtrilinos-kokkos-dev, or a user's own install
# (-DKokkos_ROOT=...); the version check and a repair of Debian's target.
include(DtwKokkos)

find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
if(DTW_BUILD_TOOLS)
  find_package(CLI11 CONFIG REQUIRED)
endif()
if(DTW_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(DTW_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# BLAS for the matmul kernel: OpenBLAS. Each rank is a thread that calls the
# BLAS on its own, so the build must be safe to call from many threads at once,
# and must not start threads of its own inside every rank (matmul.cpp sets it
# to one thread). Debian's pthread build is thread-safe (built with locking);
# Debian's *serial* build is not: 8 threads calling sgemm together got wrong
# products in about 1 call in 1600 here (OpenBLAS issue 2126), so it is never
# chosen on purpose.
find_path(DTW_CBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread NO_DEFAULT_PATH)
find_library(DTW_BLAS_LIBRARY NAMES openblas
  PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread NO_DEFAULT_PATH)
find_path(DTW_CBLAS_INCLUDE_DIR cblas.h HINTS ENV OpenBLAS_HOME PATH_SUFFIXES include include/openblas)
find_library(DTW_BLAS_LIBRARY NAMES openblas HINTS ENV OpenBLAS_HOME PATH_SUFFIXES lib lib64)
if(NOT DTW_CBLAS_INCLUDE_DIR OR NOT DTW_BLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS not found (cblas.h: ${DTW_CBLAS_INCLUDE_DIR}, library: "
                      "${DTW_BLAS_LIBRARY}). Run tools/setup, which installs "
                      "libopenblas-pthread-dev, or set OpenBLAS_HOME.")
endif()
if(NOT TARGET dtw::blas)
  add_library(dtw::blas UNKNOWN IMPORTED)
  set_target_properties(dtw::blas PROPERTIES IMPORTED_LOCATION "${DTW_BLAS_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${DTW_CBLAS_INCLUDE_DIR}")
endif()
message(STATUS "dtw BLAS: ${DTW_BLAS_LIBRARY}")

# Optional peers and backends.
find_package(Gloo CONFIG QUIET)
set(DTW_HAVE_GLOO ${Gloo_FOUND})
find_package(MPI QUIET COMPONENTS CXX)
set(DTW_HAVE_MPI ${MPI_CXX_FOUND})

# CUDA and NCCL: AUTO uses them when a CUDA compiler is found, ON insists, OFF
# skips the search. The CUDA language is only enabled when found, so a machine
# without the toolkit configures and builds the CPU parts unchanged.
set(DTW_ENABLE_CUDA AUTO CACHE STRING "Build CUDA/NCCL parts: AUTO, ON or OFF")
set_property(CACHE DTW_ENABLE_CUDA PROPERTY STRINGS AUTO ON OFF)
set(DTW_HAVE_CUDA OFF)
set(DTW_HAVE_NCCL OFF)
if(NOT DTW_ENABLE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Ampere (80) and Hopper (90) only: each extra architecture is another full
    # device compile of every .cu file. Override with -DCMAKE_CUDA_ARCHITECTURES.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to compile for" FORCE)
    endif()
    # nvcc hands host code to the same compiler as the C++ sources.
    if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
      set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "Host compiler of nvcc")
    endif()
    enable_language(CUDA)
    # CUDA sources follow CMAKE_CXX_STANDARD (20), but CMake 3.25 does not know
    # that nvcc 12+ takes -std=c++20; teach it (newer CMake knows already).
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    find_package(CUDAToolkit)
  endif()
  if(CUDAToolkit_FOUND)
    set(DTW_HAVE_CUDA ON)
    # NCCL ships beside the toolkit here, or in a system folder elsewhere.
    find_path(DTW_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
              PATH_SUFFIXES include)
    find_library(DTW_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
                 PATH_SUFFIXES lib lib64)
    if(DTW_NCCL_INCLUDE_DIR AND DTW_NCCL_LIBRARY)
      set(DTW_HAVE_NCCL ON)
      if(NOT TARGET dtw::libnccl)
        add_library(dtw::libnccl UNKNOWN IMPORTED)
        set_target_properties(dtw::libnccl PROPERTIES IMPORTED_LOCATION "${DTW_NCCL_LIBRARY}"
                              INTERFACE_INCLUDE_DIRECTORIES "${DTW_NCCL_INCLUDE_DIR}")
        target_link_libraries(dtw::libnccl INTERFACE CUDA::cudart)
      endif()
    endif()
  elseif(DTW_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DTW_ENABLE_CUDA=ON but no CUDA compiler/toolkit was found "
                        "(put nvcc on PATH or set CMAKE_CUDA_COMPILER)")
  endif()
endif()
message(STATUS "dtw optional parts: MPI=${DTW_HAVE_MPI} Gloo=${DTW_HAVE_GLOO} "
               "CUDA=${DTW_HAVE_CUDA} NCCL=${DTW_HAVE_NCCL}")
