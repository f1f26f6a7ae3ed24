// `heed train` and `heed bench` under mpirun (Open MPI) against one process with the same
// --grad-accum: the same losses, evaluations and model bytes for every process count dividing A;
// Ctrl-C saves once and ends every rank; a killed rank ends the job with an error in seconds;
// SIGKILL of the whole job then --resume with another process count continues the run bit for bit;
// a process count that does not divide A is refused in one line. And a plain run loads no MPI.
#include <regex>
#include <sstream>

#include "mpirun.h"
#include "support/process.h"

using namespace heed::test;

namespace {

// A tiny GPT with dropout, so that the micro-batches' dropout streams are checked too.
std::vector<std::string> recipe(const std::string& out, int64_t max_iters, int64_t grad_accum) {
  return {"train", "--out", out, "--max-iters", std::to_string(max_iters), "--grad-accum", std::to_string(grad_accum),
          "--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "16", "--batch-size", "4",
          "--dropout", "0.1", "--eval-interval", "5", "--eval-iters", "3", "--log-interval", "1", "--threads", "1",
          "--sample-tokens", "0"};
}

std::vector<std::string> plain_heed() { return {heed_exe()}; }
std::vector<std::string> heed_on(int np) { return mpirun_np(np, heed_exe()); }

ProcessResult run_job(const std::vector<std::string>& cmd, double seconds = 120) {
  return run_process(cmd, mpi_options(cmd, seconds * kTimeScale));
}

// What must be identical between two runs of one recipe: the losses printed per iteration and the
// evaluations (without the speed and time columns), the log without its times, the model's bytes.
struct Run {
  std::string losses, log, model;
};

std::string without_times(const std::string& text) {
  static const std::regex times(R"(, [0-9.]+ tok/s.*|"elapsed_s":[0-9.e+-]+,?|,?"tok_s":[0-9.e+-]+)");
  std::string kept;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("iter ", 0) == 0 || line.rfind("eval ", 0) == 0 || line.rfind("{", 0) == 0)
      kept += std::regex_replace(line, times, "") + "\n";
  return kept;
}

Run train(const std::vector<std::string>& launcher, const std::vector<std::string>& args, const std::string& out) {
  const ProcessResult r = run_job(cat(launcher, args));
  require_ok(r);
  Run run{without_times(r.out), without_times(read_file(out + "/log.jsonl")), read_file(out + "/model.safetensors")};
  INFO(r.out);
  REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') > 5);
  REQUIRE(r.out.find("heed train:") == r.out.rfind("heed train:"));  // rank 0 alone prints
  REQUIRE(run.model.size() > 1000);
  return run;
}

void require_same(const Run& a, const Run& b) {
  CHECK(a.losses == b.losses);
  CHECK(a.log == b.log);
  REQUIRE(a.model == b.model);
}

// Starts `cmd` and waits until `file` contains `text` (the job still running).
pid_t start_and_wait_for(const std::vector<std::string>& cmd, const ScratchDir& dir, const std::string& file,
                         const std::string& text) {
  const pid_t pid = spawn_process(cmd, dir / "job.out", dir / "job.err", mpi_options(cmd, 300 * kTimeScale));
  const auto t0 = std::chrono::steady_clock::now();
  while (read_file(file).find(text) == std::string::npos) {
    INFO(read_file(dir / "job.out") << read_file(dir / "job.err"));
    REQUIRE(seconds_since(t0) < 120 * kTimeScale);
    REQUIRE(waitpid(pid, nullptr, WNOHANG) == 0);  // still running
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pid;
}

// Sends `sig` to `target` (mpirun or one of its ranks), then waits for the job started by
// start_and_wait_for; `took` is the time from the signal to the job's end.
ProcessResult signal_and_wait(pid_t job, pid_t target, int sig, const ScratchDir& dir, double& took) {
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(target, sig) == 0);
  ProcessResult r;
  wait_process(job, r, 60 * kTimeScale);
  took = seconds_since(t0);
  r.out = read_file(dir / "job.out");
  r.err = read_file(dir / "job.err");
  return r;
}

}  // namespace

TEST_CASE("heed train under mpirun -np 2 and -np 3 trains the bits of one process with --grad-accum",
          "[dist][mpi][cli]") {
  ScratchDir dir("mpi-heed");
  // The floor: N = 2 with A = 2.
  const Run one2 = train(plain_heed(), recipe(dir / "one2", 12, 2), dir / "one2");
  require_same(train(heed_on(2), recipe(dir / "np2", 12, 2), dir / "np2"), one2);
  // The goal: every N dividing A = 6, overlapped or not.
  const Run one6 = train(plain_heed(), recipe(dir / "one6", 12, 6), dir / "one6");
  require_same(train(heed_on(3), recipe(dir / "np3", 12, 6), dir / "np3"), one6);
  require_same(train(heed_on(2), cat(recipe(dir / "np2n", 12, 6), {"--no-overlap"}), dir / "np2n"), one6);
  CHECK(one6.model != one2.model);
  // Rank 0 alone wrote --out: a run directory of one run, with its config.
  REQUIRE(read_file(dir / "np3/config.toml").find("grad_accum = 6") != std::string::npos);
  const ProcessResult again = run_job(cat(heed_on(3), cat(recipe(dir / "np3", 14, 6), {"--resume"})));
  require_ok(again);
  REQUIRE_THAT(again.out, Catch::Contains("384 tokens per iteration on 3 processes"));
}

