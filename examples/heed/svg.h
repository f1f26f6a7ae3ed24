// Small SVG drawings for `heed plot` (loss curves) and `heed attention` (attention heatmaps).
// Self-contained files: no scripts, no external fonts or styles.
#pragma once

#include <string>
#include <vector>

namespace heed::cli {

/// How every drawing heed writes begins: `plot` and `attention` replace an existing --out only if
/// it begins so (heed replaces only its own output, never a user's SVG).
inline constexpr const char* kSvgSignature = "<!-- drawn by heed -->\n<svg";

struct Curve {
  std::string label;
  std::vector<double> x, y;
  bool dashed = false;
  int color = -1;  ///< index into the palette; -1: the curve's own index
};

/// A line chart of `curves` (iterations against loss) with axes, ticks, a legend and a title.
std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Curve>& curves);

struct Heatmap {
  std::string title;                     ///< e.g. "layer 0, head 1"
  std::vector<std::string> row_labels;   ///< one per row (queries / output characters)
  std::vector<std::string> col_labels;   ///< one per column (keys / source characters)
  std::vector<double> values;            ///< rows x cols, row-major, in [0, 1]
};

/// Heatmaps laid out in a grid of `columns` panels, with a shared colour scale and a title.
/// Each panel is an SVG <g class="heatmap">.
std::string heatmaps_svg(const std::string& title, const std::vector<Heatmap>& maps, int columns);

/// Escapes &, <, >, " and ' for SVG text.
std::string xml_escape(const std::string& s);

}  // namespace heed::cli
