#include "compiler/schedule_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace flashgen {
namespace {

// Layout, in pixels.
constexpr double kMargin = 24;
constexpr double kGridLong = 320;      // the longer side of the N x M matrix
constexpr double kGridShortMin = 110;  // the shorter side is never thinner than this
constexpr double kStrip = 14;          // a buffer strip beside the grid (lse, D, dQ, dK/dV)
constexpr double kGap = 5;
constexpr double kLabelColumn = 30;  // CTA numbers left of the rows
constexpr double kLabelBand = 28;    // strip captions, then CTA numbers above the columns
constexpr double kPanelGap = 40;
constexpr double kRowBlockWidth = 44;  // the strip of a row-block pass (bwd_preprocess, bwd_dq_convert)
constexpr double kGlyph = 0.56;        // average glyph width / font size, for layout only

struct Rgb {
  int r, g, b;
};
std::string hex(Rgb c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }
Rgb mix(Rgb a, Rgb b, double t) {
  auto lerp = [t](int x, int y) { return static_cast<int>(x + (y - x) * t + 0.5); };
  return {lerp(a.r, b.r), lerp(a.g, b.g), lerp(a.b, b.b)};
}

// Light = early in a CTA's loop, dark = late.
struct Ramp {
  Rgb first, last;
};
constexpr Ramp kComputedRamp{{198, 219, 239}, {8, 69, 148}};
constexpr Ramp kMaskedRamp{{253, 208, 162}, {166, 54, 3}};
constexpr const char* kSkippedFill = "#f0f0f0";
constexpr const char* kWriteFill = "#41ab5d";
constexpr const char* kReadFill = "#9e9ac8";
constexpr const char* kAtomicFill = "#de2d26";
constexpr const char* kDiagonalStroke = "#e7298a";
constexpr const char* kLeftEdgeStroke = "#7570b3";
constexpr const char* kInk = "#252525";
constexpr const char* kMutedInk = "#666666";

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Estimated width of a line of text: UTF-8 code points times an average glyph width.
double text_width(std::string_view s, double size) {
  const auto glyphs = std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
  return static_cast<double>(glyphs) * size * kGlyph;
}

class Svg {
 public:
  void rect(double x, double y, double w, double h, std::string_view attrs, std::string_view title = {}) {
    out_ += fmt::format(R"(<rect {} x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}")", attrs, x, y, w, h);
    out_ += title.empty() ? "/>\n" : fmt::format("><title>{}</title></rect>\n", escape(title));
  }
  void text(double x, double y, std::string_view s, double size, std::string_view attrs = {}) {
    out_ += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{:.1f}" {}>{}</text>)", x, y, size, attrs, escape(s));
    out_ += "\n";
  }
  void line(double x1, double y1, double x2, double y2, std::string_view attrs) {
    out_ += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" {}/>)", x1, y1, x2, y2, attrs);
    out_ += "\n";
  }
  void raw(std::string_view s) { out_ += s; }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// The N x M matrix on the page: element coordinates (query i, key j) to pixels. Every
// panel uses the same scale, so tiles of different passes compare by size.
struct Grid {
  double x0 = 0, y0 = 0;
  double sx = 0, sy = 0;  // pixels per key, per query
  int seqlen_q = 0, seqlen_k = 0;

  double x(double key) const { return x0 + sx * key; }
  double y(double query) const { return y0 + sy * query; }
  double width() const { return sx * seqlen_k; }
  double height() const { return sy * seqlen_q; }
};

Grid scaled_grid(const ScheduleShape& shape) {
  const double n = shape.seqlen_q, m = shape.seqlen_k;
  const double w = m >= n ? kGridLong : std::max(kGridShortMin, kGridLong * m / n);
  const double h = n >= m ? kGridLong : std::max(kGridShortMin, kGridLong * n / m);
  return {0, 0, w / m, h / n, shape.seqlen_q, shape.seqlen_k};
}

// The window as the kernels see it (causal = right edge 0); -1 = no such edge.
struct Edges {
  int left = -1, right = -1;
};
Edges window_edges(const KernelSpec& spec, const ScheduleShape& shape) {
  if (!spec.causal && !spec.window) return {};
  return {shape.window_left, spec.causal ? 0 : shape.window_right};
}

