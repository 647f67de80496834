// The nccl backend against a fake NCCL and a fake CUDA runtime, on the host:
// no GPU needed, so this runs wherever the backend is built. The fake holds
// the backend to NCCL's rule for non-blocking communicators -- once a call on
// a communicator returned ncclInProgress (the init, ncclGroupEnd, a
// collective, a split, finalize), nothing but ncclCommGetAsyncError and
// ncclCommAbort may be called on it until that stops reporting ncclInProgress
// -- by answering ncclInProgress to every such call and staying in progress
// for a few polls. A call made too early is recorded as a violation; a real
// NCCL might then hang, fail or corrupt a message, and only on some runs.
//
// The fakes replace the real functions because the test program defines them:
// the backend's calls bind to these, not to libnccl and libcudart (which stay
// linked, unused). Memory is host memory; "device" pointers are the ones the
// fake cudaMalloc handed out. Only worlds of one rank: messages to oneself.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "dtw/dtw.h"

namespace {

constexpr int kBusyPolls = 3;  // polls a communicator stays in progress after a call

std::mutex g_mu;
std::vector<std::string> g_violations;      // NCCL calls made while in progress
std::map<std::uintptr_t, std::size_t> g_device;  // fake device allocations: start -> bytes
std::set<std::pair<int, int>> g_pool_access;     // (pool's device, device granted access)
int g_devices = 1;
thread_local int t_device = 0;

struct Pending {
  enum Kind { kSend, kRecv, kCollective } kind;
  ncclComm_t comm;
  void* buf;
  std::size_t bytes;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_group;

std::size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

bool is_device(const void* p) {
  std::lock_guard lock(g_mu);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = g_device.upper_bound(a);
  if (it == g_device.begin()) return false;
  --it;
  return a < it->first + std::max<std::size_t>(it->second, 1);
}

}  // namespace

// ---- the fake NCCL ----------------------------------------------------------
struct ncclComm {
  int rank = 0;
  int nranks = 1;
  int busy = 0;  // polls left before the last call settles
  bool gone = false;
};

namespace {
// Every NCCL call on `comm` other than ncclCommGetAsyncError and ncclCommAbort.
void enter(ncclComm_t comm, const char* call) {
  std::lock_guard lock(g_mu);
  if (comm->gone) g_violations.push_back(std::string(call) + " on a destroyed communicator");
  else if (comm->busy > 0) g_violations.push_back(std::string(call) + " while the communicator was in progress");
}
ncclResult_t start_work(ncclComm_t comm) {
  comm->busy = kBusyPolls;
  return ncclInProgress;
}
// A world of one: each send meets the next receive, in posting order.
void run_group(std::vector<Pending>& ops) {
  std::vector<Pending*> sends, recvs;
  for (auto& op : ops)
    if (op.kind != Pending::kCollective) (op.kind == Pending::kSend ? sends : recvs).push_back(&op);
  for (std::size_t i = 0; i < recvs.size() && i < sends.size(); ++i)
    std::memmove(recvs[i]->buf, sends[i]->buf, std::min(recvs[i]->bytes, sends[i]->bytes));
  for (auto& op : ops) op.comm->busy = kBusyPolls;
  ops.clear();
}
ncclResult_t collective(ncclComm_t comm, const char* call, const void* in, void* out, std::size_t bytes) {
  enter(comm, call);
  if (in != out && bytes > 0) std::memmove(out, in, bytes);
  if (t_group_depth > 0) {  // in a group: in progress from the group's end
    t_group.push_back({Pending::kCollective, comm, nullptr, 0});
    return ncclSuccess;
  }
  return start_work(comm);
}
}  // namespace

extern "C" {
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank, ncclConfig_t*) {
  *comm = new ncclComm{rank, nranks, 0, false};
  return start_work(*comm);
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (comm == nullptr) return ncclInvalidArgument;
  std::lock_guard lock(g_mu);
  *state = comm->busy > 0 ? ncclInProgress : ncclSuccess;
  if (comm->busy > 0) --comm->busy;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm) comm->gone = true;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  enter(comm, "ncclCommFinalize");
  return start_work(comm);
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  enter(comm, "ncclCommDestroy");
  comm->gone = true;
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  enter(comm, "ncclCommSplit");
  *newcomm = color == NCCL_SPLIT_NOCOLOR ? nullptr : new ncclComm{key, 1, kBusyPolls, false};
  return start_work(comm);
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  enter(comm, "ncclCommUserRank");
  *rank = comm->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  enter(comm, "ncclCommCount");
  *count = comm->nranks;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
const char* ncclGetLastError(ncclComm_t) { return ""; }
ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (--t_group_depth > 0) return ncclSuccess;
  const bool any = !t_group.empty();
  run_group(t_group);
  return any ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int, ncclComm_t comm, cudaStream_t) {
  enter(comm, "ncclSend");
  t_group.push_back({Pending::kSend, comm, const_cast<void*>(buf), count * type_bytes(type)});
  if (t_group_depth == 0) run_group(t_group);
  return ncclSuccess;
}
ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int, ncclComm_t comm, cudaStream_t) {
  enter(comm, "ncclRecv");
  t_group.push_back({Pending::kRecv, comm, buf, count * type_bytes(type)});
  if (t_group_depth == 0) run_group(t_group);
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t, ncclComm_t comm,
                           cudaStream_t) {
  return collective(comm, "ncclAllReduce", in, out, n * type_bytes(t));
}
ncclResult_t ncclBroadcast(const void* in, void* out, size_t n, ncclDataType_t t, int, ncclComm_t comm, cudaStream_t) {
  return collective(comm, "ncclBroadcast", in, out, n * type_bytes(t));
}
ncclResult_t ncclReduce(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t comm,
                        cudaStream_t) {
  return collective(comm, "ncclReduce", in, out, n * type_bytes(t));
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t) {
  return collective(comm, "ncclAllGather", in, out, n * type_bytes(t));
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t, ncclComm_t comm,
                               cudaStream_t) {
  return collective(comm, "ncclReduceScatter", in, out, n * type_bytes(t));
}

