#include "stop.h"

#include <signal.h>
#include <unistd.h>

namespace heed::cli {

volatile std::sig_atomic_t g_stop_signal = 0;

namespace {

volatile std::sig_atomic_t g_exit_at_once = 0;  // an ExitAtOnceOnStop is alive

// "heed: stopped by signal N\n" (main's words for a stop) with async-signal-safe calls only.
void say_stopped(int sig) {
  char text[40] = "heed: stopped by signal ";
  size_t n = sizeof "heed: stopped by signal " - 1;
  if (sig >= 10) text[n++] = static_cast<char>('0' + sig / 10 % 10);
  text[n++] = static_cast<char>('0' + sig % 10);
  text[n++] = '\n';
  if (::write(STDERR_FILENO, text, n) < 0) return;  // nothing to do about a closed stderr
}

void on_stop_signal(int sig) {
  if (g_stop_signal) _exit(128 + sig);  // the second signal: no more waiting
  if (g_exit_at_once) {                  // a read-only phase: nothing to save
    say_stopped(sig);
    _exit(128 + sig);
  }
  g_stop_signal = sig;
}

}  // namespace

ExitAtOnceOnStop::ExitAtOnceOnStop() {
  g_exit_at_once = 1;
  if (g_stop_signal) {  // it came earlier and was only recorded
    g_exit_at_once = 0;
    check_stop();
  }
}

ExitAtOnceOnStop::~ExitAtOnceOnStop() { g_exit_at_once = 0; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal must not make a write to stdout or a checkpoint fail with EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal: save the run, as on Ctrl-C
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace heed::cli
