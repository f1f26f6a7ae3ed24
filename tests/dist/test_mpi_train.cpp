// Data-parallel training under mpirun (Open MPI), against one process: the heed_dist_train driver
// trains a small GPT with gradient accumulation and dropout; the losses, the shared evaluation
// and the parameters' bytes must be those of one process with the same A. And a rank that dies
// or fails ends the whole job with an error, within seconds, instead of leaving the others waiting.
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "support/process.h"

using namespace heed::test;

namespace {

std::string driver() { return std::string(HEED_BINARY_DIR) + "/heed_dist_train"; }

std::string mpirun() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"})
    if (std::filesystem::exists(std::string(dir) + "/mpirun")) return std::string(dir) + "/mpirun";
  FAIL("mpirun not found (apt-get install openmpi-bin)");
  return {};
}

// mpirun as root in a container, more ranks than cores on a CI machine, and ranks that yield the
// core while they wait (two ranks spinning on two busy cores slow everything down).
std::vector<std::string> mpirun_np(int np) {
  return {mpirun(), "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1",
          "-np", std::to_string(np), driver()};
}

// What must be identical between runs: the per-step losses and the evaluation (all but the
// first line, which names the process count, and the timing line).
std::string results(const std::string& out) {
  std::string kept;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("step ", 0) == 0 || line.rfind("eval ", 0) == 0) kept += line + "\n";
  return kept;
}

// Options for running `cmd` for at most `seconds`. Under AddressSanitizer, leak checking is off
// in MPI jobs: Open MPI 4.1.4 leaks at MPI_Finalize (in ompi_op_base_op_select, and in components
// it unloads, whose frames LeakSanitizer cannot name). heed's side of them runs leak-checked in
// the thread-rank tests (test_grad_reducer.cpp) and in the plain runs here; other checks stay on.
RunOptions options_for(const std::vector<std::string>& cmd, double seconds) {
  RunOptions o;
  o.timeout_s = seconds;
  if (cmd[0] == mpirun()) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    o.env.push_back(std::string("ASAN_OPTIONS=") + (asan && *asan ? std::string(asan) + ":" : "") + "detect_leaks=0");
  }
  return o;
}

ProcessResult run_for(const std::vector<std::string>& cmd, double seconds) {
  return run_process(cmd, options_for(cmd, seconds));
}

struct Trained {
  std::string results, params;
};

Trained train(std::vector<std::string> launcher, const std::vector<std::string>& flags, const ScratchDir& dir,
              const std::string& name) {
  const ProcessResult r = run_for(cat(cat(std::move(launcher), flags), {"--out", dir / name}), 240);
  INFO(r.out << r.err);
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code == 0);
  Trained t{results(r.out), read_file(dir / name)};
  REQUIRE(std::count(t.results.begin(), t.results.end(), '\n') >= 2);
  REQUIRE(t.params.size() > 1000);
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("mpirun -np 2 with 2 micro-batches trains the bits of one process with 2", "[dist][mpi]") {
  ScratchDir dir("mpi2");
  const std::vector<std::string> flags{"--accum", "2", "--steps", "5"};
  const ProcessResult plain = run_for(cat({driver()}, flags), 120);
  REQUIRE(plain.exit_code == 0);
  REQUIRE_THAT(plain.out, Catch::Contains("ranks 1 micro_batches 2") && Catch::Contains("mpi_loaded no"));
  const Trained one = train({driver()}, flags, dir, "one.safetensors");
  const Trained two = train(mpirun_np(2), flags, dir, "two.safetensors");
  REQUIRE(two.results == one.results);
  REQUIRE(two.params == one.params);
}

