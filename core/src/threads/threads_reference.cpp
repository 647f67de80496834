// The threads backend's reference collectives. On the host they are Comm's
// plain fixed-order algorithms. With device buffers (LaunchOptions::device
// "cuda") every device buffer is copied to the host first, the same
// algorithms run on the copies, and the buffers they write are copied back:
// a reference is there to be obviously correct, and these stay bitwise the
// same as on the host, whatever the world shares its GPU with.
#include <cstddef>
#include <vector>

#include "threads/threads_comm.h"

namespace dtw::threads {
namespace {

// A host stand-in for one buffer while a reference collective runs. Host
// memory (and empty or negative counts, which the algorithm itself refuses)
// passes through untouched.
class Staged {
 public:
  Staged(DeviceRanks* devices, const Exec& exec, const void* data, std::int64_t count,
         DataType type)
      : devices_(devices), exec_(exec), data_(data), count_(count), type_(type) {
    if (!devices_ || count_ <= 0 || !devices_->on_device(data_)) return;
    host_.resize(static_cast<std::size_t>(bytes()));
    devices_->to_host(exec_, host_.data(), data_, bytes());
    staged_ = true;
  }
  Buffer buffer() { return {staged_ ? host_.data() : const_cast<void*>(data_), count_, type_}; }
  ConstBuffer const_buffer() { return {staged_ ? host_.data() : data_, count_, type_}; }
  // The algorithm wrote the host copy: bring it back where the caller's data lives.
  void write_back() {
    if (staged_) devices_->from_host(exec_, const_cast<void*>(data_), host_.data(), bytes());
  }

 private:
  std::int64_t bytes() const { return count_ * static_cast<std::int64_t>(size_of(type_)); }

  DeviceRanks* devices_;
  const Exec& exec_;
  const void* data_;
  std::int64_t count_;
  DataType type_;
  std::vector<std::byte> host_;
  bool staged_ = false;
};

}  // namespace

void ThreadsComm::reference_allreduce(Buffer data, ReduceOp op) {
  Staged d(devices_.get(), exec(), data.data, data.count, data.type);
  Comm::reference_allreduce(d.buffer(), op);
  d.write_back();
}

void ThreadsComm::reference_broadcast(Buffer data, int root) {
  Staged d(devices_.get(), exec(), data.data, data.count, data.type);
  Comm::reference_broadcast(d.buffer(), root);
  d.write_back();
}

void ThreadsComm::reference_reduce(Buffer data, ReduceOp op, int root) {
  Staged d(devices_.get(), exec(), data.data, data.count, data.type);
  Comm::reference_reduce(d.buffer(), op, root);
  d.write_back();
}

void ThreadsComm::reference_allgather(ConstBuffer in, Buffer out) {
  Staged i(devices_.get(), exec(), in.data, in.count, in.type);
  Staged o(devices_.get(), exec(), out.data, out.count, out.type);
  Comm::reference_allgather(i.const_buffer(), o.buffer());
  o.write_back();
}

void ThreadsComm::reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) {
  Staged i(devices_.get(), exec(), in.data, in.count, in.type);
  Staged o(devices_.get(), exec(), out.data, out.count, out.type);
  Comm::reference_reduce_scatter(i.const_buffer(), o.buffer(), op);
  o.write_back();
}

void ThreadsComm::reference_alltoall(ConstBuffer in, Buffer out) {
  Staged i(devices_.get(), exec(), in.data, in.count, in.type);
  Staged o(devices_.get(), exec(), out.data, out.count, out.type);
  Comm::reference_alltoall(i.const_buffer(), o.buffer());
  o.write_back();
}

void ThreadsComm::reference_gather(ConstBuffer in, Buffer out, int root) {
  Staged i(devices_.get(), exec(), in.data, in.count, in.type);
  // Only the root's output is written (and only the root's need be valid).
  Staged o(devices_.get(), exec(), out.data, rank() == root ? out.count : 0, out.type);
  Comm::reference_gather(i.const_buffer(), rank() == root ? o.buffer() : out, root);
  o.write_back();
}

void ThreadsComm::reference_scatter(ConstBuffer in, Buffer out, int root) {
  // Only the root's input is read.
  Staged i(devices_.get(), exec(), in.data, rank() == root ? in.count : 0, in.type);
  Staged o(devices_.get(), exec(), out.data, out.count, out.type);
  Comm::reference_scatter(rank() == root ? i.const_buffer() : in, o.buffer(), root);
  o.write_back();
}

}  // namespace dtw::threads
