#include "schedule/attention.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "ir/buffer.h"
#include "loop/pipeline.h"
#include "util/check.h"

namespace tessera::schedule {

namespace {

using ir::Buffer;
using ir::DType;
using ir::Expr;
using ir::Var;
using loop::ForKind;
using loop::Stmt;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Elements a buffer must hold to reach every index of a tensor with these extents and strides.
int64_t span(const std::vector<int64_t>& extents, const std::vector<int64_t>& strides) {
  int64_t n = 1;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (extents[i] == 0) return 0;
    n += (extents[i] - 1) * strides[i];
  }
  return n;
}

Expr strided(const std::vector<int64_t>& strides, const std::vector<Expr>& index) {
  Expr e = ir::int_imm(0);
  for (size_t i = 0; i < index.size(); ++i) e = e + index[i] * strides[i];
  return e;
}

Stmt loop_over(const Var& v, Expr extent, ForKind kind, Stmt body) {
  return loop::make_for(v, ir::int_imm(0), std::move(extent), kind, std::move(body));
}

Stmt loop_from(const Var& v, int64_t begin, int64_t end, ForKind kind, Stmt body) {
  return loop::make_for(v, ir::int_imm(begin), ir::int_imm(end - begin), kind, std::move(body));
}

// let name = value in body(name)
Stmt let(const std::string& name, Expr value, const std::function<Stmt(Expr)>& body) {
  Var v = ir::var(name, ir::kNoLowerBound, ir::kNoUpperBound, value->dtype);
  return loop::make_let(v, std::move(value), body(v));
}

Buffer local(const std::string& name, int64_t size, ir::MemScope scope) {
  return ir::make_buffer(name, DType::kFloat32, {ir::int_imm(size)}, scope);
}

Expr f32(double v) { return ir::float_imm(v, DType::kFloat32); }

const double kMinusInfinity = -std::numeric_limits<double>::infinity();

// Parallel tasks per thread the rules' tiles keep at least (load balance).
constexpr int64_t kTasksPerThread = 4;
// Most keys scored as one block (a candidate where all keys fit): a row tile's scores, row_tile
// x keys floats, then still sit in L1 next to the key and value blocks.
constexpr int64_t kMaxSingleKeyBlock = 256;

// Everything lower_attention's pieces share: the spec, the tiles and the buffers.
struct Nest {
  const AttentionSpec& spec;
  const AttentionTiles& tiles;
  int64_t lanes;
  int64_t key_span;  // keys per (batch, kv head) in the transposed copy: whole key blocks
  Buffer q, k, v, mask, out, lse, kt;

  // kt[b, hk, d, j]: K transposed, zero past kv_len.
  Expr kt_index(const Expr& bk, const Expr& d, const Expr& j) const {
    return (bk * spec.head_dim + d) * key_span + j;
  }

  // The first parallel loop: kt from k.
  Stmt transpose_keys() const {
    Var bk = ir::var("bk", 0), d = ir::var("d", 0), jo = ir::var("jo", 0), jl = ir::var("jl", 0);
    Expr j = jo * lanes + jl;
    Expr b = ir::floordiv(bk, spec.kv_heads), hk = ir::floormod(bk, spec.kv_heads);
    Expr last = ir::int_imm(spec.kv_len - 1);
    Expr value =
        ir::select(ir::lt(j, ir::int_imm(spec.kv_len)),
                   ir::load(k, strided(spec.k_strides, {b, hk, ir::min(j, last), d})), f32(0));
    Stmt copy =
        loop_over(jl, lanes, ForKind::kVectorized, loop::make_store(kt, kt_index(bk, d, j), value));
    return loop_over(bk, spec.batch * spec.kv_heads, ForKind::kParallel,
                     loop_over(d, spec.head_dim, ForKind::kSerial,
                               loop_over(jo, key_span / lanes, ForKind::kSerial, copy)));
  }

  // The second parallel loop: one task per (batch, query head, block of rows).
  Stmt tasks() const;
};

// Per task: the running state of its rows, and the buffers of one key block.
struct Task {
  const Nest& n;
  Expr b, h, bk, q0;  // batch, query head, batch * kv_heads + kv head, first row
  Buffer row_max, row_sum, acc, scores, alpha;

  const AttentionSpec& spec() const { return n.spec; }
  int64_t rows() const { return n.tiles.rows_per_task; }
  int64_t tile() const { return n.tiles.row_tile; }
  int64_t block() const { return n.tiles.key_block; }
  int64_t dv() const { return spec().value_dim; }

