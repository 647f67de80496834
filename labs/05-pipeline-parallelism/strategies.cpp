// The four strategies: pp-naive, pp-gpipe, pp-1f1b and pp-interleaved. They
// differ only in the schedule; everything else is train_pipeline:
//
//   1. read the knobs (micro_batches, virtual_stages, balance, checkpoint,
//      sends, check) and reject bad ones on every rank before any message;
//   2. cut the model into p·v chunks (stage_split.cpp) and check the
//      schedule (check_schedule.cpp) — both identical on every rank;
//   3. hold this rank's chunks in a Replica (stage_plan) and run the
//      schedule's list for this rank, step after step (executor.cpp).
//
// Bytes a stage boundary carries per step: m activations forward and m
// gradients back, each rows(mb) × width values: for the GPT 2 · B · S · C
// values per boundary per step, whatever m is. Micro-batching does not add
// traffic; interleaving does (p·v − 1 boundaries instead of p − 1).
#include <algorithm>
#include <string>

#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05 {

PipelineSettings pipeline_settings(const train::Knobs& knobs, ScheduleKind kind,
                                   const train::RunSpec& spec, int ranks) {
  const std::string who = std::string("pp-") + name_of(kind);
  PipelineSettings s;
  s.kind = kind;
  const std::int64_t fallback_m = kind == ScheduleKind::kNaive ? 1 : std::min<std::int64_t>(2 * ranks, spec.batch);
  const std::int64_t m = knobs.get_int("micro_batches", fallback_m);
  DTW_CHECK_ARG(m >= 1 && m < 100000, who << ": micro_batches=" << m << " must be in [1, 100000)");
  DTW_CHECK_ARG(m <= spec.batch, who << ": micro_batches=" << m << " needs a batch of at least " << m
                                      << " rows; the batch has " << spec.batch);
  s.micro_batches = static_cast<int>(m);
  const bool interleaved = kind == ScheduleKind::kInterleaved;
  const std::int64_t v = knobs.get_int("virtual_stages", interleaved ? 2 : 1);
  DTW_CHECK_ARG(v >= 1 && v < 1000, who << ": virtual_stages=" << v << " must be in [1, 1000)");
  DTW_CHECK_ARG(interleaved || v == 1, who << ": virtual_stages=" << v
                                           << " is for pp-interleaved; this schedule runs one chunk per rank");
  s.virtual_stages = static_cast<int>(v);
  s.balance = balance_from_name(knobs.get("balance", "flops"));
  const std::int64_t checkpoint = knobs.get_int("checkpoint", 0), check = knobs.get_int("check", 1);
  DTW_CHECK_ARG(checkpoint == 0 || checkpoint == 1, who << ": checkpoint=" << checkpoint << " must be 0 or 1");
  DTW_CHECK_ARG(check == 0 || check == 1, who << ": check=" << check << " must be 0 or 1");
  s.executor.checkpoint = checkpoint == 1;
  s.check = check == 1;
  const std::string sends = knobs.get("sends", "async");
  DTW_CHECK_ARG(sends == "async" || sends == "blocking",
                who << ": sends=" << sends << " must be async or blocking");
  s.executor.blocking_sends = sends == "blocking";
  return s;
}

