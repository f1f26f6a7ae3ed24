#include "progress_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace heed::cli {

std::string fit_progress_line(const std::vector<ProgressField>& fields, int width) {
  const size_t room = static_cast<size_t>(std::max(width - 1, 1));
  std::vector<bool> keep(fields.size(), true);
  auto render = [&] {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i)
      if (keep[i]) line += (line.empty() ? "" : "  ") + fields[i].text;
    return line;
  };
  std::string line = render();
  while (line.size() > room) {
    // Drop the kept field of the highest rank, unless it is the last one left.
    size_t worst = fields.size();
    int kept = 0;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (!keep[i]) continue;
      ++kept;
      if (worst == fields.size() || fields[i].rank > fields[worst].rank) worst = i;
    }
    if (kept <= 1) return line.substr(0, room);
    keep[worst] = false;
    line = render();
  }
  return line;
}

std::string format_duration(double s) {
  char buf[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

std::string train_progress_line(long long iter, long long max_iters, double loss, double lr, double tok_s,
                                double elapsed_s, double remaining_s, int width) {
  char b[6][96];
  std::snprintf(b[0], sizeof b[0], "iter %lld/%lld", iter, max_iters);
  std::snprintf(b[1], sizeof b[1], "loss %.4f", loss);
  std::snprintf(b[2], sizeof b[2], "lr %.2e", lr);
  std::snprintf(b[3], sizeof b[3], "%.0f tok/s", tok_s);
  std::snprintf(b[4], sizeof b[4], "elapsed %s", format_duration(elapsed_s).c_str());
  std::snprintf(b[5], sizeof b[5], "remaining %s", format_duration(remaining_s).c_str());
  return fit_progress_line({{b[0], 0}, {b[1], 1}, {b[2], 4}, {b[3], 3}, {b[4], 5}, {b[5], 2}}, width);
}

int terminal_columns() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0 && n < 100000) return n;
  }
  return 80;
}

}  // namespace heed::cli
