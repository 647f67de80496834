// dtw_bench_collectives: the nccl-tests-style allreduce report that
// `dtw bench collectives` runs. See chapters/01-collectives/README.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <thread>
#include <cctype>
#include <limits>
#include <cstdio>
#include <iostream>

#include "dtw/config.h"
#include "dtw/errors.h"
#include "bench_main.h"
#include "cli_values.h"
#include "dtw/output_file.h"
#include "report.h"

namespace dtw::bench {
namespace {

const std::vector<std::string> kAlgos{"naive", "binomial", "ring", "rabenseifner", "direct"};

std::int64_t parse_bytes(std::string s) {
  std::string t;
  for (char c : s) t += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // Accept 64K, 64KB and 64KiB alike (all binary).
  if (t.ends_with("IB")) t.resize(t.size() - 2);
  else if (t.ends_with("B")) t.pop_back();
  std::int64_t scale = 1;
  if (!t.empty() && std::string("KMG").find(t.back()) != std::string::npos) {
    scale = std::int64_t{1} << (10 * (1 + static_cast<int>(std::string("KMG").find(t.back()))));
    t.pop_back();
  }
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DTW_CHECK_ARG(used == t.size() && !t.empty() && v >= 0,
                "--sizes: '" << s << "' is not a size (examples: 8, 64K, 256M, 1G)");
  DTW_CHECK_ARG(v <= std::numeric_limits<std::int64_t>::max() / scale,
                "--sizes: '" << s << "' is too large");
  return v * scale;
}

// "MIN:MAX[:xF]" (factor F, default 2; MAX is always included) or "A,B,C".
std::vector<std::int64_t> parse_sizes(const std::string& spec) {
  std::vector<std::int64_t> out;
  if (spec.find(':') == std::string::npos) {
    std::size_t start = 0;
    while (start <= spec.size()) {
      const std::size_t comma = std::min(spec.find(',', start), spec.size());
      out.push_back(parse_bytes(spec.substr(start, comma - start)));
      start = comma + 1;
    }
    return out;
  }
  const std::size_t c1 = spec.find(':'), c2 = spec.find(':', c1 + 1);
  const std::int64_t lo = parse_bytes(spec.substr(0, c1));
  const std::int64_t hi = parse_bytes(spec.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1));
  std::int64_t factor = 2;
  if (c2 != std::string::npos) {
    std::string f = spec.substr(c2 + 1);
    if (!f.empty() && (f[0] == 'x' || f[0] == 'X')) f.erase(0, 1);
    factor = parse_bytes(f);
  }
  DTW_CHECK_ARG(lo >= 1 && lo <= hi && factor >= 2,
                "--sizes '" << spec << "': need 1 <= MIN <= MAX and a factor >= 2");
  for (std::int64_t s = lo; s < hi; s *= factor) out.push_back(s);
  out.push_back(hi);
  return out;
}

DataType parse_dtype(const std::string& s) {
  if (s == "float" || s == "float32") return DataType::kFloat32;
  if (s == "double" || s == "float64") return DataType::kFloat64;
  if (s == "int32") return DataType::kInt32;
  if (s == "int64") return DataType::kInt64;
  DTW_CHECK_ARG(false, "--dtype '" << s << "': use float, double, int32 or int64");
  return DataType::kByte;
}

ReduceOp parse_op(const std::string& s) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg})
    if (name_of(op) == s) return op;
  DTW_CHECK_ARG(false, "--op '" << s << "': use sum, prod, min, max or avg");
  return ReduceOp::kSum;
}

}  // namespace

#if !DTW_HAVE_NCCL
// Builds without NCCL have no nccl_report.cpp: the option is there, and says why it cannot run.
int nccl_main(Options, bool) {
  std::fprintf(stderr, "dtw_bench_collectives: --backend nccl: this build has no NCCL (see docs/gpu.md)\n");
  return 2;  // bad usage for this build, like --backend mpi without MPI
}
#endif
}  // namespace dtw::bench

