// The live progress line `heed train` redraws on a terminal. It must fit the terminal's width:
// a line one column too wide wraps, and every redraw (\r) then scrolls a new line. Fields that do
// not fit are left out, least useful first; the line never reaches the last column.
#pragma once

#include <string>
#include <vector>

namespace heed::cli {

/// One field of the line ("loss 1.2345") and its rank: fields of lower rank are kept first.
struct ProgressField {
  std::string text;
  int rank;
};

/// The fields in their order, two spaces apart, leaving out the highest-ranked fields until the
/// line is at most width - 1 columns (cut to that if even the first-ranked field is longer).
/// Fields are ASCII (one column per byte).
std::string fit_progress_line(const std::vector<ProgressField>& fields, int width);

/// "12.3s", "4m05s", "1h02m03s".
std::string format_duration(double seconds);

/// train's line: iter, loss, lr, tokens/s, elapsed and remaining time, fitted to `width`
/// (remaining time goes first, then elapsed, lr and tokens/s; iter and loss stay).
std::string train_progress_line(long long iter, long long max_iters, double loss, double lr, double tok_s,
                                double elapsed_s, double remaining_s, int width);

/// The width of the terminal on standard output: its TIOCGWINSZ size, else $COLUMNS, else 80.
int terminal_columns();

}  // namespace heed::cli