  // The query row read for row r of the task (rows past the end read the last row: their
  // results are computed and dropped, so no read leaves Q).
  Expr q_row(const Expr& r) const { return ir::min(q0 + r, ir::int_imm(spec().q_len - 1)); }

  Stmt init() const {
    Var r = ir::var("r", 0), c = ir::var("c", 0);
    return loop_over(r, rows(), ForKind::kSerial,
                     loop::make_seq({loop::make_store(row_max, r, f32(kMinusInfinity)),
                                     loop::make_store(row_sum, r, f32(0)),
                                     loop_over(c, dv(), ForKind::kVectorized,
                                               loop::make_store(acc, r * dv() + c, f32(0)))}));
  }

  // scores[i, j] for rows g*tile + i and keys k0 + j: Q . K^T in a register tile, then scaled,
  // masked, and -inf where the key is past the end (or, causal, past the row).
  Stmt score(const Expr& k0, const Expr& g) const {
    Buffer sacc = local("sacc", tile() * block(), ir::MemScope::kRegister);
    const int64_t lanes = n.lanes;
    Var i = ir::var("i", 0), ju = ir::var("ju", 0), jv = ir::var("jv", 0), d = ir::var("d", 0);
    Expr j = ju * lanes + jv;
    Expr at = i * block() + j;
    auto over_tile = [&](Stmt body) {
      return loop_over(i, tile(), ForKind::kUnrolled,
                       loop_over(ju, block() / lanes, ForKind::kUnrolled,
                                 loop_over(jv, lanes, ForKind::kVectorized, std::move(body))));
    };
    Expr row = g * tile() + i;
    Expr q = ir::load(n.q, strided(spec().q_strides, {b, h, q_row(row), d}));
    Expr kt = ir::load(n.kt, n.kt_index(bk, d, k0 + j));
    Stmt zero = over_tile(loop::make_store(sacc, at, f32(0)));
    Stmt dot = loop_over(d, spec().head_dim, ForKind::kSerial,
                         over_tile(loop::make_store(sacc, at, ir::load(sacc, at) + q * kt)));
    Expr key = k0 + j;
    Expr value = ir::load(sacc, at) * f32(spec().scale);
    if (spec().has_mask) {
      Expr last = ir::int_imm(spec().kv_len - 1);
      value = value + ir::load(n.mask, strided(spec().mask_strides,
                                               {b, h, q_row(row), ir::min(key, last)}));
    }
    Expr valid = ir::lt(key, ir::int_imm(spec().kv_len));
    if (spec().causal) valid = ir::logical_and(valid, ir::le(key, q0 + row));
    Stmt keep =
        over_tile(loop::make_store(scores, at, ir::select(valid, value, f32(kMinusInfinity))));
    return loop::make_allocate(sacc, loop::make_seq({zero, dot, keep}));
  }

