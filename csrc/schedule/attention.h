#pragma once
// Fused scaled-dot-product attention: out = softmax(Q K^T * scale + mask) V in one kernel, as the
// flash-attention loop nest: each parallel task owns a block of query rows and walks the keys in
// blocks, keeping a running row maximum, a running row sum and the output rows (an online
// softmax), so the scores of a block never leave L1 and no [rows, keys] matrix is written.
//
// Not a tensor expression: the running maximum rescales what was summed before it, which no
// summation iterator expresses. The loop nest is built here directly, over the same loop IR,
// passes and code generator as every other kernel.
//
// Layout of the work, per task (a batch, a query head, `rows_per_task` rows):
//   for each key block of `key_block` keys (up to the diagonal when causal):
//     for each group of `row_tile` rows:
//       scores   = Q[rows] . K^T[block]          register tile rows x keys, keys on the lanes
//       scores   = scores * scale + mask, -inf where the key is past the end or the diagonal
//       new max  = max(old max, row max of scores); p = exp(scores - new max)
//       sum      = sum * exp(old max - new max) + row sum of p
//       out rows = out rows * exp(old max - new max) + p . V[block]   register tile rows x dims
//   out rows /= sum; logsumexp = max + log(sum)
// K is read with the keys on the vector lanes, so a first parallel loop copies it transposed
// ([batch, kv head, dim, key], zero past the last key) into a temporary the tasks share.
#include <cstdint>
#include <string>
#include <vector>

#include "loop/stmt.h"

namespace tessera::schedule {

// The attention a kernel computes. Q, K, V, the mask and the output are 4-D
// [batch, heads, rows, features] tensors given by their element strides (a stride of 0
// broadcasts: masks shared by heads or batches); the logsumexp output is [batch, heads, rows].
struct AttentionSpec {
  int64_t batch = 1;
  int64_t q_heads = 1;
  int64_t kv_heads = 1;  // q_heads is a multiple of it: query head h reads kv head h / group
  int64_t q_len = 1;
  int64_t kv_len = 1;
  int64_t head_dim = 1;   // features of Q and K
  int64_t value_dim = 1;  // features of V and the output
  bool causal = false;    // query row i attends to keys j <= i (top-left, as torch's is_causal)
  bool has_mask = false;  // an additive float mask [batch, heads, q_len, kv_len]
  double scale = 1.0;
  std::vector<int64_t> q_strides, k_strides, v_strides, mask_strides, out_strides;  // 4 each
  std::vector<int64_t> lse_strides;                                                 // 3
};

// How the loop nest is blocked.
struct AttentionTiles {
  int64_t rows_per_task = 32;  // query rows one parallel task owns (a multiple of row_tile)
  int64_t row_tile = 4;        // query rows whose scores and outputs are held in registers
  int64_t key_block = 64;      // keys scored per step (a multiple of the vector width)
};

// The rules' tiles: row_tile * value_dim / vector_width output accumulators stay within 16
// vector registers; tasks are as tall as `threads` threads allow while each gets several, and
// no taller than the query (a decoder step has one row).
AttentionTiles default_attention_tiles(const AttentionSpec& spec, int64_t vector_width,
                                       int64_t threads);

// Tiles worth measuring against each other, the rules' first: short tasks (more of them to
// balance over the threads, as causal rows differ in work) with narrow and medium key blocks,
// and, where the keys are few, one key block over all of them (no rescaling between blocks).
// Each is valid for check_attention and listed once. The backend times them (attention.py).
std::vector<AttentionTiles> attention_tile_candidates(const AttentionSpec& spec,
                                                      int64_t vector_width, int64_t threads);

// Throws tessera::Error naming what the kernel cannot compute (value_dim not a multiple of the
// vector width, strides of the wrong length, heads that do not group, bad tiles).
void check_attention(const AttentionSpec& spec, const AttentionTiles& tiles, int64_t vector_width);

// The kernel: arguments q, k, v, [mask], out, lse, each a flat buffer spanning its strides.
// Rows past q_len are never written; reads stay inside the tensors.
loop::LoweredFunc lower_attention(const AttentionSpec& spec, const AttentionTiles& tiles,
                                  int64_t vector_width, const std::string& name = "attention");

}  // namespace tessera::schedule
