// Checking a schedule before running it. A schedule is data, so everything
// that can go wrong with it can be found without moving a byte:
//
//   - an action for a chunk the rank does not run, or a micro-batch the step
//     does not have (a schedule written for other p, v or m);
//   - a (chunk, micro-batch) forwarded twice or never, a backward before its
//     forward, an input used before it is received, an output sent before it
//     is made;
//   - a send without its receive (or the other way round): on the real
//     machine, a rank waiting for ever;
//   - an order that cannot complete even though everything pairs: rank a
//     waits for a message that rank b sends only after something that waits
//     for rank a. Found by a dry run with the executor's rules: a posted send
//     never blocks, a receive blocks until its send has been posted. The
//     dry run stops when no rank can move; each stuck rank then names what it
//     waits for, which is the wait-for graph of the deadlock that would have
//     happened.
//
// The dry run costs O(actions × ranks) and proves the schedule terminates for
// this (p, m, v): the tests sweep hundreds of them, something no amount of
// running would cover.
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "dtw/errors.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05 {
namespace {

// A message: what it carries, the chunk that produces it, the micro-batch.
using Message = std::tuple<Dir, int, int>;

// The message a send or a receive action moves.
Message message_of(const Action& a) {
  if (a.op == Op::kSend) return {a.dir, a.chunk, a.mb};
  return {a.dir, a.dir == Dir::kActivation ? a.chunk - 1 : a.chunk + 1, a.mb};
}

std::string describe(const Message& msg, const Schedule& s) {
  const auto [dir, from, mb] = msg;
  const int to = dir == Dir::kActivation ? from + 1 : from - 1;
  return std::string(dir == Dir::kActivation ? "the activation" : "the gradient") +
         " of micro-batch " + std::to_string(mb) + " from chunk " + std::to_string(from) +
         " (rank " + std::to_string(from % s.ranks) + ") to chunk " + std::to_string(to) +
         " (rank " + std::to_string(to % s.ranks) + ")";
}

// Each rank's list on its own: ranges, counts and order.
void check_lists(const Schedule& s) {
  const int n = s.chunk_count();
  for (int r = 0; r < s.ranks; ++r) {
    // Per (chunk, mb): the position of each kind of action (-1: not yet).
    std::map<std::pair<int, int>, std::array<int, 6>> seen;
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      const std::string at = "rank " + std::to_string(r) + ", action " + std::to_string(i) +
                             " (" + to_string(a) + "): ";
      DTW_CHECK_ARG(a.chunk >= 0 && a.chunk < n && a.chunk % s.ranks == r,
                    at << "chunk " << a.chunk << " is not one of rank " << r << "'s " << s.virtual_stages
                       << " chunk(s) of " << n);
      DTW_CHECK_ARG(a.mb >= 0 && a.mb < s.micro_batches,
                    at << "names micro-batch " << a.mb << ", but the step has m = "
                       << s.micro_batches << " micro-batches");
      auto& pos = seen.try_emplace({a.chunk, a.mb}, std::array<int, 6>{-1, -1, -1, -1, -1, -1}).first->second;
      // Slots: F, B, recv act, send act, recv grad, send grad.
      const int k = a.op == Op::kForward ? 0 : a.op == Op::kBackward ? 1
                    : 2 + 2 * static_cast<int>(a.dir) + (a.op == Op::kSend ? 1 : 0);
      DTW_CHECK_ARG(pos[k] < 0, at << "repeats action " << pos[k]);
      pos[k] = i;
      // @lab 05.6: Refuse, with an InvalidArgument in the tests' words, an action that comes before what it needs or that has no neighbouring chunk to talk to.
      // @hint 1: Each list on its own must respect what each action needs: a forward its input, a
      // @hint 1: backward its forward and its output's gradient, a send what it sends; and the
      // @hint 1: first and the last chunk have no neighbour on one side. Each violation is refused
      // @hint 1: with a message that names the rank, the action and the rule.
      // @hint 2: k is the current action's slot and pos[slot] the position of that kind of action
      // @hint 2: for this (chunk, micro-batch) so far, -1 if none: 0 F, 1 B, 2 recv act, 3 send
      // @hint 2: act, 4 recv grad, 5 send grad. Rules: F needs recv act unless chunk 0; B needs F,
      // @hint 2: and recv grad unless the last chunk; chunk 0 neither receives an activation nor
      // @hint 2: sends a gradient; the last chunk neither sends an activation nor receives a
      // @hint 2: gradient; send act needs F, send grad needs B. Trap: the backward's gradient rule
      // @hint 2: is easy to forget, and every message still pairs without it.
      // @hint 3: DTW_CHECK_ARG(rule, at << words), with the tests' words: 'forwards before
      // @hint 3: receiving its input', 'backwards before its forward', 'backwards before receiving
      // @hint 3: its output's gradient', 'chunk 0 has no previous chunk', 'the last chunk has no
      // @hint 3: next chunk', 'sends its output before its forward', 'sends its input gradient
      // @hint 3: before its backward'.
      const bool first = a.chunk == 0, last = a.chunk == n - 1;
      if (k == 0) DTW_CHECK_ARG(first || pos[2] >= 0, at << "forwards before receiving its input");
      if (k == 1) DTW_CHECK_ARG(pos[0] >= 0, at << "backwards before its forward");
      if (k == 1) DTW_CHECK_ARG(last || pos[4] >= 0, at << "backwards before receiving its output's gradient");
      if (k == 2 || k == 5) DTW_CHECK_ARG(!first, at << "chunk 0 has no previous chunk");
      if (k == 3 || k == 4) DTW_CHECK_ARG(!last, at << "the last chunk has no next chunk");
      if (k == 3) DTW_CHECK_ARG(pos[0] >= 0, at << "sends its output before its forward");
      if (k == 5) DTW_CHECK_ARG(pos[1] >= 0, at << "sends its input gradient before its backward");
      // @end
    }
    for (int c = r; c < n; c += s.ranks)
      for (int mb = 0; mb < s.micro_batches; ++mb) {
        const auto it = seen.find({c, mb});
        DTW_CHECK_ARG(it != seen.end() && it->second[0] >= 0 && it->second[1] >= 0,
                      "rank " << r << " never " << (it == seen.end() || it->second[0] < 0 ? "forwards" : "backwards")
                              << " micro-batch " << mb << " of chunk " << c);
        DTW_CHECK_ARG((c == n - 1 || it->second[3] >= 0) && (c == 0 || it->second[5] >= 0),
                      "rank " << r << " never sends the " << (c < n - 1 && it->second[3] < 0 ? "activation" : "gradient")
                              << " of micro-batch " << mb << " of chunk " << c);
      }
  }
}

