# cmake --install <build> --prefix P: dtw's public headers (with the generated
# dtw/config.h), its libraries, the dtw program, and the package files with
# which another project's find_package(dtw) gets the namespaced targets:
#   dtw::core     the runtime: Comm, launch, the threads backend, Array, trace
#   dtw::kernels  the host (Kokkos, BLAS) kernels; dtw::base under both
#   dtw::model    the model substrate; dtw::train the training layer
#   dtw::chNN     chapter NN's reference solution (its contract header included)
#   dtw::mpi      the mpi backend, where built (links MPI); dtw::nccl likewise
# (README, "Using dtw as a library"; docs/architecture.md says why the
# backends are libraries of their own).
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DTW_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/dtw" CACHE STRING
  "Where cmake --install puts dtwConfig.cmake, relative to the prefix")

# Public headers: every library's include/ folder, and the generated config.h.
install(DIRECTORY
    "${PROJECT_SOURCE_DIR}/base/include/"
    "${PROJECT_SOURCE_DIR}/kernels/include/"
    "${PROJECT_SOURCE_DIR}/core/include/"
    "${PROJECT_SOURCE_DIR}/model/include/"
    "${PROJECT_SOURCE_DIR}/train/include/"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT dtw_development
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES "${PROJECT_BINARY_DIR}/base/generated/dtw/config.h"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/dtw" COMPONENT dtw_development)

# The libraries every program may link, in one export set.
set(_dtw_exported dtw_base dtw_kernels dtw_core dtw_model dtw_train)
if(TARGET dtw_kernels_cuda)
  list(APPEND _dtw_exported dtw_kernels_cuda)
endif()
# Each chapter's solution library as dtw::chNN, its contract headers in
# include/dtw/chapters/NN-x (the library's include folder once installed).
get_property(_dtw_ids GLOBAL PROPERTY DTW_CHAPTER_IDS)
get_property(_dtw_names GLOBAL PROPERTY DTW_CHAPTER_NAMES)
foreach(_dtw_id _dtw_name IN ZIP_LISTS _dtw_ids _dtw_names)
  list(APPEND _dtw_exported dtw_ch${_dtw_id}_solution)
  file(GLOB _dtw_contract "${PROJECT_SOURCE_DIR}/chapters/${_dtw_name}/*.h")
  install(FILES ${_dtw_contract}
    DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/dtw/chapters/${_dtw_name}"
    COMPONENT dtw_development)
endforeach()
install(TARGETS ${_dtw_exported} EXPORT dtwTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dtw_development
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dtw_runtime
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT dtw_runtime
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(EXPORT dtwTargets NAMESPACE dtw:: DESTINATION "${DTW_INSTALL_CMAKEDIR}"
  COMPONENT dtw_development)

# The optional backends, each in an export set of its own, so that
# find_package(dtw) needs MPI (or CUDA and NCCL) only for the project that
# asks for that backend.
foreach(_dtw_backend mpi nccl)
  if(TARGET dtw_${_dtw_backend})
    install(TARGETS dtw_${_dtw_backend} EXPORT dtw_${_dtw_backend}Targets
      ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dtw_development
      LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dtw_runtime)
    install(EXPORT dtw_${_dtw_backend}Targets NAMESPACE dtw::
      DESTINATION "${DTW_INSTALL_CMAKEDIR}" COMPONENT dtw_development)
  endif()
endforeach()

# The dtw program (run and train work from anywhere; check, list, hint, diff,
# bench and run --lab find the build folder it was built in).
if(TARGET dtw)
  install(TARGETS dtw RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT dtw_runtime)
endif()

# What the package file must recreate: the imported targets the libraries'
# link interfaces name, found the same way as here.
set(DTW_CONFIG_BLAS_LIBRARY "${DTW_BLAS_LIBRARY}")
set(DTW_CONFIG_CBLAS_INCLUDE_DIR "${DTW_CBLAS_INCLUDE_DIR}")
set(DTW_CONFIG_NCCL_LIBRARY "${DTW_NCCL_LIBRARY}")
set(DTW_CONFIG_NCCL_INCLUDE_DIR "${DTW_NCCL_INCLUDE_DIR}")
set(DTW_CONFIG_CUDA_ROOT "")
if(DTW_HAVE_CUDA)
  get_filename_component(DTW_CONFIG_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/dtwConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/dtwConfig.cmake" INSTALL_DESTINATION "${DTW_INSTALL_CMAKEDIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/dtwConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/dtwConfig.cmake" "${PROJECT_BINARY_DIR}/dtwConfigVersion.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/DtwKokkos.cmake"
  DESTINATION "${DTW_INSTALL_CMAKEDIR}" COMPONENT dtw_development)
