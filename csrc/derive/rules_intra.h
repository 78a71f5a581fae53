#pragma once
// EinNet's five intra-expression derivation rules (paper 4.1) on derivation states, and the
// layout separation its Longformer derivation needs.
//
// Every rule has an explicit form, which checks legality and rewrites one scope (nullopt when
// the application is illegal), and an enumerator, which returns every legal application in a
// state that the search should consider. Successor states compute the same outputs as the
// input state (reads outside a shape give pad_value, see state.h).
#include <optional>
#include <vector>

#include "derive/state.h"

namespace tessera::derive {

// Summation splitting: L_x sum_{s1,s2} f  =>  L_x sum_{s1} {L_{x,s1} sum_{s2} f}[x, s1].
// `outer` lists the positions (in reduce_axes) of s1; it must be a non-empty proper subset.
// Legal for any reduction (sum, max and min are associative and commutative) with constant
// extents.
std::optional<State> split_summation(const State& s, const ir::Tensor& scope,
                                     const std::vector<int>& outer);
std::vector<State> summation_splittings(const State& s);

// Variable substitution with the bijection inferred from an index: for an affine `index` over
// at least two traversal iterators of `scope`, Phi replaces traversal iterator `axis` (call it
// v) by t = index - min(index), the others staying. The new scope S' iterates t over the
// bounding box of the index (EinNet's [r, H+r) relaxed to a constant range, "the most strict
// plan"); reads at the index itself become reads at t + min(index), and where v is still used
// elsewhere it is recovered as v = Phi^-1(t), which needs v's coefficient to be +-1. When v
// appears only through the index, any non-zero coefficient is legal: Phi is injective and S'
// is defined on the whole box (e.g. a dilated band m + D*w becomes a dense j). The replaced
// scope is read as S'[Phi(x)]: consumers read S' at Phi of their indices when all their reads
// lie inside the replaced scope's shape; otherwise (and for outputs) a gather scope
// L_x S'[Phi(x)] replaces it, which traversal merging can fold later.
std::optional<State> substitute_variable(const State& s, const ir::Tensor& scope,
                                         const ir::Expr& index, int axis);
// Candidates: every affine index of an access in a scope body with >= 2 traversal iterators
// (its traversal part when summation iterators appear too), with every traversal iterator of
// it; and every split of a summation iterator that shares an index with a traversal iterator
// (a kernel offset) by each proper divisor of its extent.
std::vector<State> variable_substitutions(const State& s);

// Variable substitution on a summation iterator: r in [0, E) becomes (a, b) in
// [0, E / inner) x [0, inner) with r = a * inner + b, a bijection of the summation space, so
// legal for any reduction; `inner` must divide E with 1 < inner < E. (A relaxed 6-tap kernel
// offset becomes two 3-tap halves: conv5x5 -> conv6x6 -> four conv3x3.)
std::optional<State> split_summation_iterator(const State& s, const ir::Tensor& scope, int axis,
                                              int64_t inner);

// Traversal merging: inlines a reduction-free `producer` into `consumer` (Phi = the read's
// indices). Legal when every read of the producer in the consumer lies provably inside the
// producer's shape (Phi(X x Y) within Z), since outside it the read would give the pad value.
std::optional<State> merge_traversal(const State& s, const ir::Tensor& consumer,
                                     const ir::Tensor& producer);
std::vector<State> traversal_mergings(const State& s);

// Boundary relaxing: extends iterator `axis` (a summation iterator when `reduce_axis`) by
// `low` points below and `high` points above. A summation iterator may be extended when the
// reduction is a sum and the body is provably 0 on the new points; a traversal iterator when
// the scope is not an output and every read of it lies provably inside its current shape (the
// new points are computed but never read).
std::optional<State> relax_boundary(const State& s, const ir::Tensor& scope, bool reduce_axis,
                                    int axis, int64_t low, int64_t high);
// Candidates: summation iterators of odd extent, extended by DeriveConstants::kRelaxStep above.
std::vector<State> boundary_relaxings(const State& s);

// Boundary tightening: restricts iterator `axis` to [lo, hi] (inclusive, in its current
// coordinates, shifted to start at 0). The removed points must be provably 0: for a summation
// iterator of a sum, the body there; for a traversal iterator of a non-output scope with
// pad_value 0 and a sum or no reduction, the body there (reads of the removed points then give
// the pad value 0, which is what they held).
std::optional<State> tighten_boundary(const State& s, const ir::Tensor& scope, bool reduce_axis,
                                      int axis, int64_t lo, int64_t hi);
// Candidates: per iterator, the tightest range whose removed end points are provably 0.
std::vector<State> boundary_tightenings(const State& s);

// Layout separation of a dilated read (the eOperator side of variable substitution): a read
// T[.., m + D*u + c, ..] whose index is one traversal iterator m with coefficient 1 plus
// traversal terms sharing the factor D >= 2 reads rows D apart, so its vectors along u stride
// by D. Writing m + c = D*((m + r) // D + c // D) + (m + r) % D (r = c mod D), a layout eOperator
// L[others.., p, n] = T[.., D*(n + lo) + p, ..] (tag "relayout", p in [0, D), n over the box
// [lo, hi] of the quotient q = u + c // D + (m + r) // D, T's other dims first in their order)
// regroups T's rows by residue, and the read becomes L[others.., (m + r) % D, q - lo]:
// unit-stride in u, in memory too. L covers the read's whole box, so
// the read stays inside L, and L holds T's pad value where T would be read outside: always
// legal. `dim` is the index dimension of `read` (a read in `scope`'s body) to separate.
// With `split_unit`, the scope's iterator m itself is regrouped too (its extent a multiple of
// D): the rewritten scope S' iterates (q, p) in m's place with m = D*q + p, so that its loops can
// walk one residue's rows in order (the rows of L one tile reads stay few), and the scope
// becomes the reshape S[.., m, ..] = S'[.., m // D, m % D, ..] of it (no copy: stage planning
// writes S' through S's buffer, stage_plan.h).
std::optional<State> separate_dilated_read(const State& s, const ir::Tensor& scope,
                                           const ir::Expr& read, int dim, bool split_unit = false);
// Candidates: every dilated index dimension of every distinct read, with and without
// split_unit.
std::vector<State> dilated_read_layouts(const State& s);

// Every successor of `s` under the five rules and layout separation.
std::vector<State> intra_successors(const State& s);

}  // namespace tessera::derive