TEST_CASE("SIGKILL of the whole mpirun job, then --resume with another process count continues the run bit for bit",
          "[dist][mpi][cli]") {
  ScratchDir dir("mpi-resume");
  const Run reference = train(plain_heed(), recipe(dir / "ref", 30, 6), dir / "ref");
  const std::string out = dir / "run";
  // Kill mpirun and its ranks at once, after the checkpoint of iteration 10.
  const pid_t job = start_and_wait_for(cat(heed_on(3), recipe(out, 30, 6)), dir, out + "/log.jsonl", "\"iter\":10");
  REQUIRE(::kill(job, SIGSTOP) == 0);  // no reaction from mpirun while its ranks go
  const std::vector<pid_t> ranks = children_of(job);
  REQUIRE(ranks.size() == 3);
  std::vector<std::string> segments;  // left in /dev/shm by a killed mpirun: removed below
  for (pid_t rank : ranks) segments = cat(segments, shm_segments_of(rank));
  for (pid_t rank : ranks) ::kill(rank, SIGKILL);
  ::kill(job, SIGKILL);
  ProcessResult killed;
  wait_process(job, killed, 60);
  REQUIRE(killed.signal == SIGKILL);
  for (pid_t rank : ranks) REQUIRE(wait_exited(rank, 30));  // until then rank 0 still holds the run's lock
  for (const std::string& file : segments) {
    std::error_code ignored;  // a segment already gone (each rank maps its peers' too) is fine
    std::filesystem::remove(file, ignored);
  }
  // And the killed mpirun's session directory, $TMPDIR/ompi.<host>.<uid>/pid.<its pid>: 8 MB a
  // run, which nothing else removes.
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ignored))
    if (entry.path().filename().string().rfind("ompi.", 0) == 0)
      std::filesystem::remove_all(entry.path() / ("pid." + std::to_string(job)), ignored);
  // The recipe is the run's: another A is refused; another N is not.
  require_clean_error(run_job(cat(plain_heed(), cat(recipe(out, 30, 3), {"--resume"}))), 2,
                      {"--grad-accum 3 differs from the run's 6"});
  const ProcessResult resumed = run_job(cat(heed_on(2), cat(recipe(out, 30, 6), {"--resume"})));
  require_ok(resumed);
  REQUIRE_THAT(resumed.out, Catch::Contains("resuming " + out + " at iteration"));
  REQUIRE(read_file(out + "/model.safetensors") == reference.model);
  REQUIRE(without_times(read_file(out + "/log.jsonl")) == reference.log);
}

TEST_CASE("Ctrl-C to mpirun running heed train saves once on rank 0, ends every rank, and --resume continues",
          "[dist][mpi][cli]") {
  ScratchDir dir("mpi-stop");
  const std::string out = dir / "run";
  const pid_t job = start_and_wait_for(cat(heed_on(2), recipe(out, 100000, 2)), dir, dir / "job.out", "iter 3:");
  double took = 0;
  // What Ctrl-C does: the ranks are in process groups of their own, mpirun alone gets SIGINT.
  const ProcessResult r = signal_and_wait(job, job, SIGINT, dir, took);
  INFO(r.out << r.err << "took " << took << " s");
  REQUIRE(r.signal == 0);
  // Under mpirun a Ctrl-C reaches the ranks as SIGCONT (18).
  static const std::regex stopped("stopped by signal 18 at iteration ([0-9]+); checkpoint saved in ");
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, stopped));
  REQUIRE(r.out.find("stopped by", m.position(0) + 1) == std::string::npos);  // once
  REQUIRE(took < 20 * kTimeScale);  // mpirun's SIGKILL comes 2 s after the signal
  const int64_t saved = std::stoll(m[1]);
  // The saved state continues on one process, to the bits of an uninterrupted run.
  const int64_t until = saved + 3;
  const ProcessResult resumed = run_job(cat(plain_heed(), cat(recipe(out, until, 2), {"--resume"})));
  require_ok(resumed);
  const Run reference = train(plain_heed(), recipe(dir / "ref", until, 2), dir / "ref");
  REQUIRE(read_file(out + "/model.safetensors") == reference.model);
}

TEST_CASE("a rank of heed train killed by SIGKILL ends the job with an error within seconds", "[dist][mpi][cli]") {
  ScratchDir dir("mpi-die");
  const std::string out = dir / "run";
  const pid_t job = start_and_wait_for(cat(heed_on(3), recipe(out, 100000, 3)), dir, dir / "job.out", "iter 2:");
  pid_t victim = 0;
  for (pid_t rank : children_of(job))
    if (rank_of(rank) == 1) victim = rank;
  REQUIRE(victim > 0);
  double took = 0;
  const ProcessResult r = signal_and_wait(job, victim, SIGKILL, dir, took);
  INFO(r.out << r.err << "took " << took << " s");
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.err, Catch::Contains("rank 1") && Catch::Contains("signal 9"));  // mpirun names the dead rank
  REQUIRE(took < 20 * kTimeScale);  // ~1-2 s on an idle machine
}