std::string mask_description(const KernelSpec& spec, const ScheduleShape& shape) {
  const Edges e = window_edges(spec, shape);
  if (e.left < 0 && e.right < 0) return "no mask: every query sees every key";
  const int off = shape.seqlen_k - shape.seqlen_q;
  auto plus = [](int c) { return c == 0 ? std::string() : fmt::format(" {} {}", c > 0 ? "+" : "−", std::abs(c)); };
  const std::string lo = e.left >= 0 ? fmt::format("i{} ≤ ", plus(off - e.left)) : "";
  const std::string hi = e.right >= 0 ? fmt::format(" ≤ i{}", plus(off + e.right)) : "";
  const std::string rule = lo + "j" + hi;
  std::string name = spec.causal ? (e.left >= 0 ? fmt::format("causal, window left {}", e.left) : "causal")
                                 : fmt::format("window left {}, right {}", e.left, e.right);
  return fmt::format("{} (bottom-right aligned): query i sees key j iff {}", name, rule);
}

const char* pass_title(Pass p, bool deterministic) {
  switch (p) {
    case Pass::fwd:
      return "Forward";
    case Pass::bwd_preprocess:
      return "Backward 1: preprocess";
    case Pass::bwd_dkdv:
      return deterministic ? "Backward 2: dK, dV" : "Backward 2: dK, dV (and dQ by atomics)";
    case Pass::bwd_dq:
      return "Backward 3: dQ (deterministic)";
    case Pass::bwd_dq_convert:
      return "Backward 3: dQ convert";
    case Pass::fwd_splitkv:
      return "Forward (decode): split-KV";
    case Pass::fwd_combine:
      return "Forward (decode): combine";
    case Pass::kv_append:
      return "KV append";
  }
  return "";
}

struct PanelText {
  std::string title;
  std::vector<std::string> about;  // above the grid
  std::vector<std::string> notes;  // below it
};

std::string tile_counts(const PassSchedule& s) {
  const int tiles = s.q_tiles * s.k_tiles;
  return fmt::format("{} tile{}: {} computed, {} masked, {} skipped", tiles, tiles == 1 ? "" : "s",
                     s.count(TileState::computed), s.count(TileState::masked), s.count(TileState::skipped));
}

PanelText panel_text(const PassSchedule& s, const ScheduleShape& shape) {
  const KernelSpec& k = s.spec;
  PanelText t{pass_title(k.pass, k.deterministic), {}, {}};
  const std::string tiles =
      fmt::format("rows: Q tiles of {} queries · columns: K/V tiles of {} keys", k.block_m, k.block_n);
  const int padding_ctas = static_cast<int>(
      std::count_if(s.ctas.begin(), s.ctas.end(), [](const CtaWork& c) { return c.row_end <= c.row_begin; }));
  const std::string grid =
      fmt::format("{} CTAs of {} rows{}", s.ctas.size(), k.block_m,
                  padding_ctas ? fmt::format(" ({} only on padding rows past N)", padding_ctas) : std::string());
  switch (k.pass) {
    case Pass::fwd:
      t.about = {"one CTA per Q tile, heaviest first (#1 starts first);",
                 "it loops → over the K/V tiles its queries see", tiles};
      if (k.persistent)
        t.about = {fmt::format("persistent: {} CTAs walk the tiles of {} (head, batch) slice{} in rounds,",
                               s.persistent_ctas, shape.slices, shape.slices == 1 ? "" : "s"),
                   k.causal || k.window ? "longest first, odd rounds from the far end (#k: the CTA);"
                                        : "in order (#k: the CTA);",
                   "each loops → over the K/V tiles its queries see", tiles};
      t.notes = {tile_counts(s), "m, l stay in registers across the loop;",
                 "lse = m + log l is written once per Q tile, at the end"};
      break;
    case Pass::bwd_preprocess:
      t.about = {"one CTA per row block: D = rowsum(dO ∘ O)",
                 k.deterministic ? "(the dQ kernel needs no accumulator)" : "and zeroes those rows of the fp32 dQ_acc",
                 "no tile loop"};
      t.notes = {grid, "D is read by every dK,dV and dQ tile", "of these rows"};
      break;
    case Pass::bwd_dkdv:
      t.about = {"one CTA per K/V tile, in order (#1 starts first);",
                 shape.group > 1 ? fmt::format("it loops ↓ over the Q tiles that see its keys, × {} heads", shape.group)
                                 : std::string("it loops ↓ over the Q tiles that see its keys"),
                 tiles};
      t.notes = {tile_counts(s), "reads lse and D of each Q tile it visits; writes dK, dV once",
                 k.deterministic ? std::string("dQ is left to the dQ kernel")
                                 : std::string("adds dS·K into dQ_acc with fp32 atomicAdd, every tile")};
      if (shape.group > 1)
        t.notes.push_back(fmt::format("numbers: query head 1 of the group; heads 2..{} repeat the loop", shape.group));
      break;
    case Pass::bwd_dq:
      t.about = {"one CTA per Q tile, heaviest first (#1 starts first);",
                 "it loops → over the K/V tiles its queries see", tiles};
      t.notes = {tile_counts(s),
                 "reads lse and D once per Q tile; writes dQ once:", "no atomics, bitwise deterministic"};
      break;
    case Pass::bwd_dq_convert:
      t.about = {"one CTA per row block:", "dq = dQ_acc · scale, in the input dtype", "no tile loop"};
      t.notes = {grid, "reads the fp32 accumulator the dK,dV", "kernel's atomics summed"};
      break;
    case Pass::fwd_splitkv:
      t.about = {fmt::format("one CTA per tile of {} rows: positions × the {} query heads", k.block_m, shape.group),
                 "of one K/V head; it loops → over the K/V tiles they see",
                 fmt::format("(its {} warps: {} rows × {} keys of every tile each)", k.warps, k.decode_warp_rows(),
                             k.block_n / k.decode_key_slices())};
      t.notes = {tile_counts(s), "drawn for one split: with several, each CTA takes",
                 "a contiguous share of the loop and fwd_combine merges them"};
      break;
    case Pass::fwd_combine:
      t.about = {"one CTA per row block:", "the splits' O rows merged by their lse", "no tile loop"};
      t.notes = {grid, "launched only when the keys are split"};
      break;
    case Pass::kv_append:
      t.about = {"one CTA per row block of the new keys, values", "and rotated queries: copied (keys rotated)",
                 "into the cache at each sequence's length; no tile loop"};
      t.notes = {grid, "launched before the forward over the cache"};
      break;
  }
  return t;
}

