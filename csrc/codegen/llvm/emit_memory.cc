// Loads and stores. Inside a vectorized loop the flat index decides the access form: unit lane
// stride -> one vector load/store, lane-invariant -> scalar access (broadcast on use), a small
// constant lane stride (loads only) -> contiguous loads and shuffles, anything else ->
// gather/scatter of a per-lane address vector. Under a varying `if` the active-lane mask makes
// every access masked.
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <vector>

#include "codegen/llvm/emitter.h"
#include "loop/lane_analysis.h"
#include "util/check.h"

namespace tessera::codegen::detail {

namespace {
// Value-numbering op codes of memory-side helpers (distinct from binop's kind*16+dtype codes).
constexpr int kVnIndexCast = 100000;
constexpr int kVnAddress = 100001;
// Largest lane stride loaded as contiguous vectors and shuffles rather than gathered: a 16-lane
// gather costs about as much as 4 vector loads and their shuffles on AVX-512.
constexpr int64_t kMaxDeinterleavedStride = 4;
}  // namespace

llvm::Value* Emitter::buffer_ptr(const ir::Buffer& b) {
  auto it = fn_->bufs.find(b.get());
  TESSERA_CHECK(it != fn_->bufs.end())
      << "buffer " << b->name << " is used but is neither a kernel argument nor allocated by an "
      << "enclosing Allocate";
  return it->second;
}

llvm::Value* Emitter::index_i64(llvm::Value* idx, DType t) {
  TESSERA_CHECK(ir::is_int(t) || t == DType::kBool)
      << "buffer index of type " << ir::dtype_name(t) << " (must be an integer)";
  llvm::Type* i64 = shaped_like(b_.getInt64Ty(), idx);
  if (idx->getType() == i64) return idx;
  return reuse(kVnIndexCast, idx, nullptr, [&] {
    return t == DType::kBool ? b_.CreateZExt(idx, i64) : b_.CreateSExtOrTrunc(idx, i64);
  });
}

llvm::Value* Emitter::address(llvm::Type* elem, llvm::Value* base, llvm::Value* index) {
  return reuse(kVnAddress, base, index, [&] { return b_.CreateGEP(elem, base, index); });
}

llvm::Value* Emitter::from_storage(llvm::Value* v, DType t) {
  switch (t) {
    case DType::kBool:
      return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    case DType::kFloat16:
      return b_.CreateFPExt(b_.CreateBitCast(v, shaped_like(b_.getHalfTy(), v)),
                            shaped_like(b_.getFloatTy(), v));
    case DType::kBFloat16: {
      // bf16 is the top half of an f32: widening is a shift, no LLVM bfloat support needed.
      llvm::Value* w = b_.CreateZExt(v, shaped_like(b_.getInt32Ty(), v));
      return b_.CreateBitCast(b_.CreateShl(w, 16), shaped_like(b_.getFloatTy(), v));
    }
    default:
      return v;
  }
}

llvm::Value* Emitter::to_storage(llvm::Value* v, DType t) {
  switch (t) {
    case DType::kBool:
      return b_.CreateZExt(v, shaped_like(b_.getInt8Ty(), v));
    case DType::kFloat16:
      return b_.CreateBitCast(b_.CreateFPTrunc(v, shaped_like(b_.getHalfTy(), v)),
                              shaped_like(b_.getInt16Ty(), v));
    case DType::kBFloat16: {
      llvm::Value* r = round_to_dtype(v, DType::kBFloat16);
      llvm::Value* bits = b_.CreateBitCast(r, shaped_like(b_.getInt32Ty(), v));
      return b_.CreateTrunc(b_.CreateLShr(bits, 16), shaped_like(b_.getInt16Ty(), v));
    }
    default:
      return v;
  }
}

Expr Emitter::lane0_index(const Expr& index) {
  Expr e = ir::substitute(index, vec_->varying_defs);
  ir::VarMap m;
  m[vec_->var] = vec_->lane0;
  e = ir::substitute(e, m);
  keep_alive_.push_back(e);
  return e;
}

llvm::Value* Emitter::all_lanes_mask() {
  return llvm::ConstantInt::getTrue(
      llvm::FixedVectorType::get(b_.getInt1Ty(), static_cast<unsigned>(vec_->lanes)));
}

llvm::BasicBlock* Emitter::begin_any_lane_guard(llvm::BasicBlock** merge) {
  llvm::Value* any = b_.CreateOrReduce(vec_->mask);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "any.lane", fn_->fn);
  *merge = llvm::BasicBlock::Create(ctx_, "any.lane.end", fn_->fn);
  b_.CreateCondBr(any, body, *merge);
  b_.SetInsertPoint(body);
  return pre;
}