// ---- the fake CUDA runtime: host memory, work done at once ------------------
cudaError_t cudaGetDeviceCount(int* count) {
  *count = g_devices;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= g_devices) return cudaErrorInvalidDevice;
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t) { return "fakeCudaError"; }
const char* cudaGetErrorString(cudaError_t) { return "fake CUDA error"; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(new char);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<char*>(event);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(std::max<size_t>(bytes, 1));
  std::lock_guard lock(g_mu);
  g_device[reinterpret_cast<std::uintptr_t>(*p)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  {
    std::lock_guard lock(g_mu);
    g_device.erase(reinterpret_cast<std::uintptr_t>(p));
  }
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) { return cudaMemset(p, value, bytes); }
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* p) {
  *attr = cudaPointerAttributes{};
  attr->type = is_device(p) ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  *pool = reinterpret_cast<cudaMemPool_t>(static_cast<std::uintptr_t>(device) + 1);
  return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  *can = device != peer ? 1 : 0;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* list, size_t count) {
  std::lock_guard lock(g_mu);
  const int owner = static_cast<int>(reinterpret_cast<std::uintptr_t>(pool)) - 1;
  for (size_t i = 0; i < count; ++i)
    if (list[i].flags == cudaMemAccessFlagsProtReadWrite) g_pool_access.insert({owner, list[i].location.id});
  return cudaSuccess;
}
}  // extern "C"

namespace dtw {
namespace {

LaunchOptions fake_nccl() {
  LaunchOptions options;
  options.backend = "nccl";
  options.timeout = std::chrono::seconds(10);
  return options;
}

class NcclProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::lock_guard lock(g_mu);
    g_violations.clear();
    g_pool_access.clear();
    g_devices = 1;
  }
  static std::string violations() {
    std::lock_guard lock(g_mu);
    std::string all;
    for (const auto& v : g_violations) all += "\n  " + v;
    return all;
  }
};

