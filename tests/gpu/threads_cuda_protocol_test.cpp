// The threads backend with device buffers (LaunchOptions::device "cuda")
// against a fake CUDA runtime with lazy streams (fake_cuda_streams.cpp): no
// GPU needed, so this runs wherever CUDA is built. It checks the ordering
// protocol of device_ranks.h -- a message's copy waits for the work the
// sender queued before its send, a receive completes only once its data
// landed, the sender may overwrite its buffer once its send returned --
// where getting it wrong fails on every run, as the fake runs queued work
// only when something waits for it. Buffers are read straight from the host
// (fake device memory is host memory), never through a call that would wait
// for the stream first and hide a missing wait.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dtw/dtw.h"
#include "fake_cuda_streams.h"

namespace dtw {
namespace {

LaunchOptions fake_devices() {
  LaunchOptions options;
  options.device = "cuda";
  options.timeout = std::chrono::seconds(20);
  return options;
}

std::vector<float> values(int seed, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(seed * 1000 + static_cast<int>(i));
  return v;
}

// What the memory holds now, without waiting for any stream.
std::vector<float> raw(const void* p, std::size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), p, n * sizeof(float));
  return v;
}

class ThreadsCudaProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_cuda::reset(1); }
};

constexpr std::size_t kN = 1000;

// Every way a message moves: send/recv, sendrecv, isend/irecv with wait, irecv
// completed by polling with test. Each time rank 0 queues a "kernel" writing
// the message right before posting, and overwrites its buffer from the host
// the moment the call returned; rank 1 queues a write of its own buffer
// before the receive (the copy must land after it) and reads the buffer as
// soon as the receive returned.
TEST_F(ThreadsCudaProtocolTest, CopiesWaitForTheSenderAndReceivesForTheCopy) {
  const Report report = launch(2, fake_devices(), [](Comm& comm) {
    Array<float> buf(comm.exec(), values(0, kN)), other(comm.exec(), values(0, kN));
    void* stream = comm.exec().stream();
    for (int round = 0; round < 4; ++round) {
      const std::string what = "round " + std::to_string(round);
      if (comm.rank() == 0) {
        fake_cuda::queue_write(stream, buf.data(), values(10 + round, kN));
        if (round == 0) comm.send(buf, 1);
        if (round == 1) comm.sendrecv(buf, 1, other, 1);
        if (round >= 2) {
          Request s = comm.isend(buf, 1);
          comm.wait(s);
        }
        std::memset(buf.data(), 0xff, kN * sizeof(float));  // the copy is over: harmless
      } else {
        fake_cuda::queue_write(stream, buf.data(), values(-1, kN));
        if (round == 0) comm.recv(buf, 0);
        if (round == 1) comm.sendrecv(other, 0, buf, 0);
        if (round == 2) {
          Request r = comm.irecv(buf, 0);
          comm.wait(r);
        }
        if (round == 3) {
          Request r = comm.irecv(buf, 0);
          while (!comm.test(r)) {
          }
        }
        EXPECT_EQ(raw(buf.data(), kN), values(10 + round, kN)) << what;
      }
    }
  });
  EXPECT_TRUE(report.ok());
  const fake_cuda::Counters seen = fake_cuda::counters();
  EXPECT_EQ(seen.streams, 2) << "one stream per rank";
  EXPECT_GE(seen.events_recorded, 4) << "one event per send";
  EXPECT_GE(seen.stream_waits, 4) << "the receiver's stream waits for the sender's event";
}

// Host memory in a device world: a host buffer filled by a copy the sender
// queued on its stream is sent only once that copy ran; a device message
// reduced into host memory (recv_reduce) lands before the call returns.
TEST_F(ThreadsCudaProtocolTest, HostBuffersWaitForTheSendersStreamToo) {
  launch(2, fake_devices(), [](Comm& comm) {
    Array<float> dev(comm.exec(), values(0, kN));
    std::vector<float> host(kN, -5.0f);
    cudaStream_t stream = static_cast<cudaStream_t>(comm.exec().stream());
    if (comm.rank() == 0) {
      fake_cuda::queue_write(stream, dev.data(), values(3, kN));
      cudaMemcpyAsync(host.data(), dev.data(), kN * sizeof(float), cudaMemcpyDeviceToHost, stream);
      comm.send(host, 1);
      fake_cuda::queue_write(stream, dev.data(), values(4, kN));
      comm.send(dev, 1, 1);
    } else {
      comm.recv(host, 0);
      EXPECT_EQ(host, values(3, kN)) << "host to host";
      std::vector<float> acc(kN, 1.0f), want = values(4, kN);
      for (float& x : want) x += 1.0f;
      comm.recv_reduce(acc, 0, ReduceOp::kSum, 1);
      EXPECT_EQ(acc, want) << "device message reduced into host memory";
    }
  });
}

