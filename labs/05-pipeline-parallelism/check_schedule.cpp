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
      DTW_TODO("05.6: Refuse, with an InvalidArgument in the tests' words, an action that comes before what it needs or that has no neighbouring chunk to talk to.");
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
  DTW_TODO("05.6: Dry-run all the ranks' lists together, and name every stuck rank when the schedule cannot complete.");
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
