#pragma once
// EinNet's form of a program written with explicit guards (tessera.op's where(...), which the
// frontend nests as one select per conjunct): select(c, t, 0) is t itself when c false means
// some factor read of t leaves its tensor, since in a derivation state such a read gives its
// pad value 0 and so makes the product 0 (state.h). The inverse of explicit_padding (choose.h),
// which puts the guards back before a program is compiled.
#include "derive/state.h"

namespace tessera::derive {

// Every select(c, t, 0) in a scope body whose condition c is a conjunction of comparisons each
// of which, written e >= 0, is the lower bound (idx >= 0) or the upper bound (n - 1 - idx >= 0)
// of an index dimension of a read of a 0-padded tensor that is a factor of t (through products,
// casts and negation), becomes t. Other selects stay. The trace is kept: this is the same
// program in another form, not a derivation step.
State implicit_padding(const State& s);

}  // namespace tessera::derive