TEST_F(ThreadsCudaProtocolTest, LocalCopiesAndReferenceCollectivesUseTheDevice) {
  launch(3, fake_devices(), [](Comm& comm) {
    const Array<float> src(comm.exec(), values(comm.rank(), kN));
    Array<float> dst(comm.exec(), kN);
    comm.copy_local(dst.span(), std::span<const float>(src.span()));
    EXPECT_EQ(raw(dst.data(), kN), values(comm.rank(), kN))
        << "copy_local returned before its copy ran";
    std::vector<float> host(kN);
    try {
      comm.copy_local(std::span<float>(host), std::span<const float>(src.span()));
      ADD_FAILURE() << "copy_local into host memory was not refused";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(
          std::string(e.what()).find("rank " + std::to_string(comm.rank()) + ": copy_local: dst ("),
          std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("1000 float32) is host memory"), std::string::npos)
          << e.what();
    }
    Array<float> sum(comm.exec(), values(comm.rank(), kN));
    comm.reference_allreduce(Buffer{sum.data(), static_cast<std::int64_t>(kN), DataType::kFloat32},
                             ReduceOp::kSum);
    std::vector<float> want(kN);
    for (int r = 0; r < 3; ++r)
      for (std::size_t i = 0; i < kN; ++i) want[i] += values(r, kN)[i];
    EXPECT_EQ(raw(sum.data(), kN), want) << "reference allreduce, staged through the host";
  });
}

// Two fake GPUs, three ranks: rank r on device r % 2, so 0 -> 1 and 1 -> 2
// cross devices (peer copies, pools opened to the peer) and 2 -> 0 does not.
TEST_F(ThreadsCudaProtocolTest, RanksSpreadOverTheDevicesAndCopyBetweenThemAsPeers) {
  fake_cuda::reset(2);
  const Report report = launch(3, fake_devices(), [](Comm& comm) {
    EXPECT_EQ(comm.exec().device(), comm.rank() % 2);
    const int p = comm.size(), r = comm.rank();
    const Array<float> out(comm.exec(), values(r, kN));
    Array<float> in(comm.exec(), kN);
    comm.sendrecv(out, (r + 1) % p, in, (r + p - 1) % p);
    EXPECT_EQ(raw(in.data(), kN), values((r + p - 1) % p, kN));
  });
  EXPECT_EQ(report.places, (std::vector<std::string>{"cuda:0", "cuda:1", "cuda:0"}));
  EXPECT_EQ(fake_cuda::counters().peer_copies, 2);
  EXPECT_GT(fake_cuda::counters().pool_grants, 0);
}

TEST_F(ThreadsCudaProtocolTest, TheDeadlockDetectorSeesDeviceSends) {
  try {
    launch(2, fake_devices(), [](Comm& comm) {
      const Array<float> out(comm.exec(), values(comm.rank(), kN));
      comm.send(out, 1 - comm.rank(), 7);  // both send first: synchronous sends deadlock
    });
    ADD_FAILURE() << "no deadlock reported";
  } catch (const DeadlockError& e) {
    EXPECT_NE(std::string(e.what()).find("tag 7"), std::string::npos) << e.what();
  }
}

TEST_F(ThreadsCudaProtocolTest, NoDeviceRefusesTheLaunchBeforeAnyRankRuns) {
  fake_cuda::reset(0);
  bool ran = false;
  try {
    launch(3, fake_devices(), [&](Comm&) { ran = true; });
    ADD_FAILURE() << "a launch on no device was not refused";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("launch: device 'cuda' (threads backend, world of 3): no "
                                         "CUDA device (no CUDA-capable device is detected (fake))"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace dtw
