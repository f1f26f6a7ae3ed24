// Test helpers for the `heed` executable: run it as a child process, capture its output and exit
// status (or the signal that ended it), and make scratch directories.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace heed::test {

/// Sanitized builds (ASan + UBSan, -O1) run several times slower and hold more memory (shadow
/// memory, the allocator's quarantine): the tests' bounds on a run's time and peak memory are
/// multiplied by these there. The release build checks the promised bounds themselves.
// GCC says ASan with __SANITIZE_ADDRESS__, clang with __has_feature (CI's sanitized build is clang's).
#if defined(__SANITIZE_ADDRESS__)
#define HEED_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEED_TEST_UNDER_ASAN 1
#endif
#endif
#if defined(HEED_TEST_UNDER_ASAN)
inline constexpr double kTimeScale = 5.0;
inline constexpr long kMemoryScale = 4;
#else
inline constexpr double kTimeScale = 1.0;
inline constexpr long kMemoryScale = 1;
#endif

/// The heed executable built next to the tests.
inline std::string heed_exe() { return std::string(HEED_BINARY_DIR) + "/heed"; }

struct ProcessResult {
  int exit_code = -1;  ///< valid when signal == 0
  int signal = 0;      ///< the signal that ended the process, 0 if it exited
  std::string out, err;
  long max_rss_kb = 0;  ///< the process's peak resident memory (getrusage's ru_maxrss)
  double seconds = 0;   ///< from wait_process's start to the process's end
};

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  REQUIRE(f.good());
}

/// A fresh, empty directory under the system temp dir, removed when the object dies.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("heed-test-" + tag + "-XXXXXX")).string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Options for run_process.
struct RunOptions {
  std::string stdin_data;               ///< fed to the child's stdin (then closed)
  std::string stdout_path;              ///< where the child's stdout goes (default: a scratch file)
  std::vector<std::string> env;         ///< extra "KEY=VALUE" entries
  std::function<void()> in_child;       ///< runs in the child just before exec (setrlimit...)
  double timeout_s = 300;               ///< SIGKILL after this long (then the test fails)
};

/// RunOptions with only a timeout: a run that must end quickly (a hang fails the test sooner).
inline RunOptions timeout_after(double seconds) {
  RunOptions o;
  o.timeout_s = seconds;
  return o;
}

/// Starts `args` (args[0] is the program) and returns its pid; stdout/stderr go to the files.
inline pid_t spawn_process(const std::vector<std::string>& args, const std::string& out_path,
                           const std::string& err_path, const RunOptions& opt = {}) {
  std::string in_path = out_path + ".stdin";
  write_file(in_path, opt.stdin_data);
  const std::string stdout_path = opt.stdout_path.empty() ? out_path : opt.stdout_path;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& kv : opt.env) putenv(const_cast<char*>(kv.c_str()));
    if (opt.in_child) opt.in_child();
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

/// Waits for `pid` (killing it after timeout_s) and fills the status, time and memory fields of `r`.
inline void wait_process(pid_t pid, ProcessResult& r, double timeout_s = 300) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  int status = 0;
  struct rusage usage {};
  for (;;) {
    pid_t w = wait4(pid, &status, WNOHANG, &usage);
    REQUIRE(w >= 0);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("process " << pid << " timed out after " << timeout_s << " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.max_rss_kb = usage.ru_maxrss;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
}

/// Runs `args` to completion and returns its exit status and output.
inline ProcessResult run_process(const std::vector<std::string>& args, const RunOptions& opt = {}) {
  ScratchDir io("io");
  ProcessResult r;
  pid_t pid = spawn_process(args, io / "out", io / "err", opt);
  wait_process(pid, r, opt.timeout_s);
  r.out = read_file(io / "out");
  r.err = read_file(io / "err");
  return r;
}

/// Runs the heed executable with `args` (OPENBLAS_NUM_THREADS=1 comes from ctest's environment).
inline ProcessResult run_heed(std::vector<std::string> args, const RunOptions& opt = {}) {
  args.insert(args.begin(), heed_exe());
  return run_process(args, opt);
}

/// A line of `text` (split on '\n') that is the last non-empty one.
inline std::string last_line(const std::string& text) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

/// `a` followed by `b`: argument lists put together.
inline std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The process exited normally with code 0 (both streams are shown if not).
inline void require_ok(const ProcessResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code == 0);
}

/// 600 characters over the alphabet "abcdefgh \n" (10 characters), deterministic for `seed`:
/// the corpus of the command-line tests' tiny runs.
inline std::string tiny_corpus(uint32_t seed) {
  const std::string alphabet = "abcdefgh \n";
  std::string s;
  uint32_t x = seed;
  for (int i = 0; i < 600; ++i) {
    x = x * 1103515245u + 12345u;
    s += alphabet[(x >> 16) % alphabet.size()];
  }
  return s;
}

/// Checks the contract for bad input: no signal, the expected exit code, and exactly one line on
/// stderr, starting "heed: error:" and containing every one of `needles`.
inline void require_clean_error(const ProcessResult& r, int code, const std::vector<std::string>& needles) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code == code);
  REQUIRE(r.err.rfind("heed: error: ", 0) == 0);
  REQUIRE(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  for (const auto& n : needles) CHECK(r.err.find(n) != std::string::npos);
}

}  // namespace heed::test
