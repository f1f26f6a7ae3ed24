#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/check.h"

namespace heed::cli {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        // control characters are not allowed in XML 1.0 text
        if (static_cast<unsigned char>(c) < 0x20) o += ' ';
        else o += c;
    }
  }
  return o;
}

namespace {

std::string fmt(double v, int prec = 2) {
  if (std::abs(v) < 0.5 * std::pow(10.0, -prec)) v = 0;  // no "-0.00" for a tick at -1e-17
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

// An axis over the finite values to draw: [lo, hi] with lo < hi and a margin, for any finite
// values (even +-1e308, whose difference overflows: positions are computed from halves).
struct Axis {
  double lo, hi;
  // Where v falls, from 0 (lo) to 1 (hi).
  double at(double v) const { return (v / 2 - lo / 2) / (hi / 2 - lo / 2); }
};

Axis make_axis(double lo, double hi, double margin) {
  constexpr double kMax = std::numeric_limits<double>::max();
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;  // nothing to draw
  // A single value gets a range around it; the margin is at least a thousandth of the magnitude,
  // so that lo < hi holds in floating point however large the values are.
  const double span = hi / 2 - lo / 2;  // half the span, finite for any finite lo, hi
  // (span * 2 first would overflow to infinity for +-1.7e308, and infinity * a zero margin is NaN)
  const double pad = std::max({span * (2 * margin), std::max(std::abs(lo), std::abs(hi)) * 1e-3, 1e-9});
  Axis a{std::max(lo - pad, -kMax), std::min(hi + pad, kMax)};
  if (!(a.hi > a.lo)) a = {lo - 1, lo + 1};
  return a;
}

// "Nice" tick positions inside the axis: at most 20, however the values fall (the loop's length
// does not depend on their magnitude).
std::vector<double> ticks(const Axis& a, int target = 6) {
  const double raw = (a.hi / 2 - a.lo / 2) * (2.0 / target);  // finite even for the whole double range
  std::vector<double> t;
  if (!(raw > 0) || !std::isfinite(raw)) return t;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10;
  for (double s : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (s * mag >= raw) {
      step = s * mag;
      break;
    }
  if (!std::isfinite(step) || step <= 0) return t;
  const double first = std::ceil(a.lo / step);
  const double count = std::floor(a.hi / step) - first + 1;
  for (int k = 0; k < 20 && k < count; ++k) {
    const double v = (first + k) * step;
    if (std::isfinite(v) && (t.empty() || v > t.back())) t.push_back(v);
  }
  return t;
}

// A tick label: plain decimals for ordinary numbers, %g beyond.
std::string tick_label(double v, const std::vector<double>& all) {
  const double step = all.size() > 1 ? all[1] - all[0] : 1.0;
  if (std::abs(v) < 1e6 && step >= 1e-4) {
    const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6);
    return fmt(v, decimals);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Curve>& curves) {
  const double W = 760, H = 460, L = 70, R = 180, T = 50, B = 60;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto drawn = [](double x, double y) { return std::isfinite(x) && std::isfinite(y); };
  for (const auto& c : curves)
    for (size_t i = 0; i < c.x.size(); ++i) {
      if (!drawn(c.x[i], c.y[i])) continue;  // a gap in the curve
      x0 = std::min(x0, c.x[i]), x1 = std::max(x1, c.x[i]);
      y0 = std::min(y0, c.y[i]), y1 = std::max(y1, c.y[i]);
    }
  const Axis ax = make_axis(x0, x1, 0.0), ay = make_axis(y0, y1, 0.05);
  auto px = [&](double x) { return L + ax.at(x) * (W - L - R); };
  auto py = [&](double y) { return T + (1 - ay.at(y)) * (H - T - B); };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

  std::ostringstream s;
  s << kSvgSignature << " xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << ' ' << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" << xml_escape(title) << "</text>\n";
  const std::vector<double> xt = ticks(ax), yt = ticks(ay);
  for (double t : xt) {
    s << "<line x1=\"" << fmt(px(t)) << "\" y1=\"" << T << "\" x2=\"" << fmt(px(t)) << "\" y2=\"" << H - B
      << "\" stroke=\"#eee\"/>\n<text x=\"" << fmt(px(t)) << "\" y=\"" << H - B + 18
      << "\" text-anchor=\"middle\">" << tick_label(t, xt) << "</text>\n";
  }
  for (double t : yt) {
    s << "<line x1=\"" << L << "\" y1=\"" << fmt(py(t)) << "\" x2=\"" << W - R << "\" y2=\"" << fmt(py(t))
      << "\" stroke=\"#eee\"/>\n<text x=\"" << L - 6 << "\" y=\"" << fmt(py(t) + 4)
      << "\" text-anchor=\"end\">" << tick_label(t, yt) << "</text>\n";
  }
  s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 18 << "\" text-anchor=\"middle\">" << xml_escape(x_label) << "</text>\n"
    << "<text transform=\"translate(18," << (T + H - B) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << xml_escape(y_label) << "</text>\n";
  for (size_t k = 0; k < curves.size(); ++k) {
    const auto& c = curves[k];
    const char* color = colors[(c.color >= 0 ? size_t(c.color) : k) % 8];
    s << "<polyline class=\"curve\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\""
      << (c.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t i = 0; i < c.x.size(); ++i)
      if (drawn(c.x[i], c.y[i])) s << fmt(px(c.x[i])) << ',' << fmt(py(c.y[i])) << ' ';
    s << "\"/>\n";
    const double ly = T + 10 + 20 * double(k);
    s << "<line x1=\"" << W - R + 12 << "\" y1=\"" << ly << "\" x2=\"" << W - R + 40 << "\" y2=\"" << ly
      << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << (c.dashed ? " stroke-dasharray=\"6 4\"" : "")
      << "/>\n<text x=\"" << W - R + 46 << "\" y=\"" << ly + 4 << "\">" << xml_escape(c.label) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

// White -> dark blue, perceptually even enough for attention weights in [0, 1]; grey for a value
// that is not a number (an attention row of a model that overflowed).
static std::string color_of(double v) {
  if (std::isnan(v)) return "#bbbbbb";
  v = std::clamp(v, 0.0, 1.0);
  const double r = 255 + (8 - 255) * v, g = 255 + (48 - 255) * v, b = 255 + (107 - 255) * v;
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(r), int(g), int(b));
  return buf;
}

std::string heatmaps_svg(const std::string& title, const std::vector<Heatmap>& maps, int columns) {
  HEED_CHECK(!maps.empty(), "heatmaps_svg: nothing to draw");
  columns = std::max(1, std::min<int>(columns, static_cast<int>(maps.size())));
  size_t max_rows = 1, max_cols = 1, max_label = 1;
  for (const auto& m : maps) {
    max_rows = std::max(max_rows, m.row_labels.size());
    max_cols = std::max(max_cols, m.col_labels.size());
    for (const auto& l : m.row_labels) max_label = std::max(max_label, l.size());
  }
  const double cell = std::clamp(360.0 / double(std::max(max_rows, max_cols)), 6.0, 22.0);
  const double label_w = 10.0 + 7.0 * double(std::min<size_t>(max_label, 6));
  const double panel_w = label_w + cell * double(max_cols) + 20, panel_h = 40 + 16 + cell * double(max_rows) + 20;
  const int rows = (static_cast<int>(maps.size()) + columns - 1) / columns;
  const double W = panel_w * columns + 90, H = 50 + panel_h * rows;
  const double font = std::min(12.0, cell * 0.8);

  std::ostringstream s;
  s << kSvgSignature << " xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(W, 0) << "\" height=\"" << fmt(H, 0)
    << "\" viewBox=\"0 0 " << fmt(W, 0) << ' ' << fmt(H, 0) << "\" font-family=\"monospace\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << fmt(W / 2) << "\" y=\"28\" text-anchor=\"middle\" font-family=\"sans-serif\" font-size=\"16\">"
    << xml_escape(title) << "</text>\n";
  for (size_t k = 0; k < maps.size(); ++k) {
    const auto& m = maps[k];
    const size_t nr = m.row_labels.size(), nc = m.col_labels.size();
    HEED_CHECK(m.values.size() == nr * nc, "heatmaps_svg: panel '", m.title, "' has ", m.values.size(),
               " values for ", nr, "x", nc);
    const double ox = panel_w * double(k % columns), oy = 50 + panel_h * double(k / columns);
    const double gx = ox + label_w, gy = oy + 40 + 16;
    s << "<g class=\"heatmap\">\n<text x=\"" << fmt(gx + cell * double(nc) / 2) << "\" y=\"" << fmt(oy + 24)
      << "\" text-anchor=\"middle\" font-family=\"sans-serif\" font-size=\"13\">" << xml_escape(m.title) << "</text>\n";
    for (size_t j = 0; j < nc; ++j)  // column labels (keys) along the top
      s << "<text x=\"" << fmt(gx + cell * (double(j) + 0.5)) << "\" y=\"" << fmt(gy - 4)
        << "\" text-anchor=\"middle\" font-size=\"" << fmt(font, 1) << "\">" << xml_escape(m.col_labels[j]) << "</text>\n";
    for (size_t i = 0; i < nr; ++i) {
      s << "<text x=\"" << fmt(gx - 4) << "\" y=\"" << fmt(gy + cell * (double(i) + 0.5) + font / 3)
        << "\" text-anchor=\"end\" font-size=\"" << fmt(font, 1) << "\">" << xml_escape(m.row_labels[i]) << "</text>\n";
      for (size_t j = 0; j < nc; ++j) {
        const double v = m.values[i * nc + j];
        s << "<rect x=\"" << fmt(gx + cell * double(j)) << "\" y=\"" << fmt(gy + cell * double(i)) << "\" width=\""
          << fmt(cell) << "\" height=\"" << fmt(cell) << "\" fill=\"" << color_of(v) << "\"><title>"
          << xml_escape(m.row_labels[i]) << " -> " << xml_escape(m.col_labels[j]) << ": " << fmt(v, 3)
          << "</title></rect>\n";
      }
    }
    s << "<rect x=\"" << fmt(gx) << "\" y=\"" << fmt(gy) << "\" width=\"" << fmt(cell * double(nc)) << "\" height=\""
      << fmt(cell * double(nr)) << "\" fill=\"none\" stroke=\"#999\"/>\n</g>\n";
  }
  // the colour scale
  const double sx = W - 60, sy = 60, sh = std::min(300.0, H - 100);
  s << "<g class=\"colorbar\">\n";
  for (int i = 0; i < 50; ++i)
    s << "<rect x=\"" << fmt(sx) << "\" y=\"" << fmt(sy + sh * (1 - (i + 1) / 50.0)) << "\" width=\"14\" height=\""
      << fmt(sh / 50 + 0.5) << "\" fill=\"" << color_of(i / 49.0) << "\"/>\n";
  s << "<rect x=\"" << fmt(sx) << "\" y=\"" << fmt(sy) << "\" width=\"14\" height=\"" << fmt(sh)
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (double v : {0.0, 0.25, 0.5, 0.75, 1.0})
    s << "<text x=\"" << fmt(sx + 18) << "\" y=\"" << fmt(sy + sh * (1 - v) + 4) << "\" font-family=\"sans-serif\">"
      << fmt(v, 2) << "</text>\n";
  s << "<text x=\"" << fmt(sx + 7) << "\" y=\"" << fmt(sy - 10)
    << "\" text-anchor=\"middle\" font-family=\"sans-serif\">weight</text>\n</g>\n</svg>\n";
  return s.str();
}

}  // namespace heed::cli
