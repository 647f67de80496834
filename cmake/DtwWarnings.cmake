# Warnings for dtw's own targets: dtw_target_warnings(<target>).
# Third-party headers come in as SYSTEM includes, so their warnings stay quiet.
function(dtw_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
      -Woverloaded-virtual -Wno-missing-field-initializers>)
  if(DTW_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()

# Sanitizers for the whole build: -DDTW_SANITIZE=address,undefined or thread
# (the asan and tsan presets set it). The flags go into CMAKE_CXX_FLAGS and the
# linker flags, so every target is instrumented alike and code that needs to
# know (tests scaling down under TSan) can see them there.
set(DTW_SANITIZE "" CACHE STRING "Sanitizers to build with (e.g. address,undefined or thread)")
if(DTW_SANITIZE)
  set(_dtw_san "-fsanitize=${DTW_SANITIZE} -fno-omit-frame-pointer")
  if(DTW_SANITIZE MATCHES "undefined")
    # A UBSan finding must fail the test, not scroll past.
    string(APPEND _dtw_san " -fno-sanitize-recover=undefined")
  endif()
  # GCC 12's flow analysis sees through sanitizer instrumentation badly and
  # reports -Wmaybe-uninitialized inside libstdc++'s <regex>; it is a known
  # false positive there, so that one warning is off in sanitizer builds only.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    string(APPEND _dtw_san " -Wno-maybe-uninitialized")
    # Kokkos 4's headers (desul atomics, inlined into dtw's code through
    # Kokkos::Serial's shared instance pointer) call atomic_thread_fence, which
    # GCC warns ThreadSanitizer does not model (-Wtsan); under -Werror that
    # stopped every TSan build against Kokkos 4 (docs/kokkos4.md).
    if(DTW_SANITIZE MATCHES "thread")
      string(APPEND _dtw_san " -Wno-tsan")
    endif()
  endif()
  string(APPEND CMAKE_CXX_FLAGS " ${_dtw_san}")
  foreach(kind EXE SHARED MODULE)
    string(APPEND CMAKE_${kind}_LINKER_FLAGS " ${_dtw_san}")
  endforeach()
  message(STATUS "dtw: sanitizers ${DTW_SANITIZE}")
endif()

# Machinery compiles at -O1 in optimised builds (Release; RelWithDebInfo, which
# the sanitizer presets use): dtw_machinery(<target>).
# Tests, planted bugs and the dtw program's own files time nothing and compute
# little (the code they exercise lives in the -O3 libraries and solutions), yet
# they were two thirds of a clean build's compile time; -O1 compiles them 20-40%
# faster than -O3. What is timed or trained -- core, kernels, model, train, the
# chapters' solutions and labs, the benchmark programs -- stays at -O3.
# A target that reuses another's precompiled headers must be marked alike.
function(dtw_machinery target)
  target_compile_options(${target} PRIVATE
    $<$<AND:$<CONFIG:Release,RelWithDebInfo>,$<COMPILE_LANGUAGE:CXX>>:-O1>)
endfunction()
