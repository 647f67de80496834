// Point-to-point over MPI: MPI_Issend / MPI_Irecv underneath every call, and a
// polling completion loop that also listens for another rank's failure, so a
// rank waiting for a peer that died throws AbortedError instead of hanging.
#include "mpi/mpi_comm.h"

#include <climits>
#include <exception>
#include <sstream>
#include <string_view>
#include <thread>

#include "dtw/errors.h"
#include "mpi/watchdog.h"

namespace dtw::mpi {
namespace {

struct MpiRequest final : detail::RequestState {
  MPI_Request req = MPI_REQUEST_NULL;
  std::shared_ptr<Job> job;
  int world_peer = -1;
  std::int64_t capacity_bytes = 0;

  // Withdraws a dropped request: cancel, then give MPI a moment to confirm. A
  // send already matched completes on its own; one that neither completes nor
  // cancels is released to MPI (its communicator is never matched again).
  void abandon() noexcept override {
    if (req == MPI_REQUEST_NULL) return;
    if (std::uncaught_exceptions() == 0 && !job->aborted()) {
      std::ostringstream what;
      what << " " << op << (is_send ? " to rank " : " from rank ") << world_peer << " tag " << tag;
      job->note_abandoned(what.str());
    }
    MPI_Cancel(&req);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    int done = 0;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) std::this_thread::yield();
    }
    if (!done) MPI_Request_free(&req);
  }
};

