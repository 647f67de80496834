#pragma once
// The threads backend with device buffers (LaunchOptions::device "cuda"): what
// the backend asks of the CUDA runtime, behind an interface with no CUDA type,
// so the threads code compiles the same in every build. cuda_ranks.cpp
// implements it where CUDA was found; no_cuda_ranks.cpp elsewhere (launch
// refuses "cuda" there before any of this is reached).
//
// Ordering of a message between ranks (the protocol; docs/gpu.md, "Ranks that
// share one GPU"):
//   1. The sender, posting its send, records an event on its own stream
//      (ready_marker): the point after every kernel and copy it queued before
//      the send.
//   2. The receiver copies (World queues every message of a device world that
//      carries data as a copy job of its receiver, so the copy runs on the
//      receiver's thread, whose current device is its GPU): its stream waits
//      for the sender's event, then the copy (or the reduction of recv_reduce)
//      is queued on the receiver's stream, and the receiver waits for that
//      stream to finish.
//   3. Only then are both sides marked done: the receive completes once the
//      data landed, and the sender may overwrite its buffer once its send
//      returns, as on the host.
// Host memory on either side works too (the runtime's own messages, chapter
// 00's std::vectors): the copy is then a host/device copy on the same stream,
// or a memcpy after waiting for the sender's event when both are host memory.
#include <cstdint>
#include <memory>
#include <string>

#include "dtw/exec.h"
#include "dtw/types.h"

namespace dtw::threads {

struct Op;

class DeviceRanks {
 public:
  virtual ~DeviceRanks() = default;

  // The device rank r runs on: r % (number of devices).
  virtual int device_of(int rank) const = 0;
  // Called on rank r's thread before its function runs: makes the rank's
  // device the thread's current one and creates the rank's stream. Returns
  // the rank's Exec (that device and stream, counted in `ledger`).
  virtual Exec open_rank(int rank, std::shared_ptr<MemoryLedger> ledger) = 0;
  // Called on rank r's thread once its communicators are gone: releases the stream.
  virtual void close_rank(int rank) noexcept = 0;

  // True for device or managed memory, false for host memory (and for count 0).
  virtual bool on_device(const void* p) const = 0;
  // Step 1 above: an event recorded on `sender`'s stream, destroyed with the
  // returned handle.
  virtual std::shared_ptr<void> ready_marker(const Exec& sender) = 0;
  // Steps 2 and 3 (but the marking done): copies or reduces `send`'s data
  // into `recv`'s buffer on recv's stream and waits for it. Returns "" or a
  // description of the CUDA failure naming both ranks; never throws (it runs
  // with the World's bookkeeping half done).
  virtual std::string transfer(const Op& send, const Op& recv) noexcept = 0;

  // Comm's local steps on the rank's stream, waited for (as the nccl
  // backend's): InvalidArgument naming `who` and the pointer for host memory
  // where device memory is required. Arguments arrive checked, count > 0.
  virtual void copy_local(const Exec& exec, const std::string& who, Buffer dst,
                          ConstBuffer src) = 0;
  virtual void divide_local(const Exec& exec, const std::string& who, Buffer data, int divisor) = 0;
  // Device inout: the reduce kernel (in must be device memory); host inout
  // with device in: `in` copied to the host, reduced there; both host: the
  // host kernel.
  virtual void reduce_local(const Exec& exec, const std::string& who, Buffer inout, ConstBuffer in,
                            ReduceOp op) = 0;
  // Host <-> device copies of `bytes` for staging (the reference
  // collectives), on the Exec's stream, waited for.
  virtual void to_host(const Exec& exec, void* host, const void* p, std::int64_t bytes) = 0;
  virtual void from_host(const Exec& exec, void* p, const void* host, std::int64_t bytes) = 0;
};

// The CUDA implementation for a world of `world_size` ranks: CudaError naming
// the world when the machine has no CUDA device (InvalidArgument in a build
// without CUDA).
std::shared_ptr<DeviceRanks> make_device_ranks(int world_size);

}  // namespace dtw::threads