  // Row r = g*tile + i of the block: its new maximum, exp of its scores, its sum, and the factor
  // alpha[i] = exp(old max - new max) the earlier sums and outputs are rescaled by. Each row has
  // its own partial vectors (red) and results (one), so the unrolled rows' chains interleave.
  Stmt softmax_step(const Expr& g) const {
    const int64_t lanes = n.lanes;
    Buffer red = local("red", tile() * lanes, ir::MemScope::kStack);
    Buffer one = local("one", tile(), ir::MemScope::kStack);
    Var i = ir::var("i", 0), ju = ir::var("ju", 0), jv = ir::var("jv", 0);
    Expr r = g * tile() + i;
    Expr s_at = i * block() + ju * lanes + jv;
    Expr red_at = i * lanes + jv;
    auto over_keys = [&](int64_t from, Stmt body) {
      return loop_from(ju, from, block() / lanes, ForKind::kSerial,
                       loop_over(jv, lanes, ForKind::kVectorized, std::move(body)));
    };
    // one[i] = fold(start, the lanes of red[i]) pairwise, as a tree: log2(lanes) dependent steps.
    auto fold_lanes = [&](Expr start, auto&& fold) {
      std::vector<Stmt> steps;
      for (int64_t width = lanes; width > 1; width = (width + 1) / 2) {
        const int64_t half = (width + 1) / 2;
        for (int64_t l = 0; l + half < width; ++l) {
          steps.push_back(loop::make_store(
              red, i * lanes + l,
              fold(ir::load(red, i * lanes + l), ir::load(red, i * lanes + l + half))));
        }
      }
      steps.push_back(loop::make_store(one, i, fold(std::move(start), ir::load(red, i * lanes))));
      return loop::make_seq(steps);
    };
    auto max_fold = [](Expr a, Expr x) { return ir::max(std::move(a), std::move(x)); };
    auto sum_fold = [](Expr a, Expr x) { return std::move(a) + std::move(x); };
    Stmt row_maximum = loop::make_seq(
        {loop_over(jv, lanes, ForKind::kVectorized,
                   loop::make_store(red, red_at, ir::load(scores, i * block() + jv))),
         over_keys(1, loop::make_store(red, red_at,
                                       ir::max(ir::load(red, red_at), ir::load(scores, s_at)))),
         fold_lanes(ir::load(row_max, r), max_fold)});
    Stmt rest = let("new_max", ir::load(one, i), [&](Expr new_max) {
      // A row whose keys so far are all masked keeps -inf; subtracting 0 then gives exp = 0.
      Expr safe = ir::select(ir::eq(new_max, f32(kMinusInfinity)), f32(0), new_max);
      return let("safe_max", safe, [&](Expr safe_max) {
        // p = exp(s - max) and its partial sums in one pass over the keys.
        Stmt exps = loop::make_seq(
            {loop_over(jv, lanes, ForKind::kVectorized, loop::make_store(red, red_at, f32(0))),
             over_keys(
                 0, loop::make_seq(
                        {loop::make_store(scores, s_at, ir::exp(ir::load(scores, s_at) - safe_max)),
                         loop::make_store(red, red_at,
                                          ir::load(red, red_at) + ir::load(scores, s_at))})),
             fold_lanes(f32(0), sum_fold)});
        Expr a = ir::exp(ir::load(row_max, r) - safe_max);
        Stmt update = let("a", a, [&](Expr av) {
          return loop::make_seq(
              {loop::make_store(row_sum, r, ir::load(row_sum, r) * av + ir::load(one, i)),
               loop::make_store(row_max, r, new_max), loop::make_store(alpha, i, av)});
        });
        return loop::make_seq({exps, update});
      });
    });
    return loop::make_allocate(
        red, loop::make_allocate(one, loop_over(i, tile(), ForKind::kUnrolled,
                                                loop::make_seq({row_maximum, rest}))));
  }

  // acc[rows of tile g] = acc * alpha + p . V[block], in a register tile.
  Stmt accumulate(const Expr& k0, const Expr& kv_end, const Expr& g) const {
    const int64_t lanes = n.lanes;
    Buffer oacc = local("oacc", tile() * dv(), ir::MemScope::kRegister);
    Var i = ir::var("i", 0), cu = ir::var("cu", 0), cv = ir::var("cv", 0), j = ir::var("j", 0);
    Expr c = cu * lanes + cv;
    Expr at = i * dv() + c;
    Expr acc_at = (g * tile() + i) * dv() + c;
    auto over_tile = [&](Stmt body) {
      return loop_over(i, tile(), ForKind::kUnrolled,
                       loop_over(cu, dv() / lanes, ForKind::kUnrolled,
                                 loop_over(cv, lanes, ForKind::kVectorized, std::move(body))));
    };
    Expr last = ir::int_imm(spec().kv_len - 1);
    Expr v = ir::load(
        n.v, strided(spec().v_strides, {b, ir::floordiv(h, group()), ir::min(k0 + j, last), c}));
    Stmt start = over_tile(loop::make_store(oacc, at, ir::load(acc, acc_at) * ir::load(alpha, i)));
    // Keys past kv_end have p = 0: the last block stops at the last key.
    Stmt fma =
        loop_over(j, ir::min(ir::int_imm(block()), kv_end - k0), ForKind::kSerial,
                  over_tile(loop::make_store(
                      oacc, at, ir::load(oacc, at) + ir::load(scores, i * block() + j) * v)));
    Stmt back = over_tile(loop::make_store(acc, acc_at, ir::load(oacc, at)));
    return loop::make_allocate(oacc, loop::make_seq({start, fma, back}));
  }

  int64_t group() const { return spec().q_heads / spec().kv_heads; }

  // out = acc / sum and lse = max + log(sum) for the task's rows inside the query.
  Stmt finish() const {
    Var r = ir::var("r", 0), c = ir::var("c", 0);
    Expr count = ir::min(ir::int_imm(rows()), ir::int_imm(spec().q_len) - q0);
    Expr row = q0 + r;
    Stmt out = let("inv_sum", ir::div(f32(1), ir::load(row_sum, r)), [&](Expr inv) {
      return loop::make_seq(
          {loop_over(c, dv(), ForKind::kVectorized,
                     loop::make_store(n.out, strided(spec().out_strides, {b, h, row, c}),
                                      ir::load(acc, r * dv() + c) * inv)),
           loop::make_store(n.lse, strided(spec().lse_strides, {b, h, row}),
                            ir::load(row_max, r) + ir::log(ir::load(row_sum, r)))});
    });
    return loop_over(r, count, ForKind::kSerial, out);
  }

