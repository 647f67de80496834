// Completing requests: wait, wait_all, test, wait_any and wait_some check
// their requests, let the backend block (or poll), then count and trace what
// completed, after any local work a request left for its completion.
#include <vector>

#include "dtw/comm.h"
#include "dtw/errors.h"
#include "who.h"

namespace dtw {

using detail::who;

void Comm::check_request(const Request& request, std::size_t index, const char* call) const {
  DTW_CHECK_ARG(!request.moved_from(),
                who(rank_, world_rank()) << ": " << call << " on request " << index
                                         << ", which was moved from: its operation belongs to the "
                                            "Request it was moved into");
  const detail::RequestState* s = request.state();
  DTW_CHECK_ARG(!s || !s->comm || s->comm == this,
                who(rank_, world_rank())
                    << ": " << call << " on request " << index << " (" << (s ? s->op : "") << " "
                    << (s && s->is_send ? "to" : "from") << " rank " << (s ? s->peer : -1)
                    << ", tag " << (s ? s->tag : 0)
                    << "), which another communicator started: complete a request on the "
                       "communicator that started it");
}

void Comm::complete_one(detail::RequestState& state) {
  state.completed = true;
  if (state.on_complete) {
    // Once only, even if it throws (a message of the wrong size).
    auto work = std::move(state.on_complete);
    state.on_complete = nullptr;
    work(state);
  }
  finish(state);
}

void Comm::wait(Request& request) {
  check_request(request, 0, "wait");
  complete_requests(std::span<Request>(&request, 1), "wait");
}

void Comm::wait_all(std::span<Request> requests) {
  for (std::size_t i = 0; i < requests.size(); ++i) check_request(requests[i], i, "wait_all");
  complete_requests(requests, "wait_all");
}

bool Comm::test(Request& request) {
  check_request(request, 0, "test");
  if (!request.pending()) return true;
  if (!poll(request.state(), "test")) return false;
  complete_one(*request.state());
  return true;
}

std::size_t Comm::wait_any(std::span<Request> requests) {
  std::vector<detail::RequestState*> pending;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    check_request(requests[i], i, "wait_any");
    if (!requests[i].pending()) continue;
    pending.push_back(requests[i].state());
    index.push_back(i);
  }
  if (pending.empty()) return requests.size();
  const std::size_t k = complete_any(pending, "wait_any");
  complete_one(*pending[k]);
  return index[k];
}

std::vector<std::size_t> Comm::wait_some(std::span<Request> requests) {
  std::vector<detail::RequestState*> pending;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    check_request(requests[i], i, "wait_some");
    if (!requests[i].pending()) continue;
    pending.push_back(requests[i].state());
    index.push_back(i);
  }
  if (pending.empty()) return {};
  complete_any(pending, "wait_some");
  // One has completed; take every other that has too.
  std::vector<std::size_t> done;
  for (std::size_t k = 0; k < pending.size(); ++k) {
    if (!poll(pending[k], "wait_some")) continue;
    complete_one(*pending[k]);
    done.push_back(index[k]);
  }
  return done;
}

void Comm::complete_requests(std::span<Request> requests, const char* call) {
  std::vector<detail::RequestState*> pending;
  for (Request& r : requests)
    if (r.pending()) pending.push_back(r.state());
  if (pending.empty()) return;
  complete(pending, call);
  for (detail::RequestState* s : pending) complete_one(*s);
}

// The blocking calls hold their operation in a Request too, so that an

}  // namespace dtw
