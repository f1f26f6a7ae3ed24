#include "stop.h"

#include <signal.h>
#include <unistd.h>

#include "dist/runtime.h"

namespace heed::cli {

volatile std::sig_atomic_t g_stop_signal = 0;

namespace {

// Under mpirun, one Ctrl-C brings SIGCONT, SIGTERM a second later, then SIGKILL (docs/scaling.md):
// the later signals belong to the same request and must not cut rank 0's save short.
bool g_under_mpirun = false;

void on_stop_signal(int sig) {
  if (g_stop_signal) {
    if (g_under_mpirun) return;
    _exit(128 + sig);  // the second signal: no more waiting
  }
  g_stop_signal = sig;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal must not make a write to stdout or a checkpoint fail with EINTR
  g_under_mpirun = dist::launched_by_mpirun();
  for (int sig : dist::stop_signals()) sigaction(sig, &sa, nullptr);  // SIGINT, SIGTERM; SIGCONT under mpirun
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace heed::cli
