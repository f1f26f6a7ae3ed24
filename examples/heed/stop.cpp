#include "stop.h"

#include <signal.h>
#include <unistd.h>

namespace heed::cli {

volatile std::sig_atomic_t g_stop_signal = 0;

namespace {

void on_stop_signal(int sig) {
  if (g_stop_signal) _exit(128 + sig);  // the second signal: no more waiting
  g_stop_signal = sig;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal must not make a write to stdout or a checkpoint fail with EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace heed::cli
