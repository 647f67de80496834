// A schedule is data: for every rank, the ordered list of what it does in one
// training step. Three schedules for one chunk per rank (v = 1), for p = 4
// stages, as they run when every forward takes one time slot, every backward
// two, and messages are free (F3 = forward of micro-batch 3, one column per
// slot; `dtw bench train` draws the measured ones):
//
//   naive, m = 2: one micro-batch in the pipe at a time. Bubble (p−1)/p.
//     s0  F0                  B0B0F1                  B1B1
//     s1    F0            B0B0      F1            B1B1
//     s2      F0      B0B0            F1      B1B1
//     s3        F0B0B0                  F1B1B1
//
//   GPipe, m = 4: all forwards, a flush, all backwards. Bubble (p−1)/(m+p−1).
//     s0  F0F1F2F3                  B3B3B2B2B1B1B0B0
//     s1    F0F1F2F3            B3B3B2B2B1B1B0B0
//     s2      F0F1F2F3      B3B3B2B2B1B1B0B0
//     s3        F0F1F2F3B3B3B2B2B1B1B0B0
//
//   1F1B, m = 4: the same length, but stage s never holds more than p−s
//   micro-batches' activations, where GPipe holds all m.
//     s0  F0F1F2F3            B0B0  B1B1  B2B2  B3B3
//     s1    F0F1F2        B0B0F3B1B1  B2B2  B3B3
//     s2      F0F1    B0B0F2B1B1F3B2B2  B3B3
//     s3        F0B0B0F1B1B1F2B2B2F3B3B3
//
// Each compute action comes with its messages (Schedule::forward/backward):
// a forward of chunk c receives its input from c−1 first and sends its output
// to c+1 after; a backward receives the gradient of its output from c+1 and
// sends the gradient of its input to c−1. The executor (executor.cpp) runs
// any list; check_schedule (check_schedule.cpp) proves one can complete.
#include <algorithm>
#include <cctype>

#include "dtw/errors.h"
#include "pipeline_internal.h"

namespace dtw::ch05 {

void Schedule::forward(int chunk, int mb) {
  auto& list = actions[static_cast<std::size_t>(chunk % ranks)];
  if (chunk > 0) list.push_back({Op::kRecv, chunk, mb, Dir::kActivation});
  list.push_back({Op::kForward, chunk, mb});
  if (chunk < chunk_count() - 1) list.push_back({Op::kSend, chunk, mb, Dir::kActivation});
}

void Schedule::backward(int chunk, int mb) {
  auto& list = actions[static_cast<std::size_t>(chunk % ranks)];
  if (chunk < chunk_count() - 1) list.push_back({Op::kRecv, chunk, mb, Dir::kGradient});
  list.push_back({Op::kBackward, chunk, mb});
  if (chunk > 0) list.push_back({Op::kSend, chunk, mb, Dir::kGradient});
}

namespace {
Schedule empty_schedule(ScheduleKind kind, int p, int m, int v) {
  DTW_CHECK_ARG(p >= 1 && m >= 1 && v >= 1, name_of(kind) << " schedule: p = " << p << ", m = "
                                                          << m << ", v = " << v
                                                          << ": each must be at least 1");
  Schedule s;
  s.kind = kind;
  s.ranks = p;
  s.micro_batches = m;
  s.virtual_stages = v;
  s.actions.resize(static_cast<std::size_t>(p));
  return s;
}
}  // namespace

Schedule naive_schedule(int p, int m) {
  Schedule s = empty_schedule(ScheduleKind::kNaive, p, m, 1);
  // Micro-batch mb goes all the way down and back up before mb+1 starts: the
  // stages take turns, and p−1 of them idle at any moment.
  for (int mb = 0; mb < m; ++mb) {
    for (int st = 0; st < p; ++st) s.forward(st, mb);
    for (int st = p - 1; st >= 0; --st) s.backward(st, mb);
  }
  return s;
}

Schedule gpipe_schedule(int p, int m) {
  Schedule s = empty_schedule(ScheduleKind::kGPipe, p, m, 1);
  // @lab 05.2: GPipe: every stage forwards all the micro-batches, then backwards them all.
  // @hint 1: GPipe fills the pipe with every micro-batch of the step, then flushes it: each stage
  // @hint 1: first runs the forwards of all m micro-batches, then their backwards, the last
  // @hint 1: forwarded first (the order of the text's diagram, which the tests check).
  // @hint 2: for each stage st: for mb = 0 … m−1: forward(st, mb); then for mb = m−1 down to 0:
  // @hint 2: backward(st, mb). Each stage's list is built on its own; the messages that tie the
  // @hint 2: lists together come with each compute action. Trap: backwards in increasing order
  // @hint 2: also complete, but they are not GPipe's order and the test of its shape fails.
  // @hint 3: s.forward(st, mb) and s.backward(st, mb) append the receive, the compute and the
  // @hint 3: send to the list of stage st's rank (see naive_schedule above for their use).
  for (int st = 0; st < p; ++st) {
    for (int mb = 0; mb < m; ++mb) s.forward(st, mb);
    // The last micro-batch forwarded is the first whose gradient can come
    // back: the GPipe paper's order, and the diagram's.
    for (int mb = m - 1; mb >= 0; --mb) s.backward(st, mb);
  }
  // @end
  return s;
}

Schedule one_f_one_b_schedule(int p, int m) {
  Schedule s = empty_schedule(ScheduleKind::kOneFOneB, p, m, 1);
  // @lab 05.2: 1F1B: each stage warms up with a few forwards, alternates one forward and one backward, then cools down.
  // @hint 1: A stage starts its first backward as soon as micro-batch 0's gradient can be back,
  // @hint 1: and from then on pays for every new forward with the backward of its oldest
  // @hint 1: micro-batch, so it never holds more than p − s micro-batches; when the forwards run
  // @hint 1: out, it backwards the rest. Micro-batches go forward and backward in increasing order.
  // @hint 2: warm-up w = min(p − st − 1, m) forwards (micro-batch 0 needs p − st − 1 hops down and
  // @hint 2: back); steady state: while forwards remain, forward the next, backward the oldest;
  // @hint 2: cool-down: backward the rest. Keep two counters, next forward and next backward.
  // @hint 2: Trap: without the min(·, m), a step with fewer micro-batches than stages names
  // @hint 2: micro-batches that do not exist (torchtitan#775, in the pitfalls).
  // @hint 3: std::min(p - st - 1, m) for the warm-up; s.forward(st, f++) and s.backward(st, b++).
  for (int st = 0; st < p; ++st) {
    // Stage st's first backward needs micro-batch 0 to reach the last stage
    // and come back: p−st−1 forwards fit in before it. Clamp to m, or a
    // short step would name micro-batches that do not exist (torchtitan#775).
    const int warmup = std::min(p - st - 1, m);
    int next_forward = 0, next_backward = 0;
    for (int i = 0; i < warmup; ++i) s.forward(st, next_forward++);
    // Steady state: every forward is followed by the backward of the oldest
    // micro-batch, so at most warmup + 1 = p − st are in flight.
    while (next_forward < m) {
      s.forward(st, next_forward++);
      s.backward(st, next_backward++);
    }
    while (next_backward < m) s.backward(st, next_backward++);  // cool-down
  }
  // @end
  return s;
}

Schedule make_schedule(ScheduleKind kind, int p, int m, int v) {
  DTW_CHECK_ARG(v == 1 || kind == ScheduleKind::kInterleaved,
                name_of(kind) << " schedule: v = " << v
                              << " chunks per rank; only the interleaved schedule has several");
  switch (kind) {
    case ScheduleKind::kNaive: return naive_schedule(p, m);
    case ScheduleKind::kGPipe: return gpipe_schedule(p, m);
    case ScheduleKind::kOneFOneB: return one_f_one_b_schedule(p, m);
    case ScheduleKind::kInterleaved: return interleaved_schedule(p, m, v);
  }
  return {};
}

const char* name_of(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kNaive: return "naive";
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kInterleaved: return "interleaved";
  }
  return "?";
}

