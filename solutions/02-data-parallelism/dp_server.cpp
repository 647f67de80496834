// Data parallelism 1.0: a central model server.
//
// Rank 0 is the server (and a worker too: it trains on shard 0). It alone
// holds the optimizer state and steps. Every step:
//
//     workers 1..p-1                          server (rank 0)
//     forward + backward on shard r           forward + backward on shard 0
//     send  g_r, loss_r  ───────────────────► recv_reduce g_r into g, add loss_r   (p-1 times)
//     (wait)                                  clip, optimizer step
//     recv  θ           ◄──────────────────── send θ to every worker               (p-1 times)
//
// Cost per step (Ψ parameters, e bytes each): the server's link carries
// (p−1)·Ψ·e in and (p−1)·Ψ·e out; every worker's carries Ψ·e each way. The
// server also does all p−1 reductions, while the workers wait for it. With
// α-β-γ (chapter 01), if its messages cannot overlap:
//
//     T_server ≈ (p−1)·(α + Ψe·β + Ψe·γ) + T_step + (p−1)·(α + Ψe·β)
//
// which grows linearly with p: the bottleneck the seeds warn about. A ring
// allreduce moves 2Ψe(p−1)/p per rank, p/2 times less than the server's link.
// What the server buys is memory: a worker holds no optimizer state, 2Ψ
// values instead of 4Ψ with AdamW (the ledger shows it: dtw train --strategy
// dp-server prints every rank's memory).
//
// This is chapter 01's naive allreduce (allreduce_naive.cpp: linear reduce to
// rank 0, linear broadcast) with the optimizer step moved inside it: the
// server sums *gradients* and sends back *parameters*, the same bytes.
#include <span>
#include <vector>

#include "data_parallelism.h"

namespace dtw::ch02 {
namespace {

constexpr int kServer = 0;
// Tags name the three messages of a step, so that a receive can never take a
// loss for a gradient (the sizes would catch it too, but later and vaguer).
constexpr int kGradTag = 1, kLossTag = 2, kParamTag = 3;

}  // namespace

template <TrainElement T>
void dp_server(train::RankRun<T>& run) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  const bool server = r == kServer;
  check_same_run(comm, spec);
  // Everyone holds parameters (to compute with) and gradients (to send);
  // only the server holds optimizer state, because only the server steps.
  train::ReplicaPlan plan = train::ReplicaPlan::whole(spec);
  if (!server) plan.optimizer.clear();
  train::Replica<T> replica(spec, run.exec(), plan);
  replica.set_times(run.layer_times());
  // The shard's share of the batch (02.5): the weighted gradients sum to the mean.
  const double weight = shard_weight(spec, r, p);
  // The work of each compute phase, which the modeled fabric times on other devices.
  const train::Cost pass =
      replica.pass_cost(replica.network().all(), train::make_batch(spec, 0, r, p), true);
  const train::Cost update = replica.optimizer_cost();

  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    {
      auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
      loss = weight * replica.forward_backward(step, r, p, static_cast<T>(weight));
    }
    {
      auto phase = run.phase("push-gradients", {.compute = false});
      // @lab 02.1: Push: every worker's gradient and weighted loss reach the server, which adds them into its own; a worker then starts its next gradient from zero.
      // @hint 1: The server gathers the sum of every rank's weighted gradient and loss into its
      // @hint 1: own, one worker after the other; a worker hands its gradient and loss over, and,
      // @hint 1: since it never steps, clears its gradient for the next step.
      // @hint 2: Server: for w = 1 .. p-1, add worker w's gradient into the own one, then receive
      // @hint 2: its loss and add it. Worker: send the gradient, send the loss, zero the gradient.
      // @hint 2: Traps: a plain receive replaces the sum with the last worker's gradient; give the
      // @hint 2: gradient and the loss their own tags so one can never be taken for the other; a
      // @hint 2: worker that keeps its gradient adds the next step's onto it.
      // @hint 3: comm.recv_reduce(replica.grads(), w, ReduceOp::kSum, kGradTag); comm.recv(
      // @hint 3: std::span<double>(&theirs, 1), w, kLossTag); comm.send(replica.grads(), kServer,
      // @hint 3: kGradTag); comm.send(std::span<const double>(&loss, 1), kServer, kLossTag);
      // @hint 3: replica.zero_grads().
      if (server) {
        // One worker at a time, in rank order: the server has one link, and
        // each gradient is added into the sum as it arrives (no scratch buffer).
        for (int w = 1; w < p; ++w) {
          comm.recv_reduce(replica.grads(), w, ReduceOp::kSum, kGradTag);
          double theirs = 0;
          comm.recv(std::span<double>(&theirs, 1), w, kLossTag);
          loss += theirs;
        }
      } else {
        comm.send(replica.grads(), kServer, kGradTag);
        comm.send(std::span<const double>(&loss, 1), kServer, kLossTag);
        replica.zero_grads();  // sent: the next step starts from zero
      }
      // @end
    }
    if (server) {
      auto phase = run.phase("optimizer", {.flops = update.flops, .bytes = update.bytes});
      // The server holds the whole summed gradient: its norm is the global one.
      replica.clip(replica.local_sum_of_squares());
      replica.step(step);  // also zeroes the gradients
    }
    {
      auto phase = run.phase("pull-parameters", {.compute = false});
      // @lab 02.1: Pull: the server sends the new parameters to every worker; a worker receives them into its own.
      // @hint 1: Parameters come out of the server, the same bytes as the gradients that went in.
      // @hint 1: Every worker is waiting for them at once, so the server hands them out to all
      // @hint 1: workers together rather than one worker after the other.
      // @hint 2: Server: post one non-blocking send of the parameters per worker, and only then
      // @hint 2: wait for all of them. Worker: receive into its parameters (not its gradients) from
      // @hint 2: the server. Trap: a blocking send per worker makes each worker also wait until
      // @hint 2: every worker before it has received.
      // @hint 3: sends.push_back(comm.isend(replica.params(), w, kParamTag)) for w = 1 .. p-1;
      // @hint 3: comm.wait_all(sends); comm.recv(replica.params(), kServer, kParamTag).
      if (server) {
        // All sends at once: on a real server they share one link and
        // serialise there, which is the (p−1)·Ψ·e the cost model charges.
        std::vector<Request> sends;
        for (int w = 1; w < p; ++w) sends.push_back(comm.isend(replica.params(), w, kParamTag));
        comm.wait_all(sends);
      } else {
        comm.recv(replica.params(), kServer, kParamTag);
      }
      // @end
    }
    if (server) run.record_loss(step, loss);  // only the server knows the global loss
  }
  run.report(replica);
}

template void dp_server<float>(train::RankRun<float>&);
template void dp_server<double>(train::RankRun<double>&);

}  // namespace dtw::ch02