bool Emitter::vector_in_stack_buffer(const ir::Buffer& buf, llvm::Value* first,
                                     int64_t lanes) const {
  auto it = fn_->stack_elems.find(buf.get());
  auto* c = llvm::dyn_cast<llvm::ConstantInt>(first);
  return it != fn_->stack_elems.end() && c != nullptr && c->getSExtValue() >= 0 &&
         c->getSExtValue() + lanes <= it->second;
}

VVal Emitter::emit_load(const Expr& e) {
  const ir::Buffer& buf = e->buffer;
  TESSERA_CHECK(buf != nullptr && e->operands.size() == 1) << "malformed Load";
  const Expr& idx = e->operands[0];
  DType t = buf->dtype;
  llvm::Type* st = storage_type(t);
  llvm::Align align(st->getPrimitiveSizeInBits() / 8);
  llvm::Value* base = buffer_ptr(buf);

  if (vec_ == nullptr || !is_varying(idx)) {
    llvm::Value* addr = address(st, base, index_i64(emit_uniform(idx), idx->dtype));
    if (vec_ == nullptr || vec_->mask == nullptr) {
      llvm::Value* v = b_.CreateAlignedLoad(st, addr, align);
      tag_access(v, buf);
      return {from_storage(v, t), false};
    }
    llvm::BasicBlock* merge = nullptr;
    llvm::BasicBlock* pre = begin_any_lane_guard(&merge);
    llvm::Value* v = b_.CreateAlignedLoad(st, addr, align);  // no new pure values: no region
    tag_access(v, buf);
    llvm::BasicBlock* load_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    llvm::PHINode* phi = b_.CreatePHI(st, 2);
    phi->addIncoming(v, load_end);
    phi->addIncoming(llvm::Constant::getNullValue(st), pre);
    return {from_storage(phi, t), false};
  }

  auto* vt = llvm::FixedVectorType::get(st, static_cast<unsigned>(vec_->lanes));
  llvm::Value* zero = llvm::Constant::getNullValue(vt);
  auto stride = loop::lane_stride(idx, vec_->var, vec_->varying_defs);
  llvm::Value* v = nullptr;
  if (stride && *stride == 1) {
    Expr first = lane0_index(idx);
    llvm::Value* first_index = index_i64(emit_uniform(first), first->dtype);
    llvm::Value* addr = address(st, base, first_index);
    llvm::Value* vptr = b_.CreateBitCast(addr, vt->getPointerTo());
    if (vec_->mask && vector_in_stack_buffer(buf, first_index, vec_->lanes)) {
      llvm::Value* whole = b_.CreateAlignedLoad(vt, vptr, align);
      tag_access(whole, buf);
      v = b_.CreateSelect(vec_->mask, whole, zero);  // a masked load's value, off lanes 0
    } else if (vec_->mask) {
      v = b_.CreateMaskedLoad(vt, vptr, align, vec_->mask, zero);
    } else {
      v = b_.CreateAlignedLoad(vt, vptr, align);
    }
  } else if (llvm::Value* column = transposed_tile_read(vt, buf, idx, stride, align)) {
    v = column;
  } else if (stride && *stride >= 2 &&
             *stride <= std::min<int64_t>(kMaxDeinterleavedStride, vec_->lanes)) {
    Expr first = lane0_index(idx);
    llvm::Value* addr = address(st, base, index_i64(emit_uniform(first), first->dtype));
    return {from_storage(deinterleaved_load(vt, addr, *stride, align, buf), t), true};
  } else {
    llvm::Value* lanes_idx = index_i64(widen(emit(idx)), idx->dtype);
    llvm::Value* ptrs = b_.CreateGEP(st, base, lanes_idx);
    v = b_.CreateMaskedGather(vt, ptrs, align, vec_->mask ? vec_->mask : all_lanes_mask(), zero);
  }
  tag_access(v, buf);
  return {from_storage(v, t), true};
}

llvm::Value* Emitter::transposed_tile_read(llvm::FixedVectorType* vt, const ir::Buffer& buf,
                                           const Expr& idx, std::optional<int64_t> stride,
                                           llvm::Align align) {
  if (!stride || *stride != vec_->lanes || vec_->mask != nullptr ||
      !fn_->stack_elems.count(buf.get())) {
    return nullptr;
  }
  const Expr first = lane0_index(idx);
  return tile_column(vt, buf, index_i64(emit_uniform(first), first->dtype), align);
}

