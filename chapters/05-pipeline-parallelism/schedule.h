#pragma once
/// @file
/// Chapter 05's schedules: which rank runs which forward, backward, send and
/// receive, in which order. A schedule is plain data -- lists of actions, one
/// per rank -- so it can be made (steps 05.2 and 05.4), printed, and checked
/// before anything runs (step 05.6) without a model, a replica or a message;
/// the executor (pipeline_parallelism.h, which includes this header) runs any
/// of them.

#include <cstdint>
#include <string>
#include <vector>

namespace dtw::ch05 {

// ---- step 05.2: a schedule is data -------------------------------------------

/// What an action does.
enum class Op : std::uint8_t {
  kForward,   ///< forward of (chunk, mb)
  kBackward,  ///< backward of (chunk, mb)
  kSend,      ///< send what (chunk, mb) produced: its output or its input gradient
  kRecv,      ///< receive what (chunk, mb) needs: its input or its output gradient
};
/// What a send or a receive moves.
enum class Dir : std::uint8_t {
  kActivation,  ///< forward: chunk c's output to chunk c+1
  kGradient,    ///< backward: chunk c's input gradient to chunk c−1
};
/// One entry of a rank's list. For kSend/kRecv, `chunk` is the chunk whose
/// data it is on this rank: Send{kActivation, c} sends c's output; Recv{kActivation, c}
/// receives c's input (from c−1); Send{kGradient, c} sends c's input gradient
/// (to c−1); Recv{kGradient, c} receives the gradient of c's output (from c+1).
struct Action {
  Op op = Op::kForward;        ///< what
  int chunk = 0;               ///< which chunk (virtual stage)
  int mb = 0;                  ///< which micro-batch
  Dir dir = Dir::kActivation;  ///< sends and receives only
  /// Field-wise equality.
  bool operator==(const Action&) const = default;
};
/// "F3", "B3" (chunk 0), "F3@c2" (chunk 2), "send act 3", "recv grad 3@c2".
std::string to_string(const Action& action);

/// The schedules of this chapter.
enum class ScheduleKind {
  kNaive,        ///< one micro-batch in the pipe at a time (model parallelism + accumulation)
  kGPipe,        ///< all forwards, then all backwards (one flush per step)
  kOneFOneB,     ///< PipeDream-Flush: warm-up, one forward one backward, cool-down
  kInterleaved,  ///< 1F1B over v chunks per rank (Megatron's interleaved schedule)
};
/// "naive", "gpipe", "1f1b", "interleaved".
const char* name_of(ScheduleKind kind);

/// Every rank's ordered list of actions for one step.
struct Schedule {
  ScheduleKind kind = ScheduleKind::kGPipe;  ///< how it was made
  int ranks = 1;           ///< p
  int micro_batches = 1;   ///< m
  int virtual_stages = 1;  ///< v
  std::vector<std::vector<Action>> actions;  ///< actions[r]: rank r's list
  /// p·v.
  int chunk_count() const { return ranks * virtual_stages; }
  /// Appends to rank_of(chunk)'s list: receive the input (unless chunk 0),
  /// forward, send the output (unless the last chunk).
  void forward(int chunk, int mb);
  /// Appends: receive the output gradient (unless the last chunk), backward,
  /// send the input gradient (unless chunk 0).
  void backward(int chunk, int mb);
  /// One line per rank: "rank 0: F0 send act 0 F1 …".
  std::string describe() const;
};

/// The naive schedule: micro-batch after micro-batch, each forward through
/// every stage and back before the next starts. Bubble (p−1)/p for every m.
Schedule naive_schedule(int ranks, int micro_batches);
/// Step 05.2: GPipe: every stage forwards micro-batches 0 … m−1, then
/// backwards them in reverse order. Bubble (p−1)/(m+p−1); stage s holds all
/// m micro-batches' activations at the flush.
Schedule gpipe_schedule(int ranks, int micro_batches);
/// Step 05.2: 1F1B: stage s forwards min(p−s−1, m) micro-batches (warm-up),
/// then alternates one forward and one backward until every forward is done,
/// then backwards the rest (cool-down). Same bubble as GPipe; stage s holds
/// at most min(p−s, m) micro-batches' activations.
Schedule one_f_one_b_schedule(int ranks, int micro_batches);
/// Step 05.4: interleaved 1F1B over v chunks per rank (see the chapter for
/// the order and the warm-up count). Bubble (p−1)/(v·m+p−1) for m ≥ p.
Schedule interleaved_schedule(int ranks, int micro_batches, int virtual_stages);
/// The schedule of `kind` (v must be 1 except for kInterleaved).
/// InvalidArgument for p, m or v < 1, naming them.
Schedule make_schedule(ScheduleKind kind, int ranks, int micro_batches, int virtual_stages = 1);

/// The tag of the message that carries `dir` data produced by chunk
/// `from_chunk` for micro-batch `mb`: 100000000·(1 + dir) + 100000·from_chunk
/// + mb, so a deadlock report's "tag 200300007" reads "gradient from chunk 3,
/// micro-batch 7". Chunks < 1000, micro-batches < 100000.
int pipe_tag(Dir dir, int from_chunk, int mb);
/// "activation of micro-batch 7 from chunk 2 to chunk 3" for a pipe_tag
/// (and the tied embedding's two tags, 1 and 2).
std::string describe_pipe_tag(int tag);
/// `report` (a deadlock report's wait-for graph) followed by one line per
/// distinct "tag N" it mentions: "  tag 100000001 = activation of micro-batch
/// 1 from chunk 0 to chunk 1". The executor rethrows its DeadlockErrors
/// with this, so the graph names stage, micro-batch and direction.
std::string explain_pipe_tags(const std::string& report);

// ---- step 05.6: checking a schedule before running it -------------------------

/// Step 05.6: checks that `schedule` can run, without running it: every
/// action names an existing chunk of its rank and a micro-batch in [0, m);
/// every (chunk, mb) is forwarded once and backwarded once, after its forward;
/// inputs and gradients are received before they are used and sent after they
/// are made; every send pairs with exactly one receive; and a dry run with the
/// executor's rules (posted sends, blocking receives) reaches the end of every
/// list. Otherwise InvalidArgument naming the rank, the action, the chunk,
/// the micro-batch and the direction, in these words (the tests look for
/// them; i is the action's index in rank r's list, A its to_string):
///
///   - sizes: "check_schedule: p = P, m = M, v = V with K lists of actions
///     (one per rank, each >= 1)";
///   - each list on its own, "rank r, action i (A): " then one of
///     "chunk c is not one of rank r's V chunk(s) of N",
///     "names micro-batch b, but the step has m = M micro-batches",
///     "repeats action j", "forwards before receiving its input",
///     "backwards before its forward", "backwards before receiving its
///     output's gradient", "chunk 0 has no previous chunk", "the last chunk
///     has no next chunk", "sends its output before its forward", "sends its
///     input gradient before its backward"; and after the list "rank r never
///     forwards|backwards micro-batch b of chunk c", "rank r never sends the
///     activation|gradient of micro-batch b of chunk c";
///   - the dry run: "<name_of(kind)> schedule (p = P, m = M, v = V) cannot
///     complete:" then one line per stuck rank, "  rank r waits in action i
///     (A) for the gradient of micro-batch b from chunk c (rank x) to chunk
///     c−1 (rank y)" (or "the activation of … from chunk c to chunk c+1"),
///     for example
///
///       naive schedule (p = 2, m = 1, v = 1) cannot complete:
///         rank 0 waits in action 1 (recv grad 0) for the gradient of micro-batch 0 from chunk 1 (rank 1) to chunk 0 (rank 0)
///         rank 1 waits in action 0 (recv act 0@c1) for the activation of micro-batch 0 from chunk 0 (rank 0) to chunk 1 (rank 1)
void check_schedule(const Schedule& schedule);

}  // namespace dtw::ch05
