#include "layout/layout.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>
#include <utility>

#include "ir/linear_form.h"
#include "ir/simplify.h"
#include "util/check.h"

namespace tessera::layout {

using ir::Expr;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// unfold's derived sizes for a dim of extent `extent`.
struct UnfoldGeometry {
  int64_t tile = 1, stride = 1, window = 1;
  int64_t tiles = 0;   // T
  int64_t length = 0;  // V*(t-1) + K: the rows one tile of t outputs reads
  int64_t step = 0;    // V*t: where the next tile starts
};

UnfoldGeometry unfold_geometry(const Primitive& p, int64_t extent) {
  UnfoldGeometry g;
  g.tile = p.args[0];
  g.stride = p.args[1];
  g.window = p.args[2];
  // Windows cover every row: a last window may reach past the end (rows a convolution's output
  // never reads still need a place, so that the layout holds the whole tensor).
  const int64_t outputs = ceil_div(extent - g.window, g.stride) + 1;
  g.tiles = ceil_div(outputs, g.tile);
  g.length = g.stride * (g.tile - 1) + g.window;
  g.step = g.stride * g.tile;
  return g;
}

size_t arity(PrimitiveKind k) {
  switch (k) {
    case PrimitiveKind::kSplit:
      return 1;
    case PrimitiveKind::kFuse:
      return 0;
    case PrimitiveKind::kUnfold:
      return 3;
    case PrimitiveKind::kPad:
    case PrimitiveKind::kStoreAt:
      return 2;
    case PrimitiveKind::kReorder:
      return 0;  // any
  }
  return 0;
}

// The dims after applying `p` to `in` (checks that `p` fits them).
std::vector<int64_t> apply_dims(const Primitive& p, const std::vector<int64_t>& in) {
  const int n = static_cast<int>(in.size());
  if (p.kind == PrimitiveKind::kReorder) {
    TESSERA_CHECK(static_cast<int>(p.args.size()) == n)
        << "layout: " << p.to_string() << " must permute all " << n << " dims";
    std::vector<int64_t> out(in.size());
    std::vector<bool> seen(in.size(), false);
    for (int k = 0; k < n; ++k) {
      const int64_t src = p.args[static_cast<size_t>(k)];
      TESSERA_CHECK(src >= 0 && src < n && !seen[static_cast<size_t>(src)])
          << "layout: " << p.to_string() << " is not a permutation of " << n << " dims";
      seen[static_cast<size_t>(src)] = true;
      out[static_cast<size_t>(k)] = in[static_cast<size_t>(src)];
    }
    return out;
  }
  TESSERA_CHECK(p.args.size() == arity(p.kind))
      << "layout: " << p.to_string() << " takes " << arity(p.kind) << " arguments after the dim";
  const int last = p.kind == PrimitiveKind::kFuse ? n - 2 : n - 1;
  TESSERA_CHECK(p.dim >= 0 && p.dim <= last)
      << "layout: " << p.to_string() << " names a dim outside the " << n << " it acts on";
  const size_t d = static_cast<size_t>(p.dim);
  const int64_t e = in[d];
  std::vector<int64_t> out(in.begin(), in.begin() + p.dim);
  switch (p.kind) {
    case PrimitiveKind::kSplit:
      TESSERA_CHECK(p.args[0] >= 1) << "layout: " << p.to_string() << ": factor must be >= 1";
      out.push_back(ceil_div(e, p.args[0]));
      out.push_back(p.args[0]);
      break;
    case PrimitiveKind::kFuse:
      out.push_back(e * in[d + 1]);
      break;
    case PrimitiveKind::kUnfold: {
      TESSERA_CHECK(p.args[0] >= 1 && p.args[1] >= 1 && p.args[2] >= p.args[1] && e >= p.args[2])
          << "layout: " << p.to_string() << " needs tile >= 1, 1 <= stride <= window <= extent ("
          << e << ")";
      const UnfoldGeometry g = unfold_geometry(p, e);
      out.push_back(g.tiles);
      out.push_back(g.length);
      break;
    }
    case PrimitiveKind::kPad:
      TESSERA_CHECK(p.args[0] >= 0 && p.args[1] >= 0)
          << "layout: " << p.to_string() << ": padding must be >= 0";
      out.push_back(p.args[0] + e + p.args[1]);
      break;
    case PrimitiveKind::kStoreAt:
      TESSERA_CHECK(p.args[0] >= 0 && p.args[0] + e <= p.args[1])
          << "layout: " << p.to_string() << ": a dim of " << e << " does not fit at offset "
          << p.args[0] << " of " << p.args[1];
      out.push_back(p.args[1]);
      break;
    case PrimitiveKind::kReorder:
      break;
  }
  const size_t rest = d + (p.kind == PrimitiveKind::kFuse ? 2 : 1);
  out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(rest), in.end());
  return out;
}

