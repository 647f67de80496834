// The MPI peer: MPI_Allreduce measured in the same report. MPI ranks are
// processes, so the report starts `mpirun -np N <this program> --mpi-child`
// and reads one line per size back from rank 0.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "dispatch.h"
#include "process.h"
#include "report.h"
#if DTW_BENCH_HAVE_MPI
#include <mpi.h>

#include "dtw/mpi.h"
#endif

namespace dtw::bench {

#if DTW_BENCH_HAVE_MPI
namespace {

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int32_t>) return MPI_INT32_T;
  else return MPI_INT64_T;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    default: return MPI_SUM;  // MPI has no average: measured and checked as a sum
  }
}

template <class T>
void child_body(const Options& o) {
  int r = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  const ReduceOp op = o.op == ReduceOp::kAvg ? ReduceOp::kSum : o.op;
  std::vector<T> data(static_cast<std::size_t>(*std::ranges::max_element(o.sizes) / sizeof(T)));
  for (std::int64_t bytes : o.sizes) {
    const int count = static_cast<int>(bytes / static_cast<std::int64_t>(sizeof(T)));
    for (int i = 0; i < count; ++i) data[i] = static_cast<T>(input_value(r, i, op, false));
    MPI_Allreduce(MPI_IN_PLACE, data.data(), count, mpi_type<T>(), mpi_op(op), MPI_COMM_WORLD);
    long long bad = 0, all_bad = 0;
    for (int i = 0; i < count; ++i)
      bad += close_enough(static_cast<double>(data[i]), expected_value(p, i, op), o.dtype, p) ? 0 : 1;
    MPI_Reduce(&bad, &all_bad, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    for (int i = 0; i < count; ++i) data[i] = static_cast<T>(input_value(r, i, op, true));
    const int iters = iters_for(o, bytes);
    for (int w = 0; w < warmup_for(o, bytes); ++w)
      MPI_Allreduce(MPI_IN_PLACE, data.data(), count, mpi_type<T>(), mpi_op(op), MPI_COMM_WORLD);
    double best = std::numeric_limits<double>::infinity();
    for (int t = 0; t < o.trials; ++t) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int it = 0; it < iters; ++it)
        MPI_Allreduce(MPI_IN_PLACE, data.data(), count, mpi_type<T>(), mpi_op(op), MPI_COMM_WORLD);
      double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
      MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      best = std::min(best, slowest);
    }
    if (r == 0) std::printf("DTW_MPI %lld %.9e %lld\n", static_cast<long long>(bytes), best, all_bad);
  }
}

}  // namespace

int mpi_child_main(const Options& o) {
  // dtw's MPI setup (MPI_Init_thread, finalised at exit), which the mpi
  // backend's launches below need as well.
  dtw::mpi::init();
  if (o.backend == "mpi") {
    // Chapter 01's algorithms over MPI point-to-point; rank 0 reports the rows.
    const std::vector<Series> rows = run_dtw_algorithms(o, Model{});
    if (dtw::mpi::world_rank() == 0)
      for (const Series& s : rows)
        for (const Sample& x : s.samples)
          std::printf("DTW_ALGO %s %lld %.9e %lld\n", s.name.substr(0, s.name.find(' ')).c_str(),
                      static_cast<long long>(x.bytes), x.seconds, static_cast<long long>(x.wrong));
  }
  with_type(o.dtype, [&](auto zero) { child_body<decltype(zero)>(o); });
  return 0;
}

