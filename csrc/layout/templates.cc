#include "layout/templates.h"

#include <optional>

#include "ir/functor.h"

namespace tessera::layout {

using ir::Expr;
using ir::Tensor;

namespace {

// The anchor: the one summing compute tagged conv2d or matmul, when there is exactly one summing
// compute and every tensor has constant shape.
Tensor find_anchor(const std::vector<Tensor>& outputs) {
  const ir::TensorDAG dag = ir::collect_dag(outputs);
  if (!dag.size_vars.empty()) return nullptr;
  Tensor anchor;
  for (const Tensor& t : dag.computes) {
    if (t->op->reduce == ir::ReduceKind::kNone) continue;
    if (anchor) return nullptr;  // a second summing op: not one anchor
    anchor = t;
  }
  if (!anchor || anchor->op->reduce != ir::ReduceKind::kSum) return nullptr;
  return anchor->op->tag == "conv2d" || anchor->op->tag == "matmul" ? anchor : nullptr;
}

// The tensors `t`'s body reads, in order of first read.
std::vector<Tensor> reads_in_order(const Tensor& t) {
  std::vector<Tensor> out;
  ir::visit_expr(t->op->body, [&](const Expr& e) {
    if (e->kind != ir::ExprKind::kAccess) return;
    for (const Tensor& seen : out) {
      if (seen.get() == e->tensor.get()) return;
    }
    out.push_back(e->tensor);
  });
  return out;
}

Layout of(const Tensor& t, const std::string& text) {
  return Layout::parse(constant_shape(t), text);
}

// Channel block of 4-D NCHW activations with `channels` channels: the vector width, or half of it,
// whichever divides (nullopt when neither does).
std::optional<int64_t> channel_block(int64_t channels, int lanes) {
  for (int64_t b : {static_cast<int64_t>(lanes), static_cast<int64_t>(lanes / 2)}) {
    if (b > 1 && channels % b == 0) return b;
  }
  return std::nullopt;
}

std::string blocked_activation(int64_t b) {
  return "split(1," + std::to_string(b) + ") reorder(0,1,3,4,2)";
}

struct ConvParts {
  Tensor input;   // the placeholder the activation comes from
  Tensor padded;  // the padded copy the conv reads (null: it reads the input directly)
  Tensor weight;  // null when not a placeholder
  Tensor anchor;
};

ConvParts conv_parts(const Tensor& anchor) {
  ConvParts p;
  p.anchor = anchor;
  const std::vector<Tensor> reads = reads_in_order(anchor);
  if (reads.size() != 2) return p;
  Tensor act = reads[0];
  if (!act->is_placeholder() && act->op->tag == "pad") {
    const std::vector<Tensor> src = ir::direct_inputs(act);
    if (src.size() == 1 && src[0]->is_placeholder()) {
      p.padded = act;
      act = src[0];
    }
  }
  if (act->is_placeholder()) p.input = act;
  if (reads[1]->is_placeholder()) p.weight = reads[1];
  return p;
}

// Lays out the activation (input and padded copy) of `p` in `text`, when it has one.
void lay_activation(const ConvParts& p, const std::string& text, LayoutMap* m) {
  if (p.input) m->emplace(p.input->name, of(p.input, text));
  if (p.padded) m->emplace(p.padded->name, of(p.padded, text));
}

std::vector<LayoutCandidate> conv_candidates(const Tensor& anchor, bool depthwise, int lanes) {
  std::vector<LayoutCandidate> out;
  const ConvParts p = conv_parts(anchor);
  const std::vector<int64_t> y = constant_shape(anchor);
  const int64_t in_channels = p.input ? constant_shape(p.input)[1] : 0;
  const std::optional<int64_t> ob = channel_block(y[1], lanes);
  const std::optional<int64_t> ib = depthwise ? ob : channel_block(in_channels, lanes);
  if (ob) {
    const std::string b = std::to_string(*ob);
    // Activations blocked on both sides (depthwise: input and output channels are the same).
    if (ib && (!depthwise || *ib == *ob)) {
      LayoutCandidate c{"NCHW" + b + "c", {}};
      lay_activation(p, blocked_activation(*ib), &c.layouts);
      c.layouts.emplace(anchor->name, of(anchor, blocked_activation(*ob)));
      if (p.weight) {
        const std::string w = depthwise ? "split(0," + b + ") reorder(0,2,3,4,1)"
                                        : "split(0," + b + ") split(2," + std::to_string(*ib) +
                                              ") reorder(0,2,4,5,3,1)";
        c.layouts.emplace(p.weight->name, of(p.weight, w));
      }
      out.push_back(c);
    }
    if (!depthwise) {
      LayoutCandidate c{"NCHW->NCHW" + b + "c", {}};
      c.layouts.emplace(anchor->name, of(anchor, blocked_activation(*ob)));
      if (p.weight) {
        c.layouts.emplace(p.weight->name, of(p.weight, "split(0," + b + ") reorder(0,2,3,4,1)"));
      }
      out.push_back(c);
    }
  }
  LayoutCandidate nhwc{"NHWC", {}};
  lay_activation(p, "reorder(0,2,3,1)", &nhwc.layouts);
  nhwc.layouts.emplace(anchor->name, of(anchor, "reorder(0,2,3,1)"));
  if (p.weight) nhwc.layouts.emplace(p.weight->name, of(p.weight, "reorder(2,3,1,0)"));
  out.push_back(nhwc);
  return out;
}

std::vector<LayoutCandidate> matmul_candidates(const Tensor& anchor, int lanes) {
  const std::vector<int64_t> c = constant_shape(anchor);
  if (c.size() != 2 || c[1] % lanes != 0) return {};
  const std::string b = std::to_string(lanes);
  LayoutCandidate out_only{"C" + b + "n", {}};
  out_only.layouts.emplace(anchor->name, of(anchor, "split(1," + b + ") reorder(1,0,2)"));
  std::vector<LayoutCandidate> out{out_only};
  const std::vector<Tensor> reads = reads_in_order(anchor);
  if (reads.size() == 2 && reads[1]->is_placeholder()) {
    // B's dim read at the output's column n becomes panels of b columns, outermost.
    int dim_n = -1;
    ir::visit_expr(anchor->op->body, [&](const Expr& e) {
      if (e->kind != ir::ExprKind::kAccess || e->tensor.get() != reads[1].get()) return;
      for (size_t d = 0; d < e->operands.size(); ++d) {
        if (e->operands[d].same_as(anchor->op->axes[1].var)) dim_n = static_cast<int>(d);
      }
    });
    if (dim_n >= 0) {
      LayoutCandidate panels{"C" + b + "n+B" + b + "n", out_only.layouts};
      const std::string w =
          dim_n == 1 ? "split(1," + b + ") reorder(1,0,2)" : "split(0," + b + ") reorder(0,2,1)";
      panels.layouts.emplace(reads[1]->name, of(reads[1], w));
      out.push_back(panels);
    }
  }
  return out;
}

}  // namespace

const char* anchor_kind_name(AnchorKind k) {
  switch (k) {
    case AnchorKind::kNone:
      return "none";
    case AnchorKind::kConv:
      return "conv";
    case AnchorKind::kDepthwise:
      return "depthwise";
    case AnchorKind::kMatmul:
      return "matmul";
  }
  return "?";
}

AnchorKind anchor_kind(const std::vector<Tensor>& outputs) {
  const Tensor anchor = find_anchor(outputs);
  if (!anchor) return AnchorKind::kNone;
  if (anchor->op->tag == "matmul") return AnchorKind::kMatmul;
  auto dw = anchor->op->attrs.find("depthwise");
  return dw != anchor->op->attrs.end() && dw->second == "1" ? AnchorKind::kDepthwise
                                                            : AnchorKind::kConv;
}

std::vector<LayoutCandidate> layout_candidates(const std::vector<Tensor>& outputs,
                                               int vector_lanes) {
  std::vector<LayoutCandidate> out{{"fixed", {}}};
  const Tensor anchor = find_anchor(outputs);
  std::vector<LayoutCandidate> more;
  switch (anchor_kind(outputs)) {
    case AnchorKind::kConv:
      more = conv_candidates(anchor, false, vector_lanes);
      break;
    case AnchorKind::kDepthwise:
      more = conv_candidates(anchor, true, vector_lanes);
      break;
    case AnchorKind::kMatmul:
      more = matmul_candidates(anchor, vector_lanes);
      break;
    case AnchorKind::kNone:
      break;
  }
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

}  // namespace tessera::layout
