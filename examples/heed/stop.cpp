#include "stop.h"

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "dist/runtime.h"

namespace heed::cli {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);  // so its use in a signal handler is safe

namespace {

// An ExitAtOnceOnStop is alive. Atomic (sequentially consistent) with g_stop_signal: the
// constructor sets it then reads the signal, the handler reads the signal then it, so a signal on
// another thread is either seen by the constructor or exits at once itself.
std::atomic<int> g_exit_at_once{0};

// set_exit_at_once_cleanup's paths, in static storage for the handler: the lock file, the run's
// files (any of them present: keep the lock), the directories to remove deepest first.
constexpr int kMaxCleanupPaths = 32;
char g_cleanup_path[kMaxCleanupPaths][PATH_MAX];
int g_cleanup_run_files = 0, g_cleanup_dirs = 0;
volatile std::sig_atomic_t g_cleanup_set = 0;  // 0 while the paths are being changed

void clean_up_before_exit() {  // async-signal-safe: access, unlink, rmdir
  if (!g_cleanup_set) return;
  const char* lock = g_cleanup_path[0];
  for (int i = 1; i <= g_cleanup_run_files; ++i)
    if (::access(g_cleanup_path[i], F_OK) == 0) return;  // a run was written: leave everything
  ::unlink(lock);
  for (int i = 1 + g_cleanup_run_files; i < 1 + g_cleanup_run_files + g_cleanup_dirs; ++i)
    if (::rmdir(g_cleanup_path[i]) != 0) return;
}

// Writes `before` N `after` to stderr, N the signal's number, with async-signal-safe calls only.
void say_with_signal(const char* before, int sig, const char* after) {
  char text[96];
  size_t n = 0;
  for (const char* c = before; *c && n < 90; ++c) text[n++] = *c;
  if (sig >= 10) text[n++] = static_cast<char>('0' + sig / 10 % 10);
  text[n++] = static_cast<char>('0' + sig % 10);
  for (const char* c = after; *c && n < sizeof text; ++c) text[n++] = *c;
  if (::write(STDERR_FILENO, text, n) < 0) return;  // nothing to do about a closed stderr
}

// "heed: stopped by signal N\n": main's words for a stop.
void say_stopped(int sig) { say_with_signal("heed: stopped by signal ", sig, "\n"); }

// Under mpirun, one Ctrl-C brings SIGCONT, SIGTERM a second later, then SIGKILL (docs/scaling.md):
// the later signals belong to the same request and must not cut rank 0's save short.
bool g_under_mpirun = false;

// One request can arrive twice: GNU timeout signals its child and then its own process group
// (the child again), and a wrapper that forwards Ctrl-C to a child in the terminal's group doubles
// it too. A repeat of the first signal within kRepeatWindowNs is taken as that same request, not
// as the second signal that ends the process unsaved. A different signal, or the same one later,
// is a second request.
constexpr int64_t kRepeatWindowNs = 500'000'000;
std::atomic<int64_t> g_first_signal_ns{0};  // lock-free: a signal handler may read and write it
static_assert(std::atomic<int64_t>::is_always_lock_free);

int64_t monotonic_ns() {  // clock_gettime is async-signal-safe (POSIX)
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}


void on_stop_signal(int sig) {
  if (const int first = g_stop_signal.load()) {
    if (g_under_mpirun) return;
    if (sig == first && monotonic_ns() - g_first_signal_ns.load() < kRepeatWindowNs) return;
    say_with_signal("heed: second signal ", sig, ": stopped at once, nothing more saved\n");
    _exit(128 + sig);  // the second signal: no more waiting
  }
  if (g_exit_at_once.load()) {  // a read-only phase: nothing to save
    clean_up_before_exit();
    say_stopped(sig);
    _exit(128 + sig);
  }
  g_first_signal_ns.store(monotonic_ns());  // before the signal: a repeat's handler reads them in turn
  g_stop_signal.store(sig);
}

}  // namespace

ExitAtOnceOnStop::ExitAtOnceOnStop() {
  g_exit_at_once.store(1);
  if (g_stop_signal.load()) {  // it came earlier and was only recorded
    g_exit_at_once.store(0);
    check_stop();
  }
}

ExitAtOnceOnStop::~ExitAtOnceOnStop() { g_exit_at_once.store(0); }

void set_exit_at_once_cleanup(const std::string& lock_file, const std::vector<std::string>& run_files,
                              const std::vector<std::string>& dirs) {
  g_cleanup_set = 0;
  if (lock_file.empty()) return;
  const size_t n = 1 + run_files.size() + dirs.size();
  bool fits = n <= kMaxCleanupPaths && lock_file.size() < PATH_MAX;
  for (const auto& p : run_files) fits &= p.size() < PATH_MAX;
  for (const auto& p : dirs) fits &= p.size() < PATH_MAX;
  if (!fits) return;  // no cleanup rather than a wrong one
  std::strcpy(g_cleanup_path[0], lock_file.c_str());
  for (size_t i = 0; i < run_files.size(); ++i) std::strcpy(g_cleanup_path[1 + i], run_files[i].c_str());
  for (size_t i = 0; i < dirs.size(); ++i) std::strcpy(g_cleanup_path[1 + run_files.size() + i], dirs[i].c_str());
  g_cleanup_run_files = static_cast<int>(run_files.size());
  g_cleanup_dirs = static_cast<int>(dirs.size());
  g_cleanup_set = 1;
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal must not make a write to stdout or a checkpoint fail with EINTR
  g_under_mpirun = dist::launched_by_mpirun();
  for (int sig : dist::stop_signals()) sigaction(sig, &sa, nullptr);  // SIGINT, SIGTERM; SIGCONT under mpirun
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal: save the run, as on Ctrl-C
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace heed::cli
