#pragma once
// The test side of fake_cuda_streams.cpp: a fake CUDA runtime with lazy
// streams (see there), for checking the threads backend's device ordering
// without a GPU.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace fake_cuda {

/// What the fake has seen since the last reset.
struct Counters {
  int streams = 0;          ///< streams created
  int events_recorded = 0;  ///< cudaEventRecord calls
  int stream_waits = 0;     ///< cudaStreamWaitEvent calls
  int peer_copies = 0;      ///< cudaMemcpyPeerAsync calls
  int pool_grants = 0;      ///< devices granted access to another's pool
};

/// Sets the number of fake devices (0: none) and clears the counters.
void reset(int devices);
Counters counters();
/// Queues, on `stream`, a write of `values` to `dst`: a stand-in for a kernel
/// the rank launched, which runs only when the stream is made to run.
void queue_write(void* stream, void* dst, std::vector<float> values);
/// True for memory the fake cudaMallocAsync handed out and has not freed.
bool is_device(const void* p);

}  // namespace fake_cuda