// Spins first (latency), then yields the core (ranks often outnumber cores).
void backoff(long spins) {
  if (spins < 2000) return;
  if (spins < 20000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

MpiComm::MpiComm(std::shared_ptr<Job> job, MPI_Comm user, int rank, std::vector<int> members,
                 std::shared_ptr<Traffic> traffic, std::shared_ptr<Tracer> tracer, Exec exec)
    : Comm(rank, std::move(members), std::move(traffic), std::move(tracer), std::move(exec)),
      job_(std::move(job)),
      user_(user) {
  // Errors come back as codes so truncation becomes an InvalidArgument.
  MPI_Comm_set_errhandler(user_, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_dup(user_, &internal_), "MPI_Comm_dup", world_rank());
  MPI_Comm_set_errhandler(internal_, MPI_ERRORS_RETURN);
}

MpiComm::~MpiComm() {
  job_->retire(internal_);
  job_->retire(user_);
}

int MpiComm::checked_bytes(std::int64_t bytes, int peer, const char* op_name) const {
  DTW_CHECK_ARG(bytes <= INT_MAX, "rank " << rank() << ": " << op_name << " with rank " << peer
                                          << ": " << bytes
                                          << " bytes; the mpi backend moves at most "
                                          << INT_MAX << " bytes per message");
  return static_cast<int>(bytes);
}

std::shared_ptr<detail::RequestState> MpiComm::start_send(ConstBuffer data, int peer, int tag,
                                                          const char* op_name) {
  auto state = std::make_shared<MpiRequest>();
  state->job = job_;
  state->world_peer = world_rank_of(peer);
  state->peer = peer;
  state->tag = tag;
  state->is_send = true;
  state->bytes = data.bytes();
  const int bytes = checked_bytes(data.bytes(), peer, op_name);
  Watchdog::instance().progressed();  // a rank that posts is not stuck polling
  // Synchronous mode keeps the threads backend's rule: a send completes only
  // once the receiver has matched it, so unsafe orderings fail every time.
  check_mpi(MPI_Issend(data.data, bytes, MPI_BYTE, peer, mpi_tag(tag), comm_for(tag), &state->req),
            "MPI_Issend", world_rank());
  return state;
}

std::shared_ptr<detail::RequestState> MpiComm::start_recv(Buffer data, int peer, int tag,
                                                          const char* op_name) {
  auto state = std::make_shared<MpiRequest>();
  state->job = job_;
  state->world_peer = world_rank_of(peer);
  state->peer = peer;
  state->tag = tag;
  state->capacity_bytes = data.bytes();
  state->elem_bytes = static_cast<std::int64_t>(size_of(data.type));
  const int bytes = checked_bytes(data.bytes(), peer, op_name);
  Watchdog::instance().progressed();
  check_mpi(MPI_Irecv(data.data, bytes, MPI_BYTE, peer, mpi_tag(tag), comm_for(tag), &state->req),
            "MPI_Irecv", world_rank());
  return state;
}

bool MpiComm::test_request(detail::RequestState* state, const char* op_name) {
  auto* r = static_cast<MpiRequest*>(state);
  if (r->req == MPI_REQUEST_NULL) return true;
  int done = 0;
  MPI_Status status;
  const int rc = MPI_Test(&r->req, &done, &status);
  if (rc != MPI_SUCCESS) {
    int error_class = 0;
    MPI_Error_class(rc, &error_class);
    DTW_CHECK_ARG(error_class != MPI_ERR_TRUNCATE,
                  "rank " << rank() << ": " << op_name << " from rank " << r->peer << " tag "
                          << r->tag << ": the message is larger than the receive buffer of "
                          << r->capacity_bytes / r->elem_bytes << " elements ("
                          << r->capacity_bytes << " bytes)");
    check_mpi(rc, "MPI_Test", world_rank());
  }
  if (!done) return false;
  r->req = MPI_REQUEST_NULL;
  if (!r->is_send) {
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    r->received_count = bytes / r->elem_bytes;
  }
  return true;
}

std::size_t MpiComm::poll_until(std::span<detail::RequestState* const> states,
                                const char* op_name, bool any) {
  if (job_->poll_aborted()) job_->throw_aborted(op_name);
  std::vector<PendingOp> pending;
  pending.reserve(states.size());
  for (detail::RequestState* s : states) {
    auto* r = static_cast<MpiRequest*>(s);
    pending.push_back({r->op[0] ? r->op : op_name, r->world_peer, r->tag,
                       r->is_send ? r->bytes : r->capacity_bytes, r->is_send});
  }
  const BlockedScope blocked(op_name, pending.data(), pending.size());
  for (long spins = 0;; ++spins) {
    std::size_t done = 0, first = states.size();
    for (std::size_t i = 0; i < states.size(); ++i) {
      if (!test_request(states[i], op_name)) continue;
      ++done;
      if (first == states.size()) first = i;
    }
    if (any ? done > 0 : done == states.size()) return any ? first : 0;
    if (spins % 64 == 63 && job_->poll_aborted()) job_->throw_aborted(op_name);
    backoff(spins);
  }
}

void MpiComm::complete(std::span<detail::RequestState* const> states, const char* op_name) {
  poll_until(states, op_name, false);
}

std::size_t MpiComm::complete_any(std::span<detail::RequestState* const> states,
                                  const char* op_name) {
  return poll_until(states, op_name, true);
}

bool MpiComm::poll(detail::RequestState* state, const char* op_name) {
  // MPI progresses inside the library; a test only asks it once. A rank that
  // failed elsewhere ends the poll too, as it ends a wait. A poll is a call, so
  // a polling rank is never silent; but Comm::test polling for the timeout with
  // none of this rank's operations completing is a wait that never ends, and
  // the watchdog stops it as it stops a blocked rank (wait_some's sweep after
  // a completion is not such a poll).
  Watchdog& watchdog = Watchdog::instance();
  if (test_request(state, op_name)) {
    watchdog.progressed();
    return true;
  }
  if (std::string_view(op_name) == "test") {
    auto* r = static_cast<MpiRequest*>(state);
    watchdog.polled({r->op[0] ? r->op : op_name, r->world_peer, r->tag,
                     r->is_send ? r->bytes : r->capacity_bytes, r->is_send});
  } else {
    watchdog.touch();
  }
  if (job_->poll_aborted()) job_->throw_aborted(op_name);
  return false;
}

// MPI_Comm_idup polled like a collective, so a peer that failed before
// reaching it aborts this rank instead of leaving it in MPI_Comm_dup.
std::unique_ptr<Comm> MpiComm::make_dup(std::uint64_t /*dup_id*/, bool channel) {
  const char* what = channel ? "collective channel (MPI_Comm_idup)" : "dup (MPI_Comm_idup)";
  if (job_->poll_aborted()) job_->throw_aborted(channel ? "collective channel" : "dup");
  MPI_Comm made = MPI_COMM_NULL;
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Comm_idup(user_, &made, &req), "MPI_Comm_idup", world_rank());
  wait_collective(req, what);
  return std::make_unique<MpiComm>(job_, made, rank(), members(), traffic_ptr(), tracer_ptr(),
                                   exec());
}

std::unique_ptr<Comm> MpiComm::make_subgroup(const std::vector<int>& group, int /*color*/,
                                             std::uint64_t split_id) {
  // Comm::split already agreed on the groups, so only the members of this
  // group take part in creating it (ranks with kNoColor never get here).
  MPI_Group parent_group, new_group;
  MPI_Comm_group(user_, &parent_group);
  MPI_Group_incl(parent_group, static_cast<int>(group.size()), group.data(), &new_group);
  MPI_Comm sub = MPI_COMM_NULL;
  const int tag = static_cast<int>(split_id % 32768);
  const int rc = MPI_Comm_create_group(user_, new_group, tag, &sub);
  MPI_Group_free(&new_group);
  MPI_Group_free(&parent_group);
  check_mpi(rc, "MPI_Comm_create_group", world_rank());
  std::vector<int> members;
  int my_rank = -1;
  for (std::size_t i = 0; i < group.size(); ++i) {
    members.push_back(world_rank_of(group[i]));
    if (group[i] == rank()) my_rank = static_cast<int>(i);
  }
  return std::make_unique<MpiComm>(job_, sub, my_rank, std::move(members), traffic_ptr(),
                                   tracer_ptr(), exec());
}

void MpiComm::do_barrier() {
  Watchdog::instance().note_collective("barrier");
  if (job_->poll_aborted()) job_->throw_aborted("barrier");
  MPI_Request req;
  check_mpi(MPI_Ibarrier(internal_, &req), "MPI_Ibarrier", world_rank());
  wait_collective(req, "barrier (MPI_Ibarrier)");
}

void MpiComm::on_collective(const CollectiveCall& call) {
  // The learner's own collectives ("allreduce:ring"), for the watchdog's report.
  Watchdog::instance().note_collective(call.name);
}

void MpiComm::wait_collective(MPI_Request& req, const char* what) {
  const BlockedScope blocked(what);
  for (long spins = 0;; ++spins) {
    int done = 0;
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test", world_rank());
    if (done) return;
    if (spins % 64 == 63 && job_->poll_aborted()) {
      // A non-blocking collective can be neither cancelled nor freed.
      bury(req);
      job_->throw_aborted(what);
    }
    backoff(spins);
  }
}

}  // namespace dtw::mpi
