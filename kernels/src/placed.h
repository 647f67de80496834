#pragma once
// What the Place overloads (placed.cpp, placed_layers.cpp) share: making a
// Place's device current (defined in cuda/make_current.cu, so only a build
// with CUDA links it) and the one branch that calls it.

#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/kernels/place.h"

namespace dtw::kernels::detail {

/// Makes `at.device` the calling thread's current CUDA device (the device_*
/// kernels run on the current one). Raises dtw::CudaError naming `kernel`, the
/// place and CUDA's error when it cannot (no device, a number out of range).
void make_current(const Place& at, const char* kernel);

// Runs `run(stream)` on `at`'s device (made current first), or raises: a
// device Place in a build without CUDA is the caller's mistake to hear about,
// named by kernel and place, not a missing symbol or a silent host run. Each
// caller's `run` is a generic lambda, so only this branch instantiates the
// device call and a build without CUDA links no device symbol.
template <class Run>
void on_device(const Place& at, const char* kernel, Run&& run) {
  if constexpr (DTW_HAVE_CUDA) {
    make_current(at, kernel);
    run(at.stream);
  } else {
    (void)run;
    DTW_CHECK_ARG(false, "kernels::" << kernel << " on " << at.describe()
                                     << ": this dtw was built without CUDA (CMake found no "
                                        "toolkit, or DTW_ENABLE_CUDA=OFF); only the host runs");
  }
}

}  // namespace dtw::kernels::detail
