// The fused attention kernel (schedule/attention.h): every case runs through the loop
// interpreter (which throws on an access outside a buffer) and through the JIT, and both are
// compared with a double-precision softmax(Q K^T * scale + mask) V computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "loop/interpreter.h"
#include "runtime/kernel.h"
#include "schedule/attention.h"
#include "util/check.h"

namespace tessera::schedule {
namespace {

constexpr int64_t kLanes = 16;

std::vector<int64_t> contiguous(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

// Strides of a [b, h, rows, f] view of a tensor stored [b, rows, h, f] (a projection's output
// split into heads, as transformers pass it to attention).
std::vector<int64_t> heads_inner(int64_t h, int64_t rows, int64_t f) {
  return {rows * h * f, f, h * f, 1};
}

int64_t span_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) n += (shape[i] - 1) * strides[i];
  return n;
}

int64_t at(const std::vector<int64_t>& strides, std::vector<int64_t> index) {
  int64_t e = 0;
  for (size_t i = 0; i < index.size(); ++i) e += index[i] * strides[i];
  return e;
}

struct Case {
  AttentionSpec spec;
  std::vector<float> q, k, v, mask;
};

Case make_case(int64_t batch, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d,
               int64_t dv, bool causal, bool mask, bool strided_heads, uint32_t seed) {
  Case c;
  AttentionSpec& s = c.spec;
  s.batch = batch, s.q_heads = hq, s.kv_heads = hkv, s.q_len = lq, s.kv_len = lk;
  s.head_dim = d, s.value_dim = dv, s.causal = causal, s.has_mask = mask;
  s.scale = 1.0 / std::sqrt(static_cast<double>(d));
  s.q_strides = strided_heads ? heads_inner(hq, lq, d) : contiguous({batch, hq, lq, d});
  s.k_strides = strided_heads ? heads_inner(hkv, lk, d) : contiguous({batch, hkv, lk, d});
  s.v_strides = strided_heads ? heads_inner(hkv, lk, dv) : contiguous({batch, hkv, lk, dv});
  s.out_strides = heads_inner(hq, lq, dv);  // as ATen's CPU flash attention returns it
  s.lse_strides = {lq * hq, 1, hq};
  // A padding-style mask shared by the heads: stride 0 broadcasts it.
  s.mask_strides = {lq * lk, 0, lk, 1};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, int64_t n) {
    x.resize(static_cast<size_t>(n));
    for (float& e : x) e = normal(rng);
  };
  fill(c.q, span_of({batch, hq, lq, d}, s.q_strides));
  fill(c.k, span_of({batch, hkv, lk, d}, s.k_strides));
  fill(c.v, span_of({batch, hkv, lk, dv}, s.v_strides));
  if (mask) {
    c.mask.assign(static_cast<size_t>(batch * lq * lk), 0.f);
    for (int64_t b = 0; b < batch; ++b) {  // the last keys of each batch are padding
      for (int64_t i = 0; i < lq; ++i) {
        for (int64_t j = lk - 1 - b; j < lk; ++j) {
          c.mask[static_cast<size_t>(at(s.mask_strides, {b, 0, i, j}))] =
              std::numeric_limits<float>::lowest();
        }
      }
    }
  }
  return c;
}

struct Result {
  std::vector<double> out, lse;  // [b, h, row, f] and [b, h, row], contiguous
};

Result reference(const Case& c) {
  const AttentionSpec& s = c.spec;
  Result r;
  r.out.assign(static_cast<size_t>(s.batch * s.q_heads * s.q_len * s.value_dim), 0);
  r.lse.assign(static_cast<size_t>(s.batch * s.q_heads * s.q_len), 0);
  const int64_t group = s.q_heads / s.kv_heads;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.q_heads; ++h) {
      for (int64_t i = 0; i < s.q_len; ++i) {
        std::vector<double> p(static_cast<size_t>(s.kv_len), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < s.kv_len; ++j) {
          if (s.causal && j > i) continue;
          double dot = 0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dot += static_cast<double>(c.q[at(s.q_strides, {b, h, i, d})]) *
                   c.k[at(s.k_strides, {b, h / group, j, d})];
          }
          dot *= s.scale;
          if (s.has_mask) dot += c.mask[at(s.mask_strides, {b, h, i, j})];
          p[j] = dot;
          mx = std::max(mx, dot);
        }
        double sum = 0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        const int64_t row = (b * s.q_heads + h) * s.q_len + i;
        r.lse[row] = mx + std::log(sum);
        for (int64_t f = 0; f < s.value_dim; ++f) {
          double o = 0;
          for (int64_t j = 0; j < s.kv_len; ++j) {
            o += p[j] * c.v[at(s.v_strides, {b, h / group, j, f})];
          }
          r.out[row * s.value_dim + f] = o / sum;
        }
      }
    }
  }
  return r;
}