std::string span(int begin, int end) {
  return end - begin == 1 ? fmt::format("{}", begin) : fmt::format("{}–{}", begin, end - 1);
}

// One panel: its text, its gutters around the grid, and where it starts.
struct Panel {
  const PassSchedule* pass = nullptr;
  PanelText text;
  double left = 0;   // from the panel's left edge to the grid
  double right = 0;  // from the grid's right edge to the panel's right edge
  double width = 0;
  double x = 0;
};

Panel layout_panel(const PassSchedule& s, const ScheduleShape& shape, const Grid& g) {
  Panel p;
  p.pass = &s;
  p.text = panel_text(s, shape);
  const bool atomics = !s.spec.deterministic;
  double body = 0;
  switch (s.spec.pass) {
    case Pass::fwd:
    case Pass::fwd_splitkv:
      p.left = kLabelColumn;
      p.right = kGap + kStrip;
      body = g.width();
      break;
    case Pass::bwd_dq:
      p.left = kLabelColumn + kStrip + kGap;
      p.right = kGap + kStrip;
      body = g.width();
      break;
    case Pass::bwd_dkdv:
      p.left = kStrip + kGap + 24;  // room for the dK·dV caption under the read strip
      p.right = atomics ? kGap + kStrip : 0;
      body = g.width();
      break;
    case Pass::bwd_preprocess:
    case Pass::bwd_dq_convert:
    case Pass::fwd_combine:
    case Pass::kv_append:
      p.left = kLabelColumn;
      body = kRowBlockWidth;
      break;
  }
  p.right += 12;  // strip captions reach past their strip
  double w = p.left + body + p.right;
  w = std::max(w, text_width(p.text.title, 14) + 4);
  w = std::max(w, text_width(s.spec.uri(), 10.5) + 4);
  for (const auto& l : p.text.about) w = std::max(w, text_width(l, 11));
  for (const auto& l : p.text.notes) w = std::max(w, text_width(l, 11));
  p.width = w;
  return p;
}

std::string tile_attrs(const PassSchedule& s, TileState state, int q, int k, double fill_t, int cta, int step) {
  std::string fill = state == TileState::skipped  ? kSkippedFill
                     : state == TileState::masked ? hex(mix(kMaskedRamp.first, kMaskedRamp.last, fill_t))
                                                  : hex(mix(kComputedRamp.first, kComputedRamp.last, fill_t));
  std::string a = fmt::format(R"(class="tile {}" data-pass="{}" data-q="{}" data-k="{}")", to_string(state),
                              to_string(s.spec.pass), q, k);
  if (cta > 0) a += fmt::format(R"( data-cta="{}" data-step="{}")", cta, step);
  return a + fmt::format(R"( fill="{}")", fill);
}

