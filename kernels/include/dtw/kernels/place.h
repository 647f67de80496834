#pragma once
/// @file
/// `dtw::kernels::Place`: where a kernel runs -- the host, or a CUDA device and
/// a stream on it.
///
/// Every training kernel has an overload taking a Place first (declared beside
/// the host kernel in its family's header). On the host it is the host kernel,
/// which is done when it returns; on a device it is the kernel's CUDA twin
/// (cuda_*.h), made current on the Place's device and enqueued on its stream,
/// returning before it finishes (the few that return a value -- the loss, a
/// sum of squares, a clipped norm -- wait for it). So code above the kernels
/// calls one function and never asks where its memory is: a rank's
/// `dtw::Exec` (dtw/exec.h) hands out its Place, and every pointer passed
/// must live there. In a build without CUDA a device Place raises
/// InvalidArgument naming the kernel and the place.

#include <string>

namespace dtw::kernels {

/// The host, or CUDA device `device` with `stream`. Cheap to copy.
struct Place {
  int device = -1;         ///< the CUDA device number; -1 for the host
  void* stream = nullptr;  ///< the cudaStream_t work is ordered on (nullptr: the default stream)

  /// The host.
  static Place host() { return {}; }
  /// CUDA device `device` (>= 0) and its `stream`.
  static Place cuda(int device, void* stream = nullptr) { return {device, stream}; }
  /// True on the host.
  bool is_host() const { return device < 0; }
  /// The same device and the same stream (two Places that order work alike).
  bool operator==(const Place&) const = default;
  /// "host" or "cuda:1".
  std::string describe() const {
    return is_host() ? std::string("host") : "cuda:" + std::to_string(device);
  }
};

}  // namespace dtw::kernels