// Runs the kernel (interpreted or JIT-compiled) and compares it with the reference.
void expect_attention(const Case& c, const AttentionTiles& tiles, bool interpret) {
  const AttentionSpec& s = c.spec;
  loop::LoweredFunc f = lower_attention(s, tiles, kLanes);
  std::vector<float> out(span_of({s.batch, s.q_heads, s.q_len, s.value_dim}, s.out_strides), NAN);
  std::vector<float> lse(span_of({s.batch, s.q_heads, s.q_len}, s.lse_strides), NAN);
  std::vector<float> q = c.q, k = c.k, v = c.v, mask = c.mask;
  std::vector<void*> args = {q.data(), k.data(), v.data()};
  if (s.has_mask) args.push_back(mask.data());
  args.push_back(out.data());
  args.push_back(lse.data());
  if (interpret) {
    loop::interpret(f, args, {});
  } else {
    runtime::Kernel::compile(f).run(args, {});
  }
  Result want = reference(c);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.q_heads; ++h) {
      for (int64_t i = 0; i < s.q_len; ++i) {
        const int64_t row = (b * s.q_heads + h) * s.q_len + i;
        ASSERT_NEAR(lse[at(s.lse_strides, {b, h, i})], want.lse[row], 1e-4)
            << "lse b" << b << " h" << h << " row " << i;
        for (int64_t d = 0; d < s.value_dim; ++d) {
          ASSERT_NEAR(out[at(s.out_strides, {b, h, i, d})], want.out[row * s.value_dim + d], 2e-5)
              << "b" << b << " h" << h << " row " << i << " dim " << d
              << (interpret ? " (interpreted)" : " (JIT)");
        }
      }
    }
  }
}

void expect_both(const Case& c, AttentionTiles tiles) {
  expect_attention(c, tiles, /*interpret=*/true);
  expect_attention(c, tiles, /*interpret=*/false);
}

TEST(Attention, MatchesTheReferenceWithTheRulesTiles) {
  Case c = make_case(1, 2, 2, 40, 40, 24, 32, false, false, false, 1);
  expect_both(c, default_attention_tiles(c.spec, kLanes, 2));
}

TEST(Attention, CausalRowsSeeOnlyEarlierKeys) {
  // 70 rows: three tasks of 32 rows, the last one ragged; keys in two blocks and a part.
  Case c = make_case(2, 2, 2, 70, 70, 16, 16, true, false, true, 2);
  expect_both(c, default_attention_tiles(c.spec, kLanes, 2));
}

TEST(Attention, MaskBroadcastOverHeadsAndMoreKeysThanRows) {
  Case c = make_case(2, 3, 3, 9, 77, 20, 32, false, true, false, 3);
  expect_both(c, default_attention_tiles(c.spec, kLanes, 2));
}

TEST(Attention, GroupedQueryHeadsShareKeysAndValues) {
  Case c = make_case(1, 6, 2, 33, 33, 32, 64, true, false, true, 4);
  expect_both(c, default_attention_tiles(c.spec, kLanes, 2));
}

TEST(Attention, OneQueryRowAsInADecoderStep) {
  Case c = make_case(1, 4, 4, 1, 50, 64, 64, false, false, false, 5);
  AttentionTiles t = default_attention_tiles(c.spec, kLanes, 2);
  EXPECT_EQ(t.rows_per_task, t.row_tile);  // no task computes rows the query does not have
  expect_both(c, t);
}

TEST(Attention, EveryTileShapeGivesTheSameResult) {
  Case c = make_case(1, 2, 2, 45, 45, 16, 32, true, true, true, 6);
  for (int64_t row_tile : {1, 2, 3}) {
    for (int64_t key_block : {16, 48}) {
      AttentionTiles t{row_tile * 5, row_tile, key_block};
      SCOPED_TRACE(testing::Message() << "row_tile " << row_tile << " key_block " << key_block);
      expect_attention(c, t, /*interpret=*/false);
    }
  }
}

TEST(Attention, TileCandidatesAreDistinctValidAndComputeTheSame) {
  // 70 keys fit one block; the query is short enough to cap some tasks' height.
  Case c = make_case(1, 4, 2, 21, 70, 16, 32, true, true, true, 9);
  const std::vector<AttentionTiles> cands = attention_tile_candidates(c.spec, kLanes, 2);
  ASSERT_GE(cands.size(), 3u);
  const AttentionTiles rules = default_attention_tiles(c.spec, kLanes, 2);
  EXPECT_EQ(cands[0].key_block, rules.key_block);
  EXPECT_EQ(cands[0].rows_per_task, rules.rows_per_task);
  bool one_block = false;
  for (size_t i = 0; i < cands.size(); ++i) {
    const AttentionTiles& t = cands[i];
    SCOPED_TRACE(testing::Message() << "candidate " << i << ": rows_per_task " << t.rows_per_task
                                    << " row_tile " << t.row_tile << " key_block "
                                    << t.key_block);
    one_block = one_block || t.key_block >= c.spec.kv_len;
    EXPECT_LE(t.rows_per_task, 24);  // 21 rows in whole row tiles
    for (size_t j = 0; j < i; ++j) {
      EXPECT_FALSE(cands[j].key_block == t.key_block &&
                   cands[j].rows_per_task == t.rows_per_task && cands[j].row_tile == t.row_tile);
    }
    expect_attention(c, t, /*interpret=*/false);
  }
  EXPECT_TRUE(one_block) << "70 keys fit one block";
  Case long_keys = make_case(1, 2, 2, 8, 300, 16, 16, false, false, false, 10);
  for (const AttentionTiles& t : attention_tile_candidates(long_keys.spec, kLanes, 2)) {
    EXPECT_LT(t.key_block, 300) << "300 keys are more than one block";
  }
}

TEST(Attention, WhatItCannotComputeIsAnErrorNamingWhy) {
  Case c = make_case(1, 3, 2, 8, 8, 16, 16, false, false, false, 7);
  try {
    lower_attention(c.spec, default_attention_tiles(c.spec, kLanes, 2), kLanes);
    FAIL() << "3 query heads over 2 key/value heads was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple"), std::string::npos) << e.what();
  }
  Case odd = make_case(1, 2, 2, 8, 8, 16, 24, false, false, false, 8);
  EXPECT_THROW(lower_attention(odd.spec, default_attention_tiles(odd.spec, kLanes, 2), kLanes),
               Error);
}

}  // namespace
}  // namespace tessera::schedule