std::vector<Series> run_mpi_peer(const Options& o, const char* self_exe) {
  const int p = o.ranks;
  Series s{"mpi allreduce", "peer", 2.0 * (p - 1) / p, "", {}};
  std::vector<Series> algos;
  if (o.backend == "mpi")
    for (const std::string& a : o.algos) algos.push_back({a + " (mpi)", "dtw", s.bus_factor, "", {}});
  auto skipped = [&](const std::string& why) {
    s.samples.clear();
    s.note = why;
    std::vector<Series> out;
    for (Series& a : algos) {
      a.samples.clear();
      a.note = why;
      out.push_back(a);
    }
    out.insert(out.begin(), s);
    return out;
  };
  // The child is run like every child of dtw (process.h): its wait status is
  // decoded, and a peer run that failed fails the report, keeping the lines in
  // which OpenMPI names the rank that died.
  std::vector<std::string> cmd{"mpirun", "--oversubscribe", "-np", std::to_string(p), self_exe,
                               "--mpi-child", "--ranks", std::to_string(p), "--dtype",
                               o.dtype == DataType::kFloat32   ? "float"
                               : o.dtype == DataType::kFloat64 ? "double"
                               : o.dtype == DataType::kInt32   ? "int32"
                                                               : "int64",
                               "--op", std::string(name_of(o.op)), "--trials",
                               std::to_string(o.trials), "--sizes"};
  std::string sizes;
  for (std::size_t k = 0; k < o.sizes.size(); ++k) sizes += (k ? "," : "") + std::to_string(o.sizes[k]);
  cmd.push_back(sizes);
  if (o.iters > 0) cmd.insert(cmd.end(), {"--iters", std::to_string(o.iters)});
  if (o.warmup >= 0) cmd.insert(cmd.end(), {"--warmup", std::to_string(o.warmup)});
  if (o.backend == "mpi") {
    std::string list;
    for (std::size_t k = 0; k < o.algos.size(); ++k) list += (k ? "," : "") + o.algos[k];
    cmd.insert(cmd.end(), {"--backend", "mpi", "--algo", list});
  }
  cli::ProcessOptions run{.output = cli::Output::kCapture};
  // OpenMPI refuses to run as root unless told twice; containers often are root.
  if (geteuid() == 0)
    run.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  const cli::ProcessResult result = cli::run_process(cmd, run);
  if (result.exit_code == 127 && result.signal == 0 && result.output.find("cannot run mpirun") != std::string::npos)
    return skipped("skipped: built with MPI but mpirun is not on PATH");
  const auto elem = static_cast<std::int64_t>(size_of(o.dtype));
  std::istringstream lines(result.output);
  char name[64];
  for (std::string line; std::getline(lines, line);) {
    long long bytes = 0, wrong = 0;
    double secs = 0;
    if (std::sscanf(line.c_str(), "DTW_MPI %lld %lf %lld", &bytes, &secs, &wrong) == 3) {
      s.samples.push_back({bytes, bytes / elem, secs, wrong, -1});
    } else if (std::sscanf(line.c_str(), "DTW_ALGO %63s %lld %lf %lld", name, &bytes, &secs, &wrong) == 4) {
      for (Series& a : algos)
        if (a.name == std::string(name) + " (mpi)") a.samples.push_back({bytes, bytes / elem, secs, wrong, -1});
    }
  }
  bool complete = s.samples.size() == o.sizes.size();
  for (const Series& a : algos) complete = complete && a.samples.size() == o.sizes.size();
  if (!result.ok() || !complete) {
    std::string why = "FAILED: mpirun -np " + std::to_string(p) + " ended with " + result.describe();
    if (result.ok()) why += " but reported only part of the sizes";
    const std::string lines_told = result.failure_lines();
    if (!lines_told.empty()) why += "; it said: " + lines_told;
    std::replace(why.begin(), why.end(), '\n', ' ');
    std::vector<Series> out = skipped(why);
    for (Series& x : out) x.failed = true;
    return out;
  }
  s.note = "mpirun -np " + std::to_string(p) + " (processes), MPI_Allreduce in place";
  if (o.op == ReduceOp::kAvg) s.note += "; MPI has no avg: measured as sum";
  for (Series& a : algos) a.note = "chapter 01's algorithm over MPI point-to-point (mpi backend)";
  std::vector<Series> out{s};
  out.insert(out.end(), algos.begin(), algos.end());
  return out;
}
#else
int mpi_child_main(const Options&) {
  std::fprintf(stderr, "dtw_bench_collectives: built without MPI\n");
  return 2;
}
std::vector<Series> run_mpi_peer(const Options&, const char*) {
  return {{"mpi allreduce", "peer", 1, "skipped: built without MPI (libopenmpi-dev)", {}}};
}
#endif

}  // namespace dtw::bench
