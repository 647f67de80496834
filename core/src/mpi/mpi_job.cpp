#include "mpi/mpi_job.h"

#include <vector>

#include "dtw/errors.h"

namespace dtw::mpi {

void check_mpi(int rc, const char* call, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  DTW_CHECK(false, MpiError, "rank " << rank << ": " << call << " failed: " << std::string(text, len));
}

void bury(MPI_Request request) {
  static std::vector<MPI_Request> graveyard;
  std::erase_if(graveyard, [](MPI_Request& r) {
    int done = 0;
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  graveyard.push_back(request);
}

Job::Job(MPI_Comm job, int world_rank) : world_rank_(world_rank) {
  check_mpi(MPI_Comm_dup(job, &control_), "MPI_Comm_dup", world_rank);
  MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
  check_mpi(MPI_Irecv(&incoming_, 1, MPI_INT, MPI_ANY_SOURCE, 0, control_, &listen_), "MPI_Irecv",
            world_rank);
}

Job::~Job() {
  if (listen_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&listen_);
    MPI_Wait(&listen_, MPI_STATUS_IGNORE);
  }
  // Notices are a few bytes and leave eagerly; one a peer never received is
  // dropped with the channel.
  for (MPI_Request& r : notices_) {
    int done = 0;
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) MPI_Request_free(&r);
  }
  if (keep_) return;
  for (MPI_Comm& c : retired_) MPI_Comm_free(&c);
  MPI_Comm_free(&control_);
}

bool Job::poll_aborted() {
  if (aborted_by_ >= 0) return true;
  int done = 0;
  MPI_Test(&listen_, &done, MPI_STATUS_IGNORE);
  if (done) aborted_by_ = incoming_;
  return aborted_by_ >= 0;
}

void Job::throw_aborted(const char* op) const {
  DTW_CHECK(false, AbortedError,
            "rank " << world_rank_ << ": " << op << " cancelled because rank " << aborted_by_
                    << " failed");
}

void Job::announce_failure() {
  if (announced_) return;
  announced_ = true;
  int size = 0, me = 0;
  MPI_Comm_size(control_, &size);
  MPI_Comm_rank(control_, &me);
  // Every notice names the rank that failed first: a rank whose own failure
  // is an AbortedError (it was cancelled because of rank X) passes X on, so a
  // rank that hears from it before it hears from X still blames X.
  static int payload;  // must outlive the sends
  payload = aborted_by_ >= 0 ? aborted_by_ : world_rank_;
  for (int r = 0; r < size; ++r) {
    if (r == me) continue;
    MPI_Request req;
    if (MPI_Isend(&payload, 1, MPI_INT, r, 0, control_, &req) == MPI_SUCCESS)
      notices_.push_back(req);
  }
  if (aborted_by_ < 0) aborted_by_ = world_rank_;
}

}  // namespace dtw::mpi