std::string mask_cause(const TileVisit& v) {
  if (v.window_edge && v.keys_past_end) return "masked: a mask edge and the end of the keys cut it";
  if (v.window_edge) return "masked: the causal diagonal or a window edge cuts it";
  if (v.keys_past_end) return "masked: the tile reaches past seqlen_k";
  return "computed without a mask";
}

// The step number inside a tile, when it fits.
void tile_number(Svg& svg, double x, double y, double w, double h, int step, double fill_t) {
  const std::string s = fmt::format("{}", step);
  const double size = std::min({10.0, h * 0.78, w / (kGlyph * static_cast<double>(s.size()) + 0.3)});
  if (size < 5.5) return;
  svg.text(x + w / 2, y + h / 2 + size * 0.35, s, size,
           fmt::format(R"(text-anchor="middle" fill="{}" pointer-events="none")", fill_t > 0.45 ? "#ffffff" : kInk));
}

// Every tile of a pass with a tile loop, with its state, owner and loop position.
void draw_tiles(Svg& svg, const PassSchedule& s, const Grid& g) {
  const KernelSpec& k = s.spec;
  std::vector<bool> drawn(static_cast<size_t>(s.q_tiles) * s.k_tiles, false);
  for (const CtaWork& cta : s.ctas) {
    int per_head = 0;
    for (const TileVisit& v : cta.visits) per_head += v.head == 0;
    for (int i = 0; i < per_head; ++i) {
      const TileVisit& v = cta.visits[i];
      const double t = per_head > 1 ? static_cast<double>(i) / (per_head - 1) : 0.5;
      const int m0 = v.q_tile * k.block_m, m1 = std::min(m0 + k.block_m, g.seqlen_q);
      const int n0 = v.k_tile * k.block_n, n1 = std::min(n0 + k.block_n, g.seqlen_k);
      const double x = g.x(n0), y = g.y(m0), w = g.x(n1) - x, h = g.y(m1) - y;
      const TileState state = s.state(v.q_tile, v.k_tile);
      const std::string walk =
          k.persistent ? fmt::format(" (tile {} of its walk)", cta.round + 1) : std::string();
      svg.rect(x, y, w, h, tile_attrs(s, state, v.q_tile, v.k_tile, t, cta.block_x + 1, i + 1),
               fmt::format("Q tile {} (queries {}) × K/V tile {} (keys {}): CTA #{}{}, iteration {} of {}; {}",
                           v.q_tile, span(m0, m1), v.k_tile, span(n0, n1), cta.block_x + 1, walk, i + 1, per_head,
                           mask_cause(v)));
      tile_number(svg, x, y, w, h, i + 1, t);
      drawn[static_cast<size_t>(v.q_tile) * s.k_tiles + v.k_tile] = true;
    }
  }
  for (int q = 0; q < s.q_tiles; ++q)
    for (int kt = 0; kt < s.k_tiles; ++kt) {
      if (drawn[static_cast<size_t>(q) * s.k_tiles + kt]) continue;
      const int m0 = q * k.block_m, m1 = std::min(m0 + k.block_m, g.seqlen_q);
      const int n0 = kt * k.block_n, n1 = std::min(n0 + k.block_n, g.seqlen_k);
      const double x = g.x(n0), y = g.y(m0);
      svg.rect(x, y, g.x(n1) - x, g.y(m1) - y, tile_attrs(s, TileState::skipped, q, kt, 0, 0, 0),
               fmt::format("Q tile {} (queries {}) × K/V tile {} (keys {}): skipped, never loaded: no query of it "
                           "sees a key of it",
                           q, span(m0, m1), kt, span(n0, n1)));
    }
}

