// Builds without CUDA: the threads backend has no device buffers. launch
// refuses LaunchOptions::device "cuda" before it gets here (launch.cpp); this
// says the same should anything else ask.
#include "dtw/errors.h"
#include "threads/device_ranks.h"

namespace dtw::threads {

std::shared_ptr<DeviceRanks> make_device_ranks(int world_size) {
  DTW_CHECK_ARG(false, "launch: device 'cuda' (threads backend, world of "
                           << world_size
                           << "): this build has no CUDA (configure where the CUDA toolkit is "
                              "installed, with -DDTW_ENABLE_CUDA=ON)");
  return nullptr;
}

}  // namespace dtw::threads
