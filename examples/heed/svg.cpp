#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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

static std::string fmt(double v, int prec = 2) {
  if (std::abs(v) < 0.5 * std::pow(10.0, -prec)) v = 0;  // no "-0.00" for a tick at -1e-17
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

// "Nice" tick positions covering [lo, hi].
static std::vector<double> ticks(double lo, double hi, int target = 6) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double steps[] = {1, 2, 2.5, 5, 10};
  double step = mag;
  for (double s : steps)
    if (s * mag >= raw) {
      step = s * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) t.push_back(v);
  return t;
}

std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Curve>& curves) {
  const double W = 760, H = 460, L = 70, R = 180, T = 50, B = 60;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& c : curves)
    for (size_t i = 0; i < c.x.size(); ++i) {
      if (!std::isfinite(c.y[i])) continue;
      x0 = std::min(x0, c.x[i]), x1 = std::max(x1, c.x[i]);
      y0 = std::min(y0, c.y[i]), y1 = std::max(y1, c.y[i]);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  const double pad = (y1 - y0) * 0.05 + 1e-9;
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return T + (y1 - y) / (y1 - y0) * (H - T - B); };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << ' ' << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" << xml_escape(title) << "</text>\n";
  for (double t : ticks(x0, x1)) {
    s << "<line x1=\"" << fmt(px(t)) << "\" y1=\"" << T << "\" x2=\"" << fmt(px(t)) << "\" y2=\"" << H - B
      << "\" stroke=\"#eee\"/>\n<text x=\"" << fmt(px(t)) << "\" y=\"" << H - B + 18
      << "\" text-anchor=\"middle\">" << fmt(t, t == std::floor(t) ? 0 : 1) << "</text>\n";
  }
  for (double t : ticks(y0, y1)) {
    s << "<line x1=\"" << L << "\" y1=\"" << fmt(py(t)) << "\" x2=\"" << W - R << "\" y2=\"" << fmt(py(t))
      << "\" stroke=\"#eee\"/>\n<text x=\"" << L - 6 << "\" y=\"" << fmt(py(t) + 4)
      << "\" text-anchor=\"end\">" << fmt(t, 2) << "</text>\n";
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
      if (std::isfinite(c.y[i])) s << fmt(px(c.x[i])) << ',' << fmt(py(c.y[i])) << ' ';
    s << "\"/>\n";
    const double ly = T + 10 + 20 * double(k);
    s << "<line x1=\"" << W - R + 12 << "\" y1=\"" << ly << "\" x2=\"" << W - R + 40 << "\" y2=\"" << ly
      << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << (c.dashed ? " stroke-dasharray=\"6 4\"" : "")
      << "/>\n<text x=\"" << W - R + 46 << "\" y=\"" << ly + 4 << "\">" << xml_escape(c.label) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

// White -> dark blue, perceptually even enough for attention weights in [0, 1].
static std::string color_of(double v) {
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
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(W, 0) << "\" height=\"" << fmt(H, 0)
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
