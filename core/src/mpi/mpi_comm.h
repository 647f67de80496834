#pragma once
// The mpi backend's Comm: one rank per process. User traffic runs on one
// communicator with the caller's tags unchanged; the runtime's own messages
// (negative tags: barrier, split, fingerprint, reference) run on a duplicate,
// so they can never match a user receive.
#include <mpi.h>

#include <memory>

#include "dtw/comm.h"
#include "mpi/mpi_job.h"

namespace dtw::mpi {

class MpiComm final : public Comm {
 public:
  /// Takes ownership of `user` (a communicator over `members`, this process at
  /// `rank`) and duplicates it for internal traffic.
  MpiComm(std::shared_ptr<Job> job, MPI_Comm user, int rank, std::vector<int> members,
          std::shared_ptr<Traffic> traffic, std::shared_ptr<Tracer> tracer, Exec exec);
  ~MpiComm() override;
  const char* backend() const override { return "mpi"; }

  void reference_allreduce(Buffer data, ReduceOp op) override;
  void reference_broadcast(Buffer data, int root) override;
  void reference_reduce(Buffer data, ReduceOp op, int root) override;
  void reference_allgather(ConstBuffer in, Buffer out) override;
  void reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) override;
  void reference_alltoall(ConstBuffer in, Buffer out) override;
  void reference_gather(ConstBuffer in, Buffer out, int root) override;
  void reference_scatter(ConstBuffer in, Buffer out, int root) override;

 protected:
  std::shared_ptr<detail::RequestState> start_send(ConstBuffer data, int peer, int tag,
                                                   const char* op_name) override;
  std::shared_ptr<detail::RequestState> start_recv(Buffer data, int peer, int tag,
                                                   const char* op_name) override;
  void complete(std::span<detail::RequestState* const> states, const char* op_name) override;
  std::size_t complete_any(std::span<detail::RequestState* const> states,
                           const char* op_name) override;
  bool poll(detail::RequestState* state, const char* op_name) override;
  std::unique_ptr<Comm> make_dup(std::uint64_t dup_id, bool channel) override;
  std::unique_ptr<Comm> make_subgroup(const std::vector<int>& group, int color,
                                      std::uint64_t split_id) override;
  void do_barrier() override;
  void on_collective(const CollectiveCall& call) override;

 private:
  MPI_Comm comm_for(int tag) const { return tag < 0 ? internal_ : user_; }
  int mpi_tag(int tag) const { return tag < 0 ? -tag : tag; }
  int checked_bytes(std::int64_t bytes, int peer, const char* op_name) const;
  // One MPI_Test of a request: true once it completed (sets received_count).
  bool test_request(detail::RequestState* state, const char* op_name);
  // Polls until `need` of `states` completed (all of them, or any one);
  // returns the index of one that did.
  std::size_t poll_until(std::span<detail::RequestState* const> states, const char* op_name,
                         bool any);
  // Reference-collective helpers (mpi_reference.cpp).
  void agree(const char* what, std::int64_t count, int root);
  void run_collective(const char* what, int rc);
  // Polls a non-blocking collective to completion, abortable like complete().
  void wait_collective(MPI_Request& req, const char* what);

  std::shared_ptr<Job> job_;
  MPI_Comm user_;
  MPI_Comm internal_ = MPI_COMM_NULL;
};

}  // namespace dtw::mpi