// The lines j = i + c that bound the visible band, clipped to the matrix.
void draw_mask_edges(Svg& svg, const PassSchedule& s, const ScheduleShape& shape, const Grid& g) {
  const Edges e = window_edges(s.spec, shape);
  const int off = shape.seqlen_k - shape.seqlen_q;
  auto edge = [&](double c, const char* stroke, const char* cls) {
    const double y0 = std::max(0.0, -c), y1 = std::min<double>(g.seqlen_q, g.seqlen_k - c);
    if (y1 <= y0) return;
    svg.line(g.x(y0 + c), g.y(y0), g.x(y1 + c), g.y(y1),
             fmt::format(R"(class="{}" stroke="{}" stroke-width="1.6" stroke-dasharray="5 3" stroke-linecap="round")",
                         cls, stroke));
  };
  // Row i sees keys [i + off - left, i + off + right]: the edges at its top.
  if (e.right >= 0) edge(off + e.right + 1, kDiagonalStroke, "edge diagonal");
  if (e.left >= 0) edge(off - e.left, kLeftEdgeStroke, "edge left");
}

void strip_caption(Svg& svg, double x_centre, const Grid& g, std::string_view caption) {
  svg.text(x_centre, g.y0 - 16, caption, 9, fmt::format(R"(text-anchor="middle" fill="{}")", kMutedInk));
}

// What a strip cell shows: how the rows are accessed ("write", "read", "atomic", or
// "unused" when no CTA touches them), and the tooltip.
struct StripCell {
  const char* access;
  std::string title;
};

const char* access_fill(std::string_view access) {
  if (access == "write") return kWriteFill;
  if (access == "read") return kReadFill;
  if (access == "atomic") return kAtomicFill;
  return kSkippedFill;
}

// A strip of cells along the query rows, one per block of `block` queries.
template <typename Cell>
void query_strip(Svg& svg, const PassSchedule& s, const Grid& g, double x, int block, Cell cell) {
  for (int b = 0; b * block < g.seqlen_q; ++b) {
    const int m0 = b * block, m1 = std::min(m0 + block, g.seqlen_q);
    const StripCell c = cell(b, m0, m1);
    svg.rect(x, g.y(m0), kStrip, g.y(m1) - g.y(m0),
             fmt::format(R"(class="io {}" data-pass="{}" fill="{}")", c.access, to_string(s.spec.pass),
                         access_fill(c.access)),
             c.title);
  }
}

// "#k" beside each CTA's row, thinned out where rows are too thin to hold a label.
void row_labels(Svg& svg, const PassSchedule& s, const Grid& g, double x_right) {
  const int rows = s.spec.block_m;
  const int stride = std::max(1, static_cast<int>(9.0 / (g.sy * rows) + 0.999));
  for (const CtaWork& cta : s.ctas) {
    if (cta.row_end <= cta.row_begin || cta.block_x % stride != 0) continue;
    const double size = std::min(10.0, std::max(7.0, g.sy * rows * 0.8));
    svg.text(x_right, (g.y(cta.row_begin) + g.y(cta.row_end)) / 2 + size * 0.35, fmt::format("#{}", cta.block_x + 1),
             size, fmt::format(R"(class="cta-label" text-anchor="end" fill="{}")", kMutedInk));
  }
}

int visitors(const PassSchedule& s, int q_tile) {
  int n = 0;
  for (int k = 0; k < s.k_tiles; ++k) n += s.state(q_tile, k) != TileState::skipped;
  return n;
}

void draw_query_tile_panel(Svg& svg, const PassSchedule& s, const ScheduleShape& shape, const Grid& g) {
  const int bm = s.spec.block_m;
  const bool packed = s.spec.pass == Pass::fwd_splitkv;  // rows: position x head of the group
  const bool fwd = s.spec.pass == Pass::fwd || packed;
  draw_tiles(svg, s, g);
  // The edges are lines in query positions; packed rows hold `group` heads per position.
  if (!packed || shape.group == 1) draw_mask_edges(svg, s, shape, g);
  const double right_strip = g.x0 + g.width() + kGap;
  // blockIdx.x + 1 of the CTA owning the Q tile (heaviest first; the split-KV tiles in order)
  auto owner = [&](int q_tile) { return packed ? q_tile + 1 : s.q_tiles - q_tile; };
  if (fwd) {
    strip_caption(svg, right_strip + kStrip / 2, g, "lse");
    query_strip(svg, s, g, right_strip, bm, [&](int b, int m0, int m1) {
      return StripCell{"write",
                       fmt::format("lse of queries {}: written once by CTA #{} after its last tile{}", span(m0, m1),
                                   owner(b), visitors(s, b) == 0 ? " (-inf: these queries see no key, o = 0)" : "")};
    });
    row_labels(svg, s, g, g.x0 - 4);
    return;
  }
  const double left_strip = g.x0 - kGap - kStrip;
  strip_caption(svg, left_strip + kStrip / 2, g, "lse·D");
  query_strip(svg, s, g, left_strip, bm, [&](int b, int m0, int m1) {
    return StripCell{"read", fmt::format("lse and D of queries {}: read once by CTA #{}", span(m0, m1), owner(b))};
  });
  strip_caption(svg, right_strip + kStrip / 2, g, "dQ");
  query_strip(svg, s, g, right_strip, bm, [&](int b, int m0, int m1) {
    return StripCell{"write", fmt::format("dQ of queries {}: written once by CTA #{}", span(m0, m1), owner(b))};
  });
  row_labels(svg, s, g, left_strip - 4);
}