// The copy of row `i` in the tile its reader works on, when `i` is `a * step + r` with `a` an
// iterator over tiles and 0 <= r < length: a convolution whose output rows are tiled like the
// unfold reads input row y*V + ky with y = a*t + y_i, so the whole window of output tile `a`
// stays inside physical tile `a` (the point of unfolding). Empty when `i` has no such form.
std::optional<std::pair<Expr, Expr>> tile_aligned_copy(const Expr& i, const UnfoldGeometry& g) {
  const ir::LinearForm f = ir::to_linear(i);
  if (f.invalid) return std::nullopt;
  for (size_t k = 0; k < f.terms.size(); ++k) {
    const ir::LinearTerm& t = f.terms[k];
    if (t.coef != g.step || t.atoms.size() != 1 || !t.atoms[0]->is_var()) continue;
    ir::LinearForm rest = f;
    rest.terms.erase(rest.terms.begin() + static_cast<std::ptrdiff_t>(k));
    const Expr r = ir::from_linear(rest);
    const ir::ConstIntBound rb = ir::const_int_bound(r), ab = ir::const_int_bound(t.atoms[0]);
    if (rb.lo >= 0 && rb.hi < g.length && ab.lo >= 0 && ab.hi < g.tiles) {
      return std::make_pair(t.atoms[0], r);
    }
  }
  return std::nullopt;
}

// One primitive's forward map: indices over `in` dims -> indices over the dims after it.
std::vector<Expr> forward_step(const Primitive& p, const std::vector<int64_t>& in,
                               const std::vector<Expr>& idx) {
  if (p.kind == PrimitiveKind::kReorder) {
    std::vector<Expr> out;
    for (int64_t src : p.args) out.push_back(idx[static_cast<size_t>(src)]);
    return out;
  }
  const size_t d = static_cast<size_t>(p.dim);
  const Expr& i = idx[d];
  std::vector<Expr> out(idx.begin(), idx.begin() + p.dim);
  switch (p.kind) {
    case PrimitiveKind::kSplit:
      out.push_back(ir::floordiv(i, ir::int_imm(p.args[0])));
      out.push_back(ir::floormod(i, ir::int_imm(p.args[0])));
      break;
    case PrimitiveKind::kFuse:
      out.push_back(i * ir::int_imm(in[d + 1]) + idx[d + 1]);
      break;
    case PrimitiveKind::kUnfold: {
      const UnfoldGeometry g = unfold_geometry(p, in[d]);
      if (auto aligned = tile_aligned_copy(i, g)) {
        out.push_back(aligned->first);
        out.push_back(aligned->second);
        break;
      }
      Expr tile = ir::min(ir::floordiv(i, ir::int_imm(g.step)), ir::int_imm(g.tiles - 1));
      out.push_back(tile);
      out.push_back(i - tile * ir::int_imm(g.step));
      break;
    }
    case PrimitiveKind::kPad:
    case PrimitiveKind::kStoreAt:
      out.push_back(i + ir::int_imm(p.args[0]));
      break;
    case PrimitiveKind::kReorder:
      break;
  }
  const size_t rest = d + (p.kind == PrimitiveKind::kFuse ? 2 : 1);
  out.insert(out.end(), idx.begin() + static_cast<std::ptrdiff_t>(rest), idx.end());
  return out;
}