// Every path that ends one NCCL call and begins another: a wait right after a
// queued send (the group, then nothing), the barrier's allreduce right after a
// group, a reference collective after queued point-to-point, polling with
// test() while NCCL is busy, a split and a dup after a group, the
// communicator's finalize. Each returns the right data, and no NCCL call is
// made on a communicator still in progress.
TEST_F(NcclProtocolTest, NoNcclCallWhileTheCommunicatorIsInProgress) {
  const Report report = launch(1, fake_nccl(), [](Comm& comm) {
    std::vector<std::int64_t> out{1, 2, 3}, in(3, 0);
    comm.sendrecv(out, 0, in, 0);  // staged through fake device memory
    EXPECT_EQ(in, out);

    Request r = comm.isend(out, 0, 1);  // queued; the barrier launches it, then allreduces
    std::vector<std::int64_t> in2(3, 0);
    Request q = comm.irecv(in2, 0, 1);
    comm.barrier();
    comm.wait(r);
    comm.wait(q);
    EXPECT_EQ(in2, out);

    Array<float> a(comm.exec(), 64), b(comm.exec(), 64);
    std::vector<float> values(64);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
    a.upload(values);
    Request s = comm.isend(std::span<const float>(a.data(), 64), 0, 2);
    Request t = comm.irecv(std::span<float>(b.data(), 64), 0, 2);
    // The first test() launches the group, which leaves the communicator in
    // progress; the next pair must stay queued until it settles, however
    // often test() is called meanwhile.
    comm.test(t);
    Array<float> c(comm.exec(), 64);
    Request s2 = comm.isend(std::span<const float>(a.data(), 64), 0, 5);
    Request t2 = comm.irecv(std::span<float>(c.data(), 64), 0, 5);
    while (!comm.test(t2)) {
    }
    comm.wait(s);
    comm.wait(t);
    comm.wait(s2);
    EXPECT_EQ(b.to_vector(), values);
    EXPECT_EQ(c.to_vector(), values);

    // A reference collective right after a launched group.
    Request u = comm.isend(std::span<const float>(a.data(), 64), 0, 3);
    Request v = comm.irecv(std::span<float>(b.data(), 64), 0, 3);
    comm.reference_allreduce(Buffer{a.data(), 64, DataType::kFloat32}, ReduceOp::kSum);
    comm.wait(u);
    comm.wait(v);
    comm.reference_broadcast(Buffer{a.data(), 64, DataType::kFloat32}, 0);
    comm.reference_reduce_scatter(ConstBuffer{a.data(), 64, DataType::kFloat32}, Buffer{b.data(), 64, DataType::kFloat32},
                                  ReduceOp::kSum);

    // A split and a dup right after a group.
    Request w = comm.isend(out, 0, 4);
    comm.wait(w);
    std::vector<std::int64_t> sink(3);
    Request x = comm.irecv(sink, 0, 4);
    comm.test(x);
    std::unique_ptr<Comm> sub = comm.split(0, 0);
    ASSERT_NE(sub, nullptr);
    sub->barrier();
    comm.wait(x);
    std::unique_ptr<Comm> twin = comm.dup();
    twin->barrier();
    EXPECT_EQ(comm.split(kNoColor, 0), nullptr);
  });
  EXPECT_EQ(report.errors.size(), 0u);
  EXPECT_EQ(violations(), "") << "NCCL calls on a communicator still in progress";
}

// With two GPUs in the process, a rank's memory pool is opened to the other:
// stream-ordered allocations are not covered by peer access.
TEST_F(NcclProtocolTest, EachRankOpensItsMemoryPoolToThePeerGpus) {
  g_devices = 2;
  launch(1, fake_nccl(), [](Comm& comm) { comm.barrier(); });
  std::lock_guard lock(g_mu);
  EXPECT_EQ(g_pool_access, (std::set<std::pair<int, int>>{{0, 1}}));
}

}  // namespace
}  // namespace dtw
