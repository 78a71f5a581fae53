#pragma once
// The operator library: tensor-expression definitions of every operator Tessera compiles.
// Each function builds compute ops on top of its input tensors (placeholders or other ops) and
// returns the output tensor; shapes may use symbolic size variables.
#include "ops/common.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/pool.h"
#include "ops/reduction.h"
#include "ops/shape.h"