void draw_key_tile_panel(Svg& svg, const PassSchedule& s, const ScheduleShape& shape, const Grid& g) {
  const KernelSpec& k = s.spec;
  draw_tiles(svg, s, g);
  draw_mask_edges(svg, s, shape, g);
  const std::string heads = shape.group > 1 ? fmt::format(" × {} heads", shape.group) : "";

  const double left_strip = g.x0 - kGap - kStrip;
  strip_caption(svg, left_strip + kStrip / 2, g, "lse·D");
  query_strip(svg, s, g, left_strip, k.block_m, [&](int b, int m0, int m1) {
    const int n = visitors(s, b);
    return StripCell{n ? "read" : "unused",
                     fmt::format("lse and D of queries {}: read by {} CTAs{}", span(m0, m1), n, n ? heads : "")};
  });
  if (!k.deterministic) {
    const double right_strip = g.x0 + g.width() + kGap;
    strip_caption(svg, right_strip + kStrip / 2, g, "dQ_acc");
    query_strip(svg, s, g, right_strip, k.block_m, [&](int b, int m0, int m1) {
      const int n = visitors(s, b);
      return StripCell{n ? "atomic" : "unused", fmt::format("fp32 dQ_acc of queries {}: atomicAdd from {} CTAs{}",
                                                            span(m0, m1), n, n ? heads : " (stays 0)")};
    });
  }
  // dK, dV under each column; the CTA number above it.
  const double strip_y = g.y0 + g.height() + kGap;
  svg.text(left_strip + kStrip, strip_y + kStrip * 0.75, "dK·dV", 9,
           fmt::format(R"(text-anchor="end" fill="{}")", kMutedInk));
  const int stride = std::max(1, static_cast<int>(16.0 / (g.sx * k.block_n) + 0.999));
  for (const CtaWork& cta : s.ctas) {
    const double x0 = g.x(cta.row_begin), x1 = g.x(cta.row_end);
    svg.rect(x0, strip_y, x1 - x0, kStrip,
             fmt::format(R"(class="io write" data-pass="{}" fill="{}")", to_string(k.pass), kWriteFill),
             fmt::format("dK, dV of keys {}: written once by CTA #{}{}", span(cta.row_begin, cta.row_end),
                         cta.block_x + 1, cta.visits.empty() ? " (zeros: no query sees these keys)" : ""));
    if (cta.block_x % stride == 0)
      svg.text((x0 + x1) / 2, g.y0 - 5, fmt::format("#{}", cta.block_x + 1),
               std::min(10.0, std::max(7.0, (x1 - x0) * 0.4)),
               fmt::format(R"(class="cta-label" text-anchor="middle" fill="{}")", kMutedInk));
  }
}

void draw_row_block_panel(Svg& svg, const PassSchedule& s, const Grid& g) {
  const bool preprocess = s.spec.pass == Pass::bwd_preprocess;
  strip_caption(svg, g.x0 + kRowBlockWidth / 2, g, preprocess ? "D" : "dQ_acc → dq");
  for (const CtaWork& cta : s.ctas) {
    if (cta.row_end <= cta.row_begin) continue;
    const double y0 = g.y(cta.row_begin), y1 = g.y(cta.row_end);
    svg.rect(g.x0, y0, kRowBlockWidth, y1 - y0,
             fmt::format(R"(class="rowblock" data-pass="{}" data-cta="{}" fill="{}")", to_string(s.spec.pass),
                         cta.block_x + 1, kWriteFill),
             fmt::format("CTA #{}: {} of queries {}{}", cta.block_x + 1, preprocess ? "D = rowsum(dO ∘ O)" : "dq",
                         span(cta.row_begin, cta.row_end),
                         preprocess && !s.spec.deterministic ? "; zeroes their dQ_acc rows" : ""));
  }
  row_labels(svg, s, g, g.x0 - 4);
}