std::vector<train::Knob> pipeline_knobs(ScheduleKind kind) {
  // Declared beside pipeline_settings, which reads them, so the two agree.
  const bool naive = kind == ScheduleKind::kNaive;
  std::vector<train::Knob> k = {
      {.name = "micro_batches",
       .default_value = naive ? "1" : "min(2p, batch)",
       .help = "micro-batches per step m, 1 to the batch",
       .default_for = [naive](const train::RunSpec& spec, int ranks, const train::Knobs&) {
         return std::to_string(naive ? 1 : std::min<std::int64_t>(2 * ranks, spec.batch));
       }}};
  if (kind == ScheduleKind::kInterleaved)
    k.push_back({.name = "virtual_stages", .default_value = "2", .help = "chunks per rank v (>= 1)"});
  k.push_back({.name = "balance",
               .default_value = "flops",
               .help = "how units are split into stages: flops, params, blocks or time",
               // With as many chunks as units every balance cuts alike: one unit
               // each, so the embedding's and the head's stages idle. Say so.
               .default_for = [kind](const train::RunSpec& spec, int ranks,
                                     const train::Knobs& given) {
                 const model::ModelConfig config = spec.config();
                 const std::size_t units =
                     model::model_units(config, model::param_layout(config)).size();
                 const std::int64_t chunks =
                     static_cast<std::int64_t>(ranks) *
                     given.get_int("virtual_stages", kind == ScheduleKind::kInterleaved ? 2 : 1);
                 if (static_cast<std::int64_t>(units) != chunks) return std::string("flops");
                 return "flops (forced: " + std::to_string(units) + " units on " +
                        std::to_string(chunks) + " chunks, one each)";
               }});
  k.push_back({.name = "checkpoint",
               .default_value = "0",
               .help = "1: a forward keeps only its input, backward recomputes (0 or 1)"});
  k.push_back({.name = "sends",
               .default_value = "async",
               .help = "async or blocking (blocking can deadlock: the pitfalls)"});
  k.push_back({.name = "check",
               .default_value = "1",
               .help = "1: check_schedule proves the schedule first (0 or 1)"});
  return k;
}

void check_stage_map(const train::RunSpec& spec, Balance balance, int p, int v) {
  const model::ModelConfig config = spec.config();
  const std::vector<model::Unit> units = model::model_units(config, model::param_layout(config));
  const int n = static_cast<int>(units.size()), chunks = p * v;
  DTW_CHECK_ARG(p >= 1 && v >= 1, "stage map: p = " << p << " and v = " << v << " must be >= 1");
  std::string names;
  for (const model::Unit& u : units) names += (names.empty() ? "" : " ") + u.name;
  DTW_CHECK_ARG(chunks <= n, p << " ranks × " << v << " chunk(s) each need " << chunks
                               << " units, but " << config.name << " has " << n << " (" << names
                               << "): use fewer ranks or a deeper model");
  const int blocks = config.kind == model::ModelKind::kGpt ? n - 2 : n;
  DTW_CHECK_ARG(balance != Balance::kBlocks || blocks % chunks == 0,
                "balance=blocks: the " << blocks << " blocks of " << config.name
                                       << " do not divide into p·v = " << p << "·" << v << " = "
                                       << chunks << " chunks");
}

StageMap make_stage_map(const train::RunSpec& spec, Balance balance, int p, int v, int m,
                        Comm* comm) {
  check_stage_map(spec, balance, p, v);
  const model::ModelConfig config = spec.config();
  const int n = static_cast<int>(model::model_units(config, model::param_layout(config)).size());
  const int chunks = p * v;
  StageMap map;
  map.ranks = p;
  map.virtual_stages = v;
  if (balance != Balance::kBlocks) {
    map.chunks = split_units(unit_costs(spec, balance, m, comm), chunks);
    return map;
  }
  // Megatron's split: the blocks (a GPT's transformer blocks, an MLP's
  // layers) in equal runs, the embedding with the first and the head with
  // the last.
  const bool gpt = config.kind == model::ModelKind::kGpt;
  const int blocks = gpt ? n - 2 : n, per = blocks / chunks, off = gpt ? 1 : 0;
  for (int c = 0; c < chunks; ++c)
    map.chunks.push_back({c == 0 ? 0 : off + c * per, c == chunks - 1 ? n : off + (c + 1) * per});
  return map;
}