  Stmt body() const {
    Var kb = ir::var("kb", 0), g = ir::var("g", 0);
    Expr kv_end = spec().causal ? ir::min(ir::int_imm(spec().kv_len), q0 + rows())
                                : ir::int_imm(spec().kv_len);
    Expr blocks = ir::floordiv(kv_end + (block() - 1), block());
    Stmt per_block = let("k0", kb * block(), [&](Expr k0) {
      Stmt step = loop::make_seq({score(k0, g), softmax_step(g), accumulate(k0, kv_end, g)});
      if (spec().causal) {  // a block wholly right of the group's diagonal adds nothing
        step = loop::make_if(ir::le(k0, q0 + (g + 1) * tile() - 1), step);
      }
      return loop_over(g, rows() / tile(), ForKind::kSerial, step);
    });
    Stmt all =
        loop::make_seq({init(), loop_over(kb, blocks, ForKind::kSerial, per_block), finish()});
    for (const Buffer& buf : {row_max, row_sum, acc, scores, alpha}) {
      all = loop::make_allocate(buf, all);
    }
    return all;
  }
};

Stmt Nest::tasks() const {
  const int64_t row_blocks = ceil_div(spec.q_len, tiles.rows_per_task);
  Var task = ir::var("task", 0);
  Expr bh = ir::floordiv(task, row_blocks);
  Expr b = ir::floordiv(bh, spec.q_heads), h = ir::floormod(bh, spec.q_heads);
  Expr group = ir::int_imm(spec.q_heads / spec.kv_heads);
  Stmt body = let("b", b, [&](Expr bv) {
    return let("h", h, [&](Expr hv) {
      Expr bk = bv * spec.kv_heads + ir::floordiv(hv, group);
      Expr q0 = ir::floormod(task, row_blocks) * tiles.rows_per_task;
      return let("q0", q0, [&](Expr q0v) {
        const int64_t rows = tiles.rows_per_task, tile = tiles.row_tile;
        Task t{*this,
               bv,
               hv,
               bk,
               q0v,
               local("row_max", rows, ir::MemScope::kStack),
               local("row_sum", rows, ir::MemScope::kStack),
               local("acc", rows * spec.value_dim, ir::MemScope::kStack),
               local("scores", tile * tiles.key_block, ir::MemScope::kStack),
               local("alpha", tile, ir::MemScope::kStack)};
        return t.body();
      });
    });
  });
  return loop_over(task, spec.batch * spec.q_heads * row_blocks, ForKind::kParallel, body);
}

}  // namespace

AttentionTiles default_attention_tiles(const AttentionSpec& spec, int64_t vector_width,
                                       int64_t threads) {
  AttentionTiles t;
  const int64_t accumulators = 16;  // vector registers for one tile's outputs (of 32)
  const int64_t per_row = std::max<int64_t>(1, spec.value_dim / vector_width);
  t.row_tile = std::clamp<int64_t>(accumulators / per_row, 1, 4);
  t.key_block = 4 * vector_width;
  // Taller tasks read each key and value block for more rows, so take the tallest that still
  // gives every thread several tasks.
  // Causal tasks stay short: a tall task's early rows would wait on keys only its late rows see.
  // The rows are spread evenly over a head's tasks, so the last one is not mostly padding.
  const int64_t heads = spec.batch * spec.q_heads;
  auto even_rows = [&](int64_t tallest) {
    const int64_t tasks = ceil_div(spec.q_len, tallest);
    return ceil_div(ceil_div(spec.q_len, tasks), t.row_tile) * t.row_tile;
  };
  t.rows_per_task = even_rows(32);
  if (!spec.causal) {
    for (int64_t tallest : {64, 128}) {
      if (heads * ceil_div(spec.q_len, tallest) >= kTasksPerThread * threads) {
        t.rows_per_task = even_rows(tallest);
      }
    }
  }
  return t;
}