void draw_frame(Svg& svg, const Grid& g, double width) {
  svg.rect(g.x0, g.y0, width, g.height(),
           fmt::format(R"(class="frame" fill="none" stroke="{}" stroke-width="1")", kInk));
}

void draw_panel(Svg& svg, const Panel& p, const ScheduleShape& shape, Grid g, double top) {
  const PassSchedule& s = *p.pass;
  double y = top + 14;
  svg.text(p.x, y, p.text.title, 14, fmt::format(R"(font-weight="bold" fill="{}")", kInk));
  svg.text(p.x, y += 16, s.spec.uri(), 10.5,
           fmt::format(R"(font-family="Menlo, Consolas, monospace" fill="{}")", kMutedInk));
  for (const std::string& line : p.text.about) svg.text(p.x, y += 15, line, 11, fmt::format(R"(fill="{}")", kInk));

  g.x0 = p.x + p.left;
  switch (s.spec.pass) {
    case Pass::fwd:
    case Pass::bwd_dq:
      draw_query_tile_panel(svg, s, shape, g);
      draw_frame(svg, g, g.width());
      break;
    case Pass::fwd_splitkv: {  // rows are the GQA-packed (position, head) rows, in the same height
      Grid rows = g;
      rows.seqlen_q *= shape.group;
      rows.sy /= shape.group;
      draw_query_tile_panel(svg, s, shape, rows);
      draw_frame(svg, rows, rows.width());
      break;
    }
    case Pass::bwd_dkdv:
      draw_key_tile_panel(svg, s, shape, g);
      draw_frame(svg, g, g.width());
      break;
    case Pass::bwd_preprocess:
    case Pass::bwd_dq_convert:
    case Pass::fwd_combine:
    case Pass::kv_append:
      draw_row_block_panel(svg, s, g);
      draw_frame(svg, g, kRowBlockWidth);
      break;
  }
  y = g.y0 + g.height() + kGap + kStrip + 4;
  for (const std::string& line : p.text.notes) svg.text(p.x, y += 15, line, 11, fmt::format(R"(fill="{}")", kInk));
}

// Legend items, laid out left to right and wrapped at `width`; returns the height used.
double draw_legend(Svg& svg, double x0, double y0, double width, bool atomics, const Edges& e) {
  struct Item {
    std::string swatch;  // the swatch's attributes (a fill or a gradient), or "line:COLOUR"
    std::string label;
  };
  std::vector<Item> items = {
      {"fill=\"url(#ramp-computed)\"", "computed without a mask"},
      {"fill=\"url(#ramp-masked)\"", "masked: a mask edge or the end of the keys cuts the tile (mask_scores)"},
      {fmt::format("fill=\"{}\" stroke=\"#cccccc\"", kSkippedFill), "skipped: never loaded"},
      {fmt::format("fill=\"{}\"", kWriteFill), "written once (lse, D, dK·dV, dQ)"},
      {fmt::format("fill=\"{}\"", kReadFill), "read (lse, D)"},
  };
  if (atomics) items.push_back({fmt::format("fill=\"{}\"", kAtomicFill), "fp32 atomicAdd into dQ_acc"});
  if (e.right >= 0)
    items.push_back({fmt::format("line:{}", kDiagonalStroke), e.right == 0 ? "causal diagonal" : "window right edge"});
  if (e.left >= 0) items.push_back({fmt::format("line:{}", kLeftEdgeStroke), "window left edge"});

  double x = x0, y = y0;
  for (const Item& it : items) {
    const double w = 36 + 6 + text_width(it.label, 11) + 22;
    if (x > x0 && x + w > x0 + width) {
      x = x0;
      y += 22;
    }
    if (it.swatch.rfind("line:", 0) == 0)
      svg.line(x, y + 6, x + 36, y + 6,
               fmt::format(R"(stroke="{}" stroke-width="1.6" stroke-dasharray="5 3")", it.swatch.substr(5)));
    else
      svg.rect(x, y, 36, 12, "class=\"swatch\" " + it.swatch);
    svg.text(x + 42, y + 10, it.label, 11, fmt::format(R"(fill="{}")", kInk));
    x += w;
  }
  y += 22;
  svg.text(x0, y + 10,
           "Number in a tile (light → dark): the iteration of the owning CTA's loop that computes it. "
           "#k beside a row or above a column: the CTA owning it, in launch order (blockIdx.x + 1).",
           11, fmt::format(R"(fill="{}")", kMutedInk));
  svg.text(x0, y + 26,
           "Hover a tile for its queries, keys, CTA and why it is masked. Each (batch, head) runs this schedule in its "
           "own CTAs (grid y, z).",
           11, fmt::format(R"(fill="{}")", kMutedInk));
  return y + 34 - y0;
}

