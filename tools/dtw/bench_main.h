#pragma once
// The one way a benchmark program (`dtw bench NAME`: build/bench/dtw_bench_*)
// reads its command line, runs and exits, so that every one keeps dtw's
// exit-code convention (exit_codes.h) and behaves alike in a pipe:
//
//   int main(int argc, char** argv) {
//     CLI::App app{"...", "dtw bench zero"};
//     std::int64_t steps = 1;
//     add_int(app, "--steps", steps, "steps per run", {1});   // cli_values.h
//     return dtw::cli::bench_main(app, argc, argv, [&] {
//       dtw::check_writable(svg, "--svg");                     // before measuring
//       ...measure, print, write...
//       return dtw::cli::kExitOk;
//     });
//   }
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace dtw::cli {

// Makes stdout line-buffered (progress reaches `| tee log` as it is printed),
// parses `app`, then runs `body` and returns its status. --help: 0. A parse
// error (an unknown option, a value out of range): the message, and 2. From
// `body`: its status; CLI::ParseError (cli_values.h's parse_* called there),
// or dtw::InvalidArgument raised before any rank ran (a bad value, an output
// that cannot be written): 2; any other exception (an error,
// a deadlock, a failed write, InvalidArgument from inside a run): 3, and
// std::bad_alloc as "out of memory (std::bad_alloc) with the options
// --batch 100000 --size 8: use smaller sizes", also 3. Every
// message starts with the app's name ("dtw bench zero: ...").
int bench_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// Whose code the rows time ("chapter 02's solution (...)", "your chapter 02
// lab (...)"), set before main by the one-line source a chapter's benchmark
// program is linked with (cmake/DtwChapter.cmake).
void set_rows_code(const char* who);
// Prints "NAME: timing <who>" once, if set: a benchmark calls it after its
// checks, before it measures (a refusal prints only why); bench_main calls it
// after a body that did not. Unset: nothing is printed.
void print_rows_code();

// Runs gnuplot with `args` for a plot that is an extra beside its data (a CSV,
// a table): true when it drew it; otherwise prints why there is no plot ("no
// plot: gnuplot not found (...)", "no plot: gnuplot ended with exit status 1:
// <its error lines>") and returns false. Like every child, through run_process.
bool draw_with_gnuplot(const std::vector<std::string>& args);

}  // namespace dtw::cli