// One primitive's inverse map: indices over the dims after it -> indices over `in` dims.
// `in_range` (optional) collects the conditions under which the result lies inside `in`.
std::vector<Expr> inverse_step(const Primitive& p, const std::vector<int64_t>& in,
                               const std::vector<Expr>& idx, std::vector<Expr>* in_range) {
  if (p.kind == PrimitiveKind::kReorder) {
    std::vector<Expr> out(idx.size());
    for (size_t k = 0; k < p.args.size(); ++k) out[static_cast<size_t>(p.args[k])] = idx[k];
    return out;
  }
  const size_t d = static_cast<size_t>(p.dim);
  const int64_t e = in[d];
  std::vector<Expr> out(idx.begin(), idx.begin() + p.dim);
  Expr i;  // the index of dim d of `in`
  bool may_exceed = false, may_precede = false;
  switch (p.kind) {
    case PrimitiveKind::kSplit:
      i = idx[d] * ir::int_imm(p.args[0]) + idx[d + 1];
      may_exceed = e % p.args[0] != 0;
      break;
    case PrimitiveKind::kFuse: {
      const Expr b = ir::int_imm(in[d + 1]);
      out.push_back(ir::floordiv(idx[d], b));
      out.push_back(ir::floormod(idx[d], b));
      break;
    }
    case PrimitiveKind::kUnfold: {
      const UnfoldGeometry g = unfold_geometry(p, e);
      i = idx[d] * ir::int_imm(g.step) + idx[d + 1];
      may_exceed = (g.tiles - 1) * g.step + g.length > e;
      break;
    }
    case PrimitiveKind::kPad:
    case PrimitiveKind::kStoreAt:
      i = idx[d] - ir::int_imm(p.args[0]);
      may_precede = p.args[0] > 0;
      may_exceed = p.kind == PrimitiveKind::kPad ? p.args[1] > 0 : p.args[0] + e < p.args[1];
      break;
    case PrimitiveKind::kReorder:
      break;
  }
  if (i.defined()) {
    out.push_back(i);
    if (in_range && may_precede) in_range->push_back(ir::ge(i, ir::int_imm(0)));
    if (in_range && may_exceed) in_range->push_back(ir::lt(i, ir::int_imm(e)));
  }
  const size_t consumed =
      p.kind == PrimitiveKind::kSplit || p.kind == PrimitiveKind::kUnfold ? 2 : 1;
  out.insert(out.end(), idx.begin() + static_cast<std::ptrdiff_t>(d + consumed), idx.end());
  return out;
}

PrimitiveKind kind_from_name(const std::string& name) {
  for (PrimitiveKind k : {PrimitiveKind::kSplit, PrimitiveKind::kReorder, PrimitiveKind::kFuse,
                          PrimitiveKind::kUnfold, PrimitiveKind::kPad, PrimitiveKind::kStoreAt}) {
    if (name == primitive_name(k)) return k;
  }
  TESSERA_FAIL() << "layout: unknown primitive '" << name << "'";
}

}  // namespace

const char* primitive_name(PrimitiveKind k) {
  switch (k) {
    case PrimitiveKind::kSplit:
      return "split";
    case PrimitiveKind::kReorder:
      return "reorder";
    case PrimitiveKind::kFuse:
      return "fuse";
    case PrimitiveKind::kUnfold:
      return "unfold";
    case PrimitiveKind::kPad:
      return "pad";
    case PrimitiveKind::kStoreAt:
      return "store_at";
  }
  return "?";
}

std::string Primitive::to_string() const {
  std::ostringstream os;
  os << primitive_name(kind) << "(";
  if (kind != PrimitiveKind::kReorder) os << dim;
  for (size_t k = 0; k < args.size(); ++k) {
    if (k > 0 || kind != PrimitiveKind::kReorder) os << ",";
    os << args[k];
  }
  os << ")";
  return os.str();
}