int main(int argc, char** argv) {
  using namespace dtw::bench;
  using dtw::cli::add_int;
  Options o;
  std::string algos = "all", sizes = "8:64M:x8", dtype = "float", op = "sum";
  bool no_peers = false, mpi_child = false;
  CLI::App app{"nccl-tests-style allreduce report: chapter 01's algorithms next to Gloo, MPI, memcpy "
               "and an ideal hand-fused allreduce, with the alpha-beta-gamma model",
               "dtw bench collectives"};
  add_int(app, "--ranks", o.ranks, "ranks (with --backend nccl, default one per GPU)", {1, 256});
  app.add_option("--algo", algos,
                 "comma list of naive,binomial,ring,rabenseifner,direct (each once), or all");
  app.add_option("--sizes", sizes, "bytes per rank: MIN:MAX[:xF] (K/M/G = 2^10/20/30) or a comma list");
  // Given, they are used as they are; not given, they are chosen per size.
  add_int(app, "--iters", o.iters, "timed calls per size (default: about 256 MiB worth, 5..2000)",
          {1, 1000000})
      ->default_str("");
  add_int(app, "--warmup", o.warmup, "untimed calls per size (default: iters/5, 1..50)",
          {0, 1000000})
      ->default_str("");
  add_int(app, "--trials", o.trials, "timed trials per size; the fastest is reported", {1, 100});
  app.add_option("--dtype", dtype, "float, double, int32 or int64");
  app.add_option("--op", op, "sum, prod, min, max or avg");
  dtw::cli::add_path(app, "--json", o.json_path, "write the results as JSON");
  dtw::cli::add_path(app, "--plot", o.plot_path, "write busbw vs size as SVG (needs gnuplot)");
  app.add_flag("--no-peers", no_peers, "only chapter 01's algorithms");
  dtw::cli::add_name(app, "--backend", o.backend,
                     "threads (default); mpi: also every algorithm over MPI point-to-point under "
                     "mpirun, next to MPI_Allreduce and the threads figures, with their ratio; nccl: "
                     "every algorithm on the GPUs (device memory) next to NCCL's allreduce",
                     {"threads", "mpi", "nccl"});
  app.add_flag("--mpi-child", mpi_child, "internal: the MPI peer's body, started by mpirun")->group("");
  // dtw's exit-code convention (dtw --help): 0 ok, 2 bad usage, 3 a run failed.
  return dtw::cli::bench_main(app, argc, argv, [&] {
    for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
    o.dtype = parse_dtype(dtype);
    o.op = parse_op(op);
    o.sizes = parse_sizes(sizes);
    const auto elem = static_cast<std::int64_t>(dtw::size_of(o.dtype));
    for (auto& s : o.sizes) {
      DTW_CHECK_ARG(s >= elem, "--sizes: " << s << " bytes is less than one " << dtype << " (" << elem << " bytes)");
      DTW_CHECK_ARG(s / elem <= (std::int64_t{1} << 31) - 1, "--sizes: " << s << " bytes is more than 2^31-1 elements");
      s -= s % elem;  // whole elements
    }
    for (std::size_t i = 1; i < o.sizes.size(); ++i)
      DTW_CHECK_ARG(std::find(o.sizes.begin(), o.sizes.begin() + static_cast<std::ptrdiff_t>(i),
                              o.sizes[i]) == o.sizes.begin() + static_cast<std::ptrdiff_t>(i),
                    "--sizes " << sizes << ": " << o.sizes[i] << " bytes"
                               << " is measured twice (each size once; sizes are rounded down "
                               << "to whole " << dtype << " elements)");
    o.peers = !no_peers;
    // One name once: a name given twice would run (and print) its rows twice.
    o.algos = algos == "all" ? kAlgos : dtw::cli::parse_name_list("--algo", algos, kAlgos);
    // Outputs are checked before anything is measured.
    if (!mpi_child) {
      if (!o.json_path.empty()) dtw::check_writable(o.json_path, "--json");
      const std::string plot_data = o.plot_path.empty() ? "" : plot_data_path(o.plot_path);
      if (!o.plot_path.empty()) dtw::check_writable(o.plot_path, "--plot");
      if (!o.plot_path.empty()) dtw::check_writable(plot_data, "--plot (its data)");
      dtw::check_distinct_outputs(
          {{o.json_path, "--json"}, {o.plot_path, "--plot"}, {plot_data, "--plot (its data)"}});
    }
    if (mpi_child) return mpi_child_main(o);
    if (o.backend == "nccl") return nccl_main(o, app.count("--ranks") > 0);
    DTW_CHECK_ARG(o.backend != "mpi" || DTW_BENCH_HAVE_MPI,
                  "--backend mpi: this build has no MPI (install libopenmpi-dev and rebuild)");
    // Ranks beyond the cores take turns on them: a message then waits for its
    // receiver to be scheduled, which no alpha-beta model describes.
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (o.ranks > static_cast<int>(cores))
      std::fprintf(stderr,
                   "dtw_bench_collectives: warning: %d ranks on %u cores: ranks share cores, so "
                   "times include waiting to be scheduled, and the modeled times (alpha-beta-gamma) "
                   "will not hold; use --ranks %u or fewer for figures that compare with the "
                   "model\n",
                   o.ranks, cores, cores);
    const Model m = fit_model(o);
    Options on_threads = o;
    on_threads.backend = "threads";
    std::vector<Series> all = run_dtw_algorithms(on_threads, m);
    if (o.backend == "mpi")
      for (Series& s : all) s.name += " (threads)";
    if (o.backend == "mpi") {
      // The same algorithms on processes; Gloo and the bounds stay out of this run.
      for (auto& s : run_mpi_peer(o, argv[0])) all.push_back(std::move(s));
    } else if (o.peers) {
      for (auto& s : run_peers(o)) all.push_back(std::move(s));
      for (auto& s : run_mpi_peer(o, argv[0])) all.push_back(std::move(s));
    }
    print_report(o, m, all);
    if (!o.json_path.empty()) write_json(o, m, all);
    if (!o.plot_path.empty()) write_plot(o, all);
    // A peer run that failed (a rank killed, mpirun's error) fails the
    // report: its rows say why, and the status says it was not a success.
    for (const Series& s : all)
      if (s.failed) {
        std::fprintf(stderr, "dtw_bench_collectives: %s: %s\n", s.name.c_str(), s.note.c_str());
        return 3;
      }
    return 0;
  });
}
