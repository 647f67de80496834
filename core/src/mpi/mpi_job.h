#pragma once
// State one launch shares between its communicators on this process: the
// abort channel (a rank that fails tells every other rank, whose pending waits
// then throw AbortedError, as on the threads backend) and the list of requests
// dropped while still pending.
#include <mpi.h>

#include <string>
#include <vector>

namespace dtw::mpi {

class Job {
 public:
  /// `job` holds the launch's ranks; the job duplicates it for the abort channel.
  Job(MPI_Comm job, int world_rank);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  /// True once any rank of the launch reported a failure (polls the channel).
  bool poll_aborted();
  bool aborted() const { return aborted_by_ >= 0; }
  /// Throws AbortedError naming the rank that failed first.
  [[noreturn]] void throw_aborted(const char* op) const;
  /// Tells every other rank of the launch that this one failed.
  void announce_failure();
  /// A request dropped while pending and not during unwinding.
  void note_abandoned(std::string what) { abandoned_.push_back(std::move(what)); }
  const std::vector<std::string>& abandoned() const { return abandoned_; }
  int world_rank() const { return world_rank_; }
  /// Takes a communicator of this launch to free when the job ends.
  void retire(MPI_Comm comm) { retired_.push_back(comm); }
  /// After a failed launch, messages may still be in flight towards its
  /// communicators. Freeing them would let MPI reuse their context ids, and a
  /// late message would then land in a later launch; so they are kept instead.
  void keep_communicators() { keep_ = true; }

 private:
  MPI_Comm control_ = MPI_COMM_NULL;
  MPI_Request listen_ = MPI_REQUEST_NULL;
  int incoming_ = -1;
  int aborted_by_ = -1;
  int world_rank_;
  bool announced_ = false;
  bool keep_ = false;
  std::vector<MPI_Comm> retired_;
  std::vector<MPI_Request> notices_;
  std::vector<std::string> abandoned_;
};

/// Keeps a request MPI cannot cancel or free while active (a non-blocking
/// collective a failed peer never joined); it is tested, never waited for.
void bury(MPI_Request request);

/// Throws MpiError for a failed MPI call, with MPI's own text.
void check_mpi(int rc, const char* call, int rank);

}  // namespace dtw::mpi