TEST_CASE("mpirun refuses a process count that does not divide --grad-accum in one line, and bench reports the job",
          "[dist][mpi][cli]") {
  ScratchDir dir("mpi-refuse");
  // The other ranks meet the refusal too and must leave it to rank 0. With mpirun's SIGKILL 3 s
  // after rank 0's abort (odls_base_sigkill_timeout 2, as for a large model's saves) instead of
  // 1 s, a rank that speaks before that SIGKILL shows every time, not only when rank 0 runs late.
  const std::vector<std::string> refused = cat(heed_on(3), recipe(dir / "run", 10, 4));
  RunOptions late_sigkill = mpi_options(refused, 120 * kTimeScale);
  late_sigkill.env.push_back("OMPI_MCA_odls_base_sigkill_timeout=2");
  const ProcessResult r = run_process(refused, late_sigkill);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.err, Catch::Contains("heed: error: --grad-accum 4: the 3 processes of this job must divide it"));
  size_t lines = 0;
  for (size_t at = r.err.find("heed: error:"); at != std::string::npos; at = r.err.find("heed: error:", at + 1)) ++lines;
  REQUIRE(lines == 1);  // rank 0 alone says it
  REQUIRE(!std::filesystem::exists(dir / "run"));  // refused before --out was touched

  const ProcessResult bench = run_job(cat(heed_on(2), {"bench", "--grad-accum", "2", "--iters", "2", "--n-layer", "1",
                                                       "--n-embd", "32", "--n-head", "2", "--block-size", "16",
                                                       "--batch-size", "4", "--threads", "1"}));
  require_ok(bench);
  REQUIRE(std::count(bench.out.begin(), bench.out.end(), '\n') == 1);  // one JSON line, rank 0's
  REQUIRE_THAT(bench.out, Catch::Contains("\"processes\":2") && Catch::Contains("\"grad_accum\":2") &&
                              Catch::Contains("\"tokens_per_s\"") && Catch::Contains("\"reduce_ms_in_backward\""));
}

TEST_CASE("Ctrl-C to mpirun running heed bench ends it as a stop, not as an error", "[dist][mpi][cli]") {
  // The stop reaches bench inside a data-parallel step, as dist::Stopped: it used to end rank 0
  // with "heed: error: rank 0 of 2: stopped while waiting for the other processes" and MPI_ABORT.
  ScratchDir dir("mpi-bench-stop");
  const std::vector<std::string> cmd = cat(heed_on(2), {"bench", "--grad-accum", "2", "--iters", "1000000", "--n-layer",
                                                        "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16",
                                                        "--batch-size", "4", "--threads", "1"});
  const pid_t job = spawn_process(cmd, dir / "job.out", dir / "job.err", mpi_options(cmd, 300 * kTimeScale));
  std::this_thread::sleep_for(std::chrono::duration<double>(6 * kTimeScale));  // well into its steps
  REQUIRE(waitpid(job, nullptr, WNOHANG) == 0);                                 // still running
  double took = 0;
  const ProcessResult r = signal_and_wait(job, job, SIGINT, dir, took);
  INFO(r.out << r.err << "took " << took << " s");
  REQUIRE_THAT(r.err, Catch::Contains("heed: stopped by signal"));
  REQUIRE_THAT(r.err, !Catch::Contains("heed: error") && !Catch::Contains("MPI_ABORT"));
  REQUIRE(r.out.empty());  // no result line for a run cut short
  REQUIRE(took < 20 * kTimeScale);
}

TEST_CASE("plain heed train loads no MPI library", "[dist][cli]") {
  ScratchDir dir("mpi-plain");
  const std::string out = dir / "run";
  const std::vector<std::string> cmd = cat(plain_heed(), recipe(out, 100000, 2));
  const pid_t pid = spawn_process(cmd, dir / "job.out", dir / "job.err", timeout_after(120 * kTimeScale));
  const auto t0 = std::chrono::steady_clock::now();
  while (read_file(dir / "job.out").find("iter 2:") == std::string::npos) {
    REQUIRE(seconds_since(t0) < 60 * kTimeScale);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string maps = read_file("/proc/" + std::to_string(pid) + "/maps");
  REQUIRE(::kill(pid, SIGINT) == 0);
  ProcessResult r;
  wait_process(pid, r, 60 * kTimeScale);
  REQUIRE(maps.find("heed") != std::string::npos);  // the maps were read
  REQUIRE(maps.find("libmpi") == std::string::npos);
  REQUIRE(maps.find("libheed_dist_mpi") == std::string::npos);
  REQUIRE(r.exit_code == 128 + SIGINT);
}
