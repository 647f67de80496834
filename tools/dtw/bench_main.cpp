#include "bench_main.h"

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli_values.h"
#include "dtw/errors.h"
#include "exit_codes.h"
#include "process.h"

namespace dtw::cli {

namespace {
const char* rows_code = nullptr;
bool rows_code_printed = false;
std::string bench_name;
}  // namespace

void set_rows_code(const char* who) { rows_code = who; }

void print_rows_code() {
  if (rows_code == nullptr || rows_code_printed) return;
  rows_code_printed = true;
  fmt::print("{}: timing {}\n", bench_name, rows_code);
}

int bench_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  std::setvbuf(stdout, nullptr, _IOLBF, 1 << 16);
  const std::string name = app.get_name().empty() ? std::string(argv[0]) : app.get_name();
  // Errors go to stderr after what stdout already holds, in that order.
  const auto refuse = [&](const std::string& message, int status) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: {}\n", name, message);
    return status;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (105, 109, ...) would break the one convention.
    return refuse(fmt::format("{} ({} --help lists the options)", cli::parse_error_text(e), name),
                  kExitUsage);
  }
  // The options as given, for an error that did not name them.
  std::string given;
  for (int i = 1; i < argc; ++i) given += fmt::format("{}{}", i > 1 ? " " : "", argv[i]);
  bench_name = name;
  try {
    const int status = body();
    if (status == 0) print_rows_code();
    return status;
  } catch (const CLI::ParseError& e) {
    return refuse(e.what(), kExitUsage);  // a value the body parsed (cli_values.h)
  } catch (const InvalidArgument& e) {
    // A rank of a run has its number set: the run had started, so it failed.
    return refuse(usage_text(e), e.rank() < 0 ? kExitUsage : kExitRunFailed);
  } catch (const std::bad_alloc& e) {
    // An allocation no estimate refused: say so, and with which options.
    return refuse(fmt::format("out of memory ({}) with {}: use smaller sizes", e.what(),
                              given.empty() ? std::string("the default options")
                                            : "the options " + given),
                  kExitRunFailed);
  } catch (const std::exception& e) {
    return refuse(e.what(), kExitRunFailed);
  }
}

bool draw_with_gnuplot(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"gnuplot"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult plot = run_process(argv, {.output = Output::kCapture});
  if (plot.exit_code == 127 && plot.output.find("cannot run gnuplot") != std::string::npos) {
    fmt::print("no plot: gnuplot not found (apt-get install gnuplot-nox)\n");
    return false;
  }
  if (!plot.ok()) {
    fmt::print("no plot: gnuplot ended with {}: {}\n", plot.describe(), plot.failure_lines());
    return false;
  }
  return true;
}

}  // namespace dtw::cli