std::string to_string(const Action& a) {
  const bool act = a.dir == Dir::kActivation;
  const char* what = a.op == Op::kForward    ? "F"
                     : a.op == Op::kBackward ? "B"
                     : a.op == Op::kSend     ? (act ? "send act " : "send grad ")
                                             : (act ? "recv act " : "recv grad ");
  // Built by appending: GCC 12 misreads `"F" + std::string` at -O3 (-Wrestrict).
  std::string out(what);
  out.append(std::to_string(a.mb));
  if (a.chunk > 0) out.append("@c").append(std::to_string(a.chunk));
  return out;
}

std::string Schedule::describe() const {
  std::string out;
  for (int r = 0; r < ranks; ++r) {
    out.append("rank ").append(std::to_string(r)).append(":");
    for (const Action& a : actions[static_cast<std::size_t>(r)]) out.append(" ").append(to_string(a));
    out += "\n";
  }
  return out;
}

// Tags are readable in decimal: 1xxyyyyy activations, 2xxyyyyy gradients,
// with the producing chunk in the hundred-thousands and the micro-batch below.
int pipe_tag(Dir dir, int from_chunk, int mb) {
  DTW_CHECK_ARG(from_chunk >= 0 && from_chunk < 1000 && mb >= 0 && mb < 100000,
                "pipe_tag: chunk " << from_chunk << " (< 1000), micro-batch " << mb
                                   << " (< 100000) out of range");
  return 100000000 * (1 + static_cast<int>(dir)) + 100000 * from_chunk + mb;
}

std::string describe_pipe_tag(int tag) {
  if (tag == kTiedGradTag) return "the head's share of the tied embedding's gradient";
  if (tag == kTiedParamTag) return "the stepped tied embedding, back to the head";
  const int dir = tag / 100000000 - 1, chunk = tag / 100000 % 1000, mb = tag % 100000;
  if (dir != 0 && dir != 1) return "tag " + std::to_string(tag) + " (not a pipeline tag)";
  const int to = dir == 0 ? chunk + 1 : chunk - 1;
  return std::string(dir == 0 ? "activation" : "gradient") + " of micro-batch " +
         std::to_string(mb) + " from chunk " + std::to_string(chunk) + " to chunk " +
         std::to_string(to);
}

std::string explain_pipe_tags(const std::string& report) {
  std::string out = report, seen = " ";
  for (std::size_t at = report.find("tag "); at != std::string::npos; at = report.find("tag ", at + 4)) {
    std::size_t end = at + 4;
    while (end < report.size() && std::isdigit(static_cast<unsigned char>(report[end]))) ++end;
    const std::string digits = report.substr(at + 4, end - at - 4);
    if (digits.empty() || digits.size() > 9 || seen.find(" " + digits + " ") != std::string::npos) continue;
    seen.append(digits).append(" ");
    if (!out.empty() && out.back() != '\n') out += '\n';
    out.append("  tag ").append(digits).append(" = ").append(describe_pipe_tag(std::stoi(digits)));
  }
  return out;
}

}  // namespace dtw::ch05