Layout::Layout(std::vector<int64_t> logical_shape, std::vector<Primitive> primitives)
    : logical_(std::move(logical_shape)), primitives_(std::move(primitives)) {
  for (int64_t e : logical_) TESSERA_CHECK(e >= 1) << "layout: dims must be >= 1, got " << e;
  dims_.push_back(logical_);
  for (const Primitive& p : primitives_) dims_.push_back(apply_dims(p, dims_.back()));
}

Layout Layout::parse(std::vector<int64_t> logical_shape, const std::string& text) {
  std::vector<Primitive> prims;
  size_t pos = 0;
  auto skip_space = [&] {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  };
  skip_space();
  if (text.compare(pos, std::string::npos, "identity") == 0) pos = text.size();
  while (skip_space(), pos < text.size()) {
    const size_t open = text.find('(', pos), close = text.find(')', pos);
    TESSERA_CHECK(open != std::string::npos && close != std::string::npos && open < close)
        << "layout: cannot parse '" << text << "' at " << pos;
    const PrimitiveKind kind = kind_from_name(text.substr(pos, open - pos));
    std::vector<int64_t> nums;
    std::stringstream in(text.substr(open + 1, close - open - 1));
    std::string item;
    while (std::getline(in, item, ',')) {
      try {
        nums.push_back(std::stoll(item));
      } catch (const std::exception&) {
        TESSERA_FAIL() << "layout: '" << item << "' is not an integer in '" << text << "'";
      }
    }
    Primitive p{kind, 0, {}};
    if (kind == PrimitiveKind::kReorder) {
      p.args = nums;
    } else {
      TESSERA_CHECK(!nums.empty()) << "layout: " << primitive_name(kind) << " needs a dim";
      p.dim = static_cast<int>(nums[0]);
      p.args.assign(nums.begin() + 1, nums.end());
    }
    prims.push_back(p);
    pos = close + 1;
  }
  return Layout(std::move(logical_shape), std::move(prims));
}

double Layout::expansion() const {
  double logical = 1, physical = 1;
  for (int64_t e : logical_) logical *= static_cast<double>(e);
  for (int64_t e : physical_shape()) physical *= static_cast<double>(e);
  return physical / logical;
}

std::vector<Expr> Layout::forward(const std::vector<Expr>& logical) const {
  TESSERA_CHECK(logical.size() == logical_.size())
      << "layout: " << logical.size() << " indices for a " << logical_.size() << "-d tensor";
  std::vector<Expr> idx = logical;
  for (size_t k = 0; k < primitives_.size(); ++k) idx = forward_step(primitives_[k], dims_[k], idx);
  return idx;
}

std::vector<Expr> Layout::inverse(const std::vector<Expr>& physical) const {
  TESSERA_CHECK(physical.size() == physical_shape().size())
      << "layout: " << physical.size() << " indices for a " << physical_shape().size()
      << "-d buffer";
  std::vector<Expr> idx = physical;
  for (size_t k = primitives_.size(); k-- > 0;) {
    idx = inverse_step(primitives_[k], dims_[k], idx, nullptr);
  }
  return idx;
}

std::vector<Expr> Layout::inverse_conditions(const std::vector<Expr>& physical) const {
  std::vector<Expr> conds;
  std::vector<Expr> idx = physical;
  for (size_t k = primitives_.size(); k-- > 0;) {
    idx = inverse_step(primitives_[k], dims_[k], idx, &conds);
  }
  return conds;
}

Expr Layout::holds_element(const std::vector<Expr>& physical) const {
  Expr all;
  for (const Expr& c : inverse_conditions(physical)) {
    all = all.defined() ? ir::logical_and(all, c) : c;
  }
  return all.defined() ? all : ir::bool_imm(true);
}

bool Layout::is_dense() const {
  std::vector<Expr> probe(physical_shape().size(), ir::int_imm(0));
  return inverse_conditions(probe).empty();
}

std::string Layout::to_string() const {
  if (primitives_.empty()) return "identity";
  std::string s;
  for (const Primitive& p : primitives_) s += (s.empty() ? "" : " ") + p.to_string();
  return s;
}

}  // namespace tessera::layout