llvm::Value* Emitter::tile_column(llvm::FixedVectorType* vt, const ir::Buffer& buf,
                                  llvm::Value* first, llvm::Align align) {
  const int64_t lanes = vec_->lanes;
  auto elems = fn_->stack_elems.find(buf.get());
  auto* column = llvm::dyn_cast<llvm::ConstantInt>(first);
  if (elems == fn_->stack_elems.end() || elems->second != lanes * lanes || column == nullptr ||
      column->getSExtValue() < 0 || column->getSExtValue() >= lanes) {
    return nullptr;
  }
  FnState::TileColumns& tile = fn_->tile_columns[buf.get()];
  if (tile.block != b_.GetInsertBlock() || tile.columns.empty()) {
    std::vector<llvm::Value*> x;
    for (int64_t r = 0; r < lanes; ++r) {
      llvm::Value* row = b_.CreateAlignedLoad(
          vt, address(vt->getElementType(), buffer_ptr(buf), b_.getInt64(r * lanes)), align);
      tag_access(row, buf);
      x.push_back(row);
    }
    // Round `half` swaps the off-diagonal half x half blocks of every 2half x 2half block: after
    // all rounds x[i][j] is row j's element i.
    for (int64_t half = 1; half < lanes; half <<= 1) {
      std::vector<int> low(static_cast<size_t>(lanes)), high(static_cast<size_t>(lanes));
      for (int64_t j = 0; j < lanes; ++j) {
        low[static_cast<size_t>(j)] = static_cast<int>((j & half) ? lanes + j - half : j);
        high[static_cast<size_t>(j)] = static_cast<int>((j & half) ? lanes + j : j + half);
      }
      for (int64_t i = 0; i < lanes; ++i) {
        if (i & half) continue;
        llvm::Value* a = x[static_cast<size_t>(i)];
        llvm::Value* b = x[static_cast<size_t>(i + half)];
        x[static_cast<size_t>(i)] = b_.CreateShuffleVector(a, b, low);
        x[static_cast<size_t>(i + half)] = b_.CreateShuffleVector(a, b, high);
      }
    }
    tile = {b_.GetInsertBlock(), x};
  }
  return tile.columns[static_cast<size_t>(column->getSExtValue())];
}

llvm::Value* Emitter::deinterleaved_load(llvm::FixedVectorType* vt, llvm::Value* first,
                                         int64_t stride, llvm::Align align, const ir::Buffer& buf) {
  const int64_t lanes = vec_->lanes;
  // The lanes read elements 0 .. stride*(lanes-1) from `first`: `stride` vectors cover them
  // and stride-1 more, which the last vector's mask leaves unread (they may lie past the
  // buffer). Under a lane mask, each vector reads only the elements of active lanes.
  const int64_t span = stride * (lanes - 1) + 1;
  llvm::Type* elem = vt->getElementType();
  llvm::Value* zero = llvm::Constant::getNullValue(vt);
  std::vector<llvm::Value*> parts;
  for (int64_t p = 0; p < stride; ++p) {
    llvm::Value* addr = p == 0 ? first : b_.CreateGEP(elem, first, b_.getInt64(p * lanes));
    llvm::Value* vptr = b_.CreateBitCast(addr, vt->getPointerTo());
    llvm::Value* part = nullptr;
    if (vec_->mask != nullptr) {
      // Element e of this vector belongs to lane e / stride when e % stride == 0; lane `lanes`
      // of the shuffle's operands is the false vector's.
      std::vector<int> owner;
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t e = p * lanes + l;
        owner.push_back(static_cast<int>(e % stride == 0 && e < span ? e / stride : lanes));
      }
      llvm::Value* reach = b_.CreateShuffleVector(
          vec_->mask, llvm::Constant::getNullValue(vec_->mask->getType()), owner);
      part = b_.CreateMaskedLoad(vt, vptr, align, reach, zero);
    } else if (p + 1 < stride) {
      part = b_.CreateAlignedLoad(vt, vptr, align);
    } else {
      std::vector<llvm::Constant*> reach;
      for (int64_t l = 0; l < lanes; ++l) reach.push_back(b_.getInt1(p * lanes + l < span));
      part = b_.CreateMaskedLoad(vt, vptr, align, llvm::ConstantVector::get(reach),
                                 llvm::PoisonValue::get(vt));
    }
    tag_access(part, buf);
    parts.push_back(part);
  }
  // Lane i is element i*stride: position (i*stride) % lanes of part (i*stride) / lanes. The
  // first shuffle takes parts 0 and 1, each later one keeps the lanes already placed and takes
  // part p's.
  auto pick = [&](int64_t p, bool from_result) {
    std::vector<int> mask(static_cast<size_t>(lanes), -1);
    for (int64_t i = 0; i < lanes; ++i) {
      const int64_t part = i * stride / lanes, pos = i * stride % lanes;
      if (from_result && part < p) mask[i] = static_cast<int>(i);
      if (!from_result && part == 0) mask[i] = static_cast<int>(pos);
      if (part == p) mask[i] = static_cast<int>(lanes + pos);
    }
    return mask;
  };
  llvm::Value* result = b_.CreateShuffleVector(parts[0], parts[1], pick(1, false));
  for (int64_t p = 2; p < stride; ++p) {
    result = b_.CreateShuffleVector(result, parts[p], pick(p, true));
  }
  return result;
}

