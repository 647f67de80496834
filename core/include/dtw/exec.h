#pragma once
/// @file
/// `dtw::Exec`: where memory lives and where work on it runs -- the host, or a
/// CUDA device with a stream -- and which memory ledger counts it.

#include <memory>
#include <string>

#include "dtw/kernels/place.h"
#include "dtw/memory.h"

namespace dtw {

/// A place to allocate and to run: the host, or CUDA device `device()` with
/// its stream. Cheap to copy (a device number, a stream handle and a shared
/// ledger). `Comm::exec()` gives a rank's: the host with the rank's ledger on
/// the threads and mpi backends, the rank's GPU and stream on nccl and on
/// threads with device buffers (LaunchOptions::device "cuda").
class Exec {
 public:
  /// The host, counted in no ledger.
  Exec() = default;
  /// The host, counted in no ledger.
  static Exec host() { return Exec(); }
  /// CUDA device `device` (>= 0; InvalidArgument otherwise) and its `stream`
  /// (a cudaStream_t; nullptr is the default stream), counted in no ledger.
  /// Describing a device needs no CUDA; allocating on it does (an Array of
  /// n > 0 on a device Exec throws InvalidArgument in a build without CUDA).
  static Exec cuda(int device, void* stream = nullptr);

  /// The same place, counted in `ledger` (nullptr: not counted). The ledger is
  /// shared: it lives as long as any Exec or Array that counts into it.
  Exec with_ledger(std::shared_ptr<MemoryLedger> ledger) const {
    Exec e = *this;
    e.ledger_ = std::move(ledger);
    return e;
  }

  /// True for host memory.
  bool is_host() const { return device_ < 0; }
  /// The CUDA device number, -1 for the host.
  int device() const { return device_; }
  /// The cudaStream_t work is ordered on (nullptr: the default stream; always
  /// nullptr on the host).
  void* stream() const { return stream_; }
  /// Where kernels on this Exec's memory run: the host, or the device and
  /// stream (dtw/kernels/place.h; every training kernel takes one first).
  kernels::Place place() const { return {device_, stream_}; }
  /// The ledger allocations are counted in, or nullptr when not counted.
  MemoryLedger* ledger() const { return ledger_.get(); }
  /// The ledger as shared with this Exec (for making another Exec that counts there).
  const std::shared_ptr<MemoryLedger>& shared_ledger() const { return ledger_; }

  /// True when memory of `a` and `b` is in the same place (both host, or the
  /// same device); streams and ledgers may differ.
  friend bool same_place(const Exec& a, const Exec& b) { return a.device_ == b.device_; }
  /// "host" or "cuda:1".
  std::string describe() const {
    return is_host() ? std::string("host") : "cuda:" + std::to_string(device_);
  }

 private:
  int device_ = -1;
  void* stream_ = nullptr;
  std::shared_ptr<MemoryLedger> ledger_;
};

}  // namespace dtw