std::string gradient(const char* id, Ramp r) {
  return fmt::format(
      R"(<linearGradient id="{}"><stop offset="0" stop-color="{}"/><stop offset="1" stop-color="{}"/></linearGradient>)",
      id, hex(r.first), hex(r.last));
}

}  // namespace

std::string schedule_svg(const std::vector<PassSchedule>& passes, const ScheduleShape& shape) {
  shape.validate();
  if (passes.empty()) throw Error(Status::invalid_argument, "schedule_svg: passes is empty, expected at least one");
  // schedule_pass bounds every schedule to kMaxScheduleTiles tiles.
  const KernelSpec& first = passes.front().spec;
  Grid g = scaled_grid(shape);

  std::vector<Panel> panels;
  double x = kMargin;
  bool atomics = false;
  for (const PassSchedule& s : passes) {
    panels.push_back(layout_panel(s, shape, g));
    panels.back().x = x;
    x += panels.back().width + kPanelGap;
    atomics = atomics || (s.spec.pass == Pass::bwd_dkdv && !s.spec.deterministic);
  }

  const std::string title = fmt::format("Tile schedule of {}{}: seqlen_q N = {}, seqlen_k M = {}", first.uri(),
                                        passes.size() > 1 ? fmt::format(" and {} more kernels", passes.size() - 1) : "",
                                        shape.seqlen_q, shape.seqlen_k);
  const std::string subtitle = fmt::format("head_dim {} · {} · {} · {}", first.head_dim, to_string(first.dtype),
                                           to_string(first.arch), mask_description(first, shape));
  const std::string idea =
      "Each cell is one tile of S = Q·Kᵀ. A CTA keeps its tile of S on chip: the N × M matrix is never stored, "
      "only O(N) rows (lse, D).";
  double width = std::max({x - kPanelGap + kMargin, text_width(title, 18) + 2 * kMargin,
                           text_width(subtitle, 12) + 2 * kMargin, text_width(idea, 12) + 2 * kMargin});
  width = std::max(width, 900.0);

  const double panel_top = 96;
  size_t about_lines = 0, note_lines = 0;
  for (const Panel& p : panels) {
    about_lines = std::max(about_lines, p.text.about.size());
    note_lines = std::max(note_lines, p.text.notes.size());
  }
  g.y0 = panel_top + 30 + 15.0 * static_cast<double>(about_lines) + 10 + kLabelBand;
  const double legend_top = g.y0 + g.height() + kGap + kStrip + 4 + 15.0 * static_cast<double>(note_lines) + 28;

  Svg body;
  body.text(kMargin, 34, title, 18, fmt::format(R"(font-weight="bold" fill="{}")", kInk));
  body.text(kMargin, 56, subtitle, 12, fmt::format(R"(fill="{}")", kInk));
  body.text(kMargin, 74, idea, 12, fmt::format(R"(fill="{}")", kMutedInk));
  for (const Panel& p : panels) {
    body.raw(fmt::format(R"(<g class="panel" data-pass="{}">)", to_string(p.pass->spec.pass)) + "\n");
    draw_panel(body, p, shape, g, panel_top);
    body.raw("</g>\n");
  }
  const Edges edges = window_edges(first, shape);
  const double legend_height = draw_legend(body, kMargin, legend_top, width - 2 * kMargin, atomics, edges);
  const double height = legend_top + legend_height + kMargin;

  std::string svg = fmt::format(
      R"(<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" font-family="Helvetica, Arial, sans-serif">
<title>{2}</title>
<defs>{3}{4}</defs>
<style>.tile, .io, .rowblock {{ stroke: #ffffff; stroke-width: 0.6; }}</style>
<rect class="background" x="0" y="0" width="{0:.0f}" height="{1:.0f}" fill="#ffffff"/>
)",
      width, height, escape(title), gradient("ramp-computed", kComputedRamp), gradient("ramp-masked", kMaskedRamp));
  svg += body.str();
  svg += "</svg>\n";
  return svg;
}

}  // namespace flashgen