void Emitter::emit_prefetch(const Stmt& s) {
  const ir::Buffer& buf = s->buffer;
  llvm::Type* st = storage_type(buf->dtype);
  begin_root();
  // Inside vector code the hint is for the first lane's element: lanes share its cache line.
  const Expr idx = vec_ != nullptr && is_varying(s->index) ? lane0_index(s->index) : s->index;
  // A plain (not inbounds) GEP: the hinted element may lie past the buffer, which is harmless
  // for a prefetch but must not let LLVM assume otherwise.
  llvm::Value* addr = b_.CreateGEP(st, buffer_ptr(buf), index_i64(emit_uniform(idx), idx->dtype));
  llvm::Value* ptr = b_.CreatePointerCast(addr, b_.getInt8PtrTy());
  // llvm.prefetch(addr, rw = read, locality, cache = data): locality 3 keeps the line in every
  // level (prefetcht0), 2 brings it into L2 (prefetcht1).
  const int locality = s->cache_level == 1 ? 3 : 2;
  b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr->getType()},
                     {ptr, b_.getInt32(0), b_.getInt32(locality), b_.getInt32(1)});
}

void Emitter::emit_store(const Stmt& s) {
  const ir::Buffer& buf = s->buffer;
  fn_->tile_columns.erase(buf.get());  // its transposed columns are stale from here on
  DType t = buf->dtype;
  llvm::Type* st = storage_type(t);
  llvm::Align align(st->getPrimitiveSizeInBits() / 8);
  begin_root();
  VVal val = emit(s->value);
  DType vt_dtype = s->value->dtype;
  if (vt_dtype != t) {
    // f32 registers go to f16/bf16 memory through to_storage's rounding; other pairs convert.
    bool narrow_float = ir::is_float(vt_dtype) && vt_dtype != DType::kFloat64 &&
                        (t == DType::kFloat16 || t == DType::kBFloat16);
    if (!narrow_float) val.v = cast_value(val.v, vt_dtype, t);
  }
  llvm::Value* base = buffer_ptr(buf);
  const Expr& idx = s->index;

  if (vec_ == nullptr || !is_varying(idx)) {
    llvm::Value* addr = address(st, base, index_i64(emit_uniform(idx), idx->dtype));
    if (vec_ == nullptr) {
      tag_access(b_.CreateAlignedStore(to_storage(val.v, t), addr, align), buf);
      return;
    }
    if (val.varying) {
      if (vec_->mask == nullptr) {
        // All lanes write the same element: the last lane's value is what sequential
        // iterations would leave behind.
        llvm::Value* last = b_.CreateExtractElement(val.v, vec_->lanes - 1);
        tag_access(b_.CreateAlignedStore(to_storage(last, t), addr, align), buf);
      } else {
        // Scatter writes lanes in order, so the last active lane wins.
        tag_access(b_.CreateMaskedScatter(to_storage(val.v, t), splat(addr), align, vec_->mask),
                   buf);
      }
      return;
    }
    if (vec_->mask == nullptr) {
      tag_access(b_.CreateAlignedStore(to_storage(val.v, t), addr, align), buf);
      return;
    }
    llvm::BasicBlock* merge = nullptr;
    begin_any_lane_guard(&merge);
    tag_access(b_.CreateAlignedStore(to_storage(val.v, t), addr, align), buf);
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    return;
  }

  auto* vt = llvm::FixedVectorType::get(st, static_cast<unsigned>(vec_->lanes));
  llvm::Value* data = to_storage(widen(val), t);
  auto stride = loop::lane_stride(idx, vec_->var, vec_->varying_defs);
  if (stride && *stride == 1) {
    Expr first = lane0_index(idx);
    llvm::Value* first_index = index_i64(emit_uniform(first), first->dtype);
    llvm::Value* addr = address(st, base, first_index);
    llvm::Value* vptr = b_.CreateBitCast(addr, vt->getPointerTo());
    if (vec_->mask && vector_in_stack_buffer(buf, first_index, vec_->lanes)) {
      llvm::Value* old = b_.CreateAlignedLoad(vt, vptr, align);
      tag_access(old, buf);
      tag_access(b_.CreateAlignedStore(b_.CreateSelect(vec_->mask, data, old), vptr, align), buf);
    } else if (vec_->mask) {
      tag_access(b_.CreateMaskedStore(data, vptr, align, vec_->mask), buf);
    } else {
      tag_access(b_.CreateAlignedStore(data, vptr, align), buf);
    }
    return;
  }
  llvm::Value* ptrs = b_.CreateGEP(st, base, index_i64(widen(emit(idx)), idx->dtype));
  tag_access(b_.CreateMaskedScatter(data, ptrs, align, vec_->mask ? vec_->mask : all_lanes_mask()),
             buf);
}

}  // namespace tessera::codegen::detail