template <TrainElement T>
void train_pipeline(train::RankRun<T>& run, const Schedule& schedule,
                    const PipelineSettings& settings) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), rank = comm.rank();
  DTW_CHECK_ARG(schedule.ranks == p, "rank " << rank << ": a " << name_of(schedule.kind)
                                             << " schedule for " << schedule.ranks
                                             << " ranks in a world of " << p);
  const StageMap map = make_stage_map(spec, settings.balance, p, schedule.virtual_stages,
                                      schedule.micro_batches, &comm);
  if (settings.check) check_schedule(schedule);
  const model::ModelConfig config = spec.config();
  const model::ParamLayout layout = model::param_layout(config);
  const std::int64_t wte_end = model::tied_wte(config, layout).end;
  train::Replica<T> replica(spec, run.exec(),
                            stage_plan(map, model::model_units(config, layout), wte_end, rank));
  replica.set_times(run.layer_times());
  Executor<T> executor(run, replica, map, settings.executor);
  const auto& actions = schedule.actions[static_cast<std::size_t>(rank)];
  for (std::int64_t step = 0; step < spec.steps; ++step)
    run.record_loss(step, executor.step(actions, step, schedule.micro_batches));
  run.report(replica);
}

template <TrainElement T>
std::int64_t activation_peak(const Schedule& schedule, const StageMap& map,
                             const train::RunSpec& spec, int rank, bool checkpoint) {
  const auto net = train::Network<T>::make(spec.config());
  std::vector<train::Batch> batches;
  for (int mb = 0; mb < schedule.micro_batches; ++mb)
    batches.push_back(train::make_batch(spec, 0, mb, schedule.micro_batches));
  std::int64_t live = 0, peak = 0;
  for (const Action& a : schedule.actions[static_cast<std::size_t>(rank)]) {
    const model::UnitRange run = map.chunks[static_cast<std::size_t>(a.chunk)];
    const train::Batch& b = batches[static_cast<std::size_t>(a.mb)];
    const std::int64_t held = net->activation_bytes(run, b);  // a forward keeps this much
    const std::int64_t input = run.begin > 0 ? net->boundary_elements(run.begin, b) *
                                                   static_cast<std::int64_t>(sizeof(T)) : 0;
    if (!checkpoint) {
      // Every forward adds its activations, its backward frees them.
      if (a.op == Op::kForward) live += held;
      peak = std::max(peak, live);
      if (a.op == Op::kBackward) live -= held;
    } else {
      DTW_TODO("05.5: Count what checkpointing keeps: the saved inputs received so far, plus the one chunk being computed.");
    }
  }
  return peak;
}

void check_pipeline_run(const train::Knobs& knobs, ScheduleKind kind, const train::RunSpec& spec,
                        int ranks) {
  const PipelineSettings s = pipeline_settings(knobs, kind, spec, ranks);
  check_stage_map(spec, s.balance, ranks, s.virtual_stages);
}

namespace {
template <class T>
void run_kind(train::RankRun<T>& run, ScheduleKind kind) {
  const int p = run.comm().size();
  const PipelineSettings s = pipeline_settings(run.knobs(), kind, run.spec(), p);
  train_pipeline(run, make_schedule(kind, p, s.micro_batches, s.virtual_stages), s);
}
}  // namespace

template <TrainElement T>
void pp_naive(train::RankRun<T>& run) { run_kind(run, ScheduleKind::kNaive); }
template <TrainElement T>
void pp_gpipe(train::RankRun<T>& run) { run_kind(run, ScheduleKind::kGPipe); }
template <TrainElement T>
void pp_1f1b(train::RankRun<T>& run) { run_kind(run, ScheduleKind::kOneFOneB); }
template <TrainElement T>
void pp_interleaved(train::RankRun<T>& run) { run_kind(run, ScheduleKind::kInterleaved); }

#define DTW_CH05_INSTANTIATE(T)                                                          \
  template void train_pipeline<T>(train::RankRun<T>&, const Schedule&, const PipelineSettings&); \
  template void pp_naive<T>(train::RankRun<T>&);                                         \
  template void pp_gpipe<T>(train::RankRun<T>&);                                         \
  template void pp_1f1b<T>(train::RankRun<T>&);                                          \
  template void pp_interleaved<T>(train::RankRun<T>&);                                   \
  template std::int64_t activation_peak<T>(const Schedule&, const StageMap&,               \
                                           const train::RunSpec&, int, bool);
DTW_CH05_INSTANTIATE(float)
DTW_CH05_INSTANTIATE(double)

}  // namespace dtw::ch05