// The dry run: posted sends never block, a receive waits for its send.
void dry_run(const Schedule& s) {
  std::vector<std::size_t> at(static_cast<std::size_t>(s.ranks), 0);
  std::set<Message> posted;
  bool moved = true;
  // @lab 05.6: Dry-run all the ranks' lists together, and name every stuck rank when the schedule cannot complete.
  // @hint 1: Run all the lists together without moving a byte, under the executor's rules: a posted
  // @hint 1: send never blocks, a receive waits until its send has been posted. When no rank can
  // @hint 1: move any more, every rank that has not reached the end of its list is stuck, and what
  // @hint 1: it waits for is the wait-for graph of the deadlock that would have happened.
  // @hint 2: repeat sweeps over the ranks until a sweep moves nobody; in a sweep each rank goes on
  // @hint 2: through its list while it can: a send posts its message, a receive whose message is
  // @hint 2: not posted stops the rank there (at[r] keeps its place). Then name every stuck rank.
  // @hint 2: Trap: a receive must wait for its own message, not for any message.
  // @hint 3: message_of(action) is the message a send or receive moves; keep the posted ones in
  // @hint 3: `posted`. The error: '<name_of(s.kind)> schedule (p = P, m = M, v = V) cannot
  // @hint 3: complete:', then per stuck rank ' rank r waits in action i (<to_string(action)>) for
  // @hint 3: <describe(message_of(action), s)>'.
  while (moved) {
    moved = false;
    for (int r = 0; r < s.ranks; ++r) {
      const auto& list = s.actions[static_cast<std::size_t>(r)];
      std::size_t& i = at[static_cast<std::size_t>(r)];
      for (; i < list.size(); ++i, moved = true) {
        const Action& a = list[i];
        if (a.op == Op::kSend) posted.insert(message_of(a));
        if (a.op == Op::kRecv && !posted.count(message_of(a))) break;  // must wait
      }
    }
  }
  std::string stuck;
  for (int r = 0; r < s.ranks; ++r) {
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    const std::size_t i = at[static_cast<std::size_t>(r)];
    if (i < list.size())
      stuck += "\n  rank " + std::to_string(r) + " waits in action " + std::to_string(i) + " (" +
               to_string(list[i]) + ") for " + describe(message_of(list[i]), s);
  }
  DTW_CHECK_ARG(stuck.empty(), name_of(s.kind) << " schedule (p = " << s.ranks << ", m = "
                                               << s.micro_batches << ", v = " << s.virtual_stages
                                               << ") cannot complete:" << stuck);
  // @end
}

}  // namespace

void check_schedule(const Schedule& s) {
  DTW_CHECK_ARG(s.ranks >= 1 && s.micro_batches >= 1 && s.virtual_stages >= 1 &&
                    static_cast<int>(s.actions.size()) == s.ranks,
                "check_schedule: p = " << s.ranks << ", m = " << s.micro_batches << ", v = "
                                       << s.virtual_stages << " with " << s.actions.size()
                                       << " lists of actions (one per rank, each >= 1)");
  check_lists(s);
  dry_run(s);
}

}  // namespace dtw::ch05