TEST_CASE("mpirun -np 3 trains the bits of one process for A = 3 and A = 6, with and without overlap",
          "[dist][mpi]") {
  ScratchDir dir("mpi3");
  for (const char* A : {"3", "6"}) {
    INFO("A " << A);
    const std::vector<std::string> flags{"--accum", A, "--steps", "4", "--bucket-bytes", "20000"};
    const Trained one = train({driver()}, flags, dir, "one.safetensors");
    const Trained three = train(mpirun_np(3), flags, dir, "three.safetensors");
    REQUIRE(three.results == one.results);
    REQUIRE(three.params == one.params);
    if (std::string(A) == "6") {
      const Trained plain_reduce = train(mpirun_np(3), cat(flags, {"--overlap", "0"}), dir, "no_overlap.safetensors");
      REQUIRE(plain_reduce.params == one.params);
    }
  }
}

TEST_CASE("a rank killed by SIGKILL ends the whole job with an error within seconds", "[dist][mpi]") {
  const auto t0 = std::chrono::steady_clock::now();
  // Rank 1 dies at step 2; ranks 0 and 2 would wait for its gradients forever on their own.
  const ProcessResult r =
      run_for(cat(mpirun_np(3), {"--steps", "1000", "--die-rank", "1", "--die-step", "2"}), 120);
  const double took = seconds_since(t0);
  INFO(r.out << r.err << "took " << took << " s");
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.err, Catch::Contains("rank 1") && Catch::Contains("signal 9"));
  REQUIRE_THAT(r.out, Catch::Contains("step 1 loss") && !Catch::Contains("step 3 loss"));
  REQUIRE(took < 60);  // generous for a loaded CI machine; it takes ~1-2 s on an idle one
}

TEST_CASE("an error on one rank ends every rank at once, naming the rank", "[dist][mpi]") {
  const ProcessResult r =
      run_for(cat(mpirun_np(3), {"--steps", "1000", "--fail-rank", "2", "--fail-step", "1"}), 120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.err, Catch::Contains("heed: error: rank 2 of 3: rank 2 failed on purpose at step 1"));
  REQUIRE_THAT(r.out, !Catch::Contains("step 2 loss"));
}

TEST_CASE("parameters that differ across ranks stop the run, naming the tensor and the rank", "[dist][mpi]") {
  const ProcessResult r = run_for(cat(mpirun_np(2), {"--steps", "3", "--corrupt-rank", "1"}), 120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.err, Catch::Contains("the processes' parameters differ: 'transformer.wpe.weight' on rank 1 is not "
                                      "rank 0's"));
}

TEST_CASE("Ctrl-C to mpirun: every rank stops at once, rank 0 saves the step's starting state", "[dist][mpi]") {
  ScratchDir dir("mpi-stop");
  // mpirun's defaults: the ranks get SIGCONT at once, SIGTERM 1 s later, SIGKILL 1 s after that.
  const std::vector<std::string> cmd = cat(mpirun_np(2), {"--steps", "100000", "--out", dir / "saved.safetensors"});
  const pid_t pid = spawn_process(cmd, dir / "out", dir / "err", options_for(cmd, 120));
  const auto t0 = std::chrono::steady_clock::now();
  while (read_file(dir / "out").find("step 2 loss") == std::string::npos) {
    REQUIRE(seconds_since(t0) < 90);
    REQUIRE(waitpid(pid, nullptr, WNOHANG) == 0);  // still running
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(::kill(pid, SIGINT) == 0);  // what Ctrl-C does: the ranks are in process groups of their own
  ProcessResult r;
  wait_process(pid, r, 60);
  r.out = read_file(dir / "out");
  r.err = read_file(dir / "err");
  INFO(r.out << r.err);
  REQUIRE(r.signal == 0);
  const size_t stop = r.out.find("stopped by signal 18 in step");  // SIGCONT: mpirun's early notice
  REQUIRE(stop != std::string::npos);
  REQUIRE(r.out.find("stopped by", stop + 1) == std::string::npos);  // rank 0 alone, once
  REQUIRE(read_file(dir / "saved.safetensors").size() > 1000);
  REQUIRE_THAT(r.out, !Catch::Contains("eval "));  // it stopped, it did not run to the end
}
