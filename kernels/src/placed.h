#pragma once
// What the Place overloads (placed.cpp) need from the CUDA side: making a
// Place's device current. Defined in cuda/make_current.cu, so only a build with
// CUDA links it (placed.cpp calls it in a branch only that build compiles).

#include "dtw/kernels/place.h"

namespace dtw::kernels::detail {

/// Makes `at.device` the calling thread's current CUDA device (the device_*
/// kernels run on the current one). Raises dtw::CudaError naming `kernel`, the
/// place and CUDA's error when it cannot (no device, a number out of range).
void make_current(const Place& at, const char* kernel);

}  // namespace dtw::kernels::detail