std::vector<AttentionTiles> attention_tile_candidates(const AttentionSpec& spec,
                                                      int64_t vector_width, int64_t threads) {
  const AttentionTiles rules = default_attention_tiles(spec, vector_width, threads);
  std::vector<AttentionTiles> out{rules};
  auto add = [&](int64_t key_block, int64_t rows_per_task) {
    AttentionTiles t = rules;
    t.key_block = key_block;
    // No taller than the query (rounded up to whole row tiles).
    t.rows_per_task = std::min(rows_per_task, ceil_div(spec.q_len, t.row_tile) * t.row_tile);
    for (const AttentionTiles& o : out) {
      if (o.key_block == t.key_block && o.rows_per_task == t.rows_per_task &&
          o.row_tile == t.row_tile) {
        return;
      }
    }
    out.push_back(t);
  };
  const int64_t short_task = 4 * rules.row_tile;
  add(2 * vector_width, short_task);
  add(4 * vector_width, short_task);
  add(2 * vector_width, 2 * rules.row_tile);
  const int64_t all_keys = ceil_div(spec.kv_len, vector_width) * vector_width;
  if (all_keys <= kMaxSingleKeyBlock) {
    add(all_keys, 2 * rules.row_tile);
    add(all_keys, rules.rows_per_task);
  }
  return out;
}

void check_attention(const AttentionSpec& spec, const AttentionTiles& tiles, int64_t vector_width) {
  TESSERA_CHECK(spec.batch >= 1 && spec.q_heads >= 1 && spec.kv_heads >= 1 && spec.q_len >= 1 &&
                spec.kv_len >= 1 && spec.head_dim >= 1 && spec.value_dim >= 1)
      << "attention needs at least one batch, head, row, key and feature";
  TESSERA_CHECK(spec.q_heads % spec.kv_heads == 0)
      << "query heads (" << spec.q_heads << ") are not a multiple of key/value heads ("
      << spec.kv_heads << ")";
  TESSERA_CHECK(spec.value_dim % vector_width == 0)
      << "value dim " << spec.value_dim << " is not a multiple of the vector width "
      << vector_width;
  for (const auto* s : {&spec.q_strides, &spec.k_strides, &spec.v_strides, &spec.out_strides}) {
    TESSERA_CHECK(s->size() == 4) << "attention tensors are 4-D: give 4 strides";
  }
  TESSERA_CHECK(!spec.has_mask || spec.mask_strides.size() == 4) << "the mask needs 4 strides";
  TESSERA_CHECK(spec.lse_strides.size() == 3) << "logsumexp is 3-D: give 3 strides";
  TESSERA_CHECK(tiles.row_tile >= 1 && tiles.rows_per_task % tiles.row_tile == 0)
      << "rows_per_task must be a multiple of row_tile";
  TESSERA_CHECK(tiles.key_block >= vector_width && tiles.key_block % vector_width == 0)
      << "key_block must be a multiple of the vector width";
}

loop::LoweredFunc lower_attention(const AttentionSpec& spec, const AttentionTiles& tiles,
                                  int64_t vector_width, const std::string& name) {
  check_attention(spec, tiles, vector_width);
  const AttentionSpec& s = spec;
  auto global = [](const std::string& n, int64_t size) {
    return ir::make_buffer(n, DType::kFloat32, {ir::int_imm(size)});
  };
  const int64_t key_span = ceil_div(s.kv_len, tiles.key_block) * tiles.key_block;
  Nest nest{spec,
            tiles,
            vector_width,
            key_span,
            global("q", span({s.batch, s.q_heads, s.q_len, s.head_dim}, s.q_strides)),
            global("k", span({s.batch, s.kv_heads, s.kv_len, s.head_dim}, s.k_strides)),
            global("v", span({s.batch, s.kv_heads, s.kv_len, s.value_dim}, s.v_strides)),
            s.has_mask
                ? global("mask", span({s.batch, s.q_heads, s.q_len, s.kv_len}, s.mask_strides))
                : Buffer(),
            global("out", span({s.batch, s.q_heads, s.q_len, s.value_dim}, s.out_strides)),
            global("lse", span({s.batch, s.q_heads, s.q_len}, s.lse_strides)),
            local("kt", s.batch * s.kv_heads * s.head_dim * key_span, ir::MemScope::kHeap)};
  loop::LoweredFunc f;
  f.name = name;
  f.args = {nest.q, nest.k, nest.v};
  if (s.has_mask) f.args.push_back(nest.mask);
  f.args.push_back(nest.out);
  f.args.push_back(nest.lse);
  f.body = loop::make_allocate(nest.kt, loop::make_seq({nest.transpose_keys(), nest.tasks()}));
  return loop::run_loop_passes(std::move(f));
}

}  // namespace tessera::schedule
