// The expression frontend of tessera.op: lexer, parser (precedence, reductions vs. functions),
// error columns, shape inference, and the tensor-expression definitions it builds. Definitions
// are checked twice: their reference-interpreter values against loops written here from the
// meaning of the expression (independent of the frontend), and the JIT-compiled kernel against
// the reference interpreter (check_graph).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "e2e_harness.h"
#include "frontend/expr_error.h"
#include "frontend/expr_lexer.h"
#include "frontend/expr_parser.h"
#include "frontend/expr_shapes.h"
#include "frontend/expr_to_te.h"
#include "ir/eval.h"
#include "ops/reference.h"
#include "schedule/stage_plan.h"

namespace tessera::testing {
namespace {

using frontend::ExpressionError;
using frontend::TokenKind;
using runtime::NDArray;
using Dims = std::vector<int64_t>;
using Shapes = std::map<std::string, Dims>;

// ---- lexer -----------------------------------------------------------------------------------

std::vector<TokenKind> kinds(const std::string& src) {
  std::vector<TokenKind> out;
  for (const auto& t : frontend::lex_expression(src)) out.push_back(t.kind);
  return out;
}

TEST(ExprLexer, TokensAndOffsets) {
  auto toks = frontend::lex_expression("C[i] = A[i, k+1] // 2");
  std::vector<TokenKind> want = {
      TokenKind::kIdent,    TokenKind::kLBracket,   TokenKind::kIdent,    TokenKind::kRBracket,
      TokenKind::kAssign,   TokenKind::kIdent,      TokenKind::kLBracket, TokenKind::kIdent,
      TokenKind::kComma,    TokenKind::kIdent,      TokenKind::kPlus,     TokenKind::kInt,
      TokenKind::kRBracket, TokenKind::kSlashSlash, TokenKind::kInt,      TokenKind::kEnd};
  ASSERT_EQ(toks.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(toks[i].kind, want[i]) << i;
  EXPECT_EQ(toks[9].text, "k");
  EXPECT_EQ(toks[9].offset, 12u);
  EXPECT_EQ(toks[13].offset, 17u);
  EXPECT_EQ(toks[15].offset, 21u);  // end of input
}

TEST(ExprLexer, Numbers) {
  auto toks = frontend::lex_expression("1 1.5 .5 2. 1e-3 3E+2 42");
  ASSERT_EQ(toks.size(), 8u);
  EXPECT_EQ(toks[0].kind, TokenKind::kInt);
  EXPECT_EQ(toks[0].int_value, 1);
  EXPECT_EQ(toks[1].kind, TokenKind::kFloat);
  EXPECT_DOUBLE_EQ(toks[1].float_value, 1.5);
  EXPECT_DOUBLE_EQ(toks[2].float_value, 0.5);
  EXPECT_EQ(toks[3].kind, TokenKind::kFloat);
  EXPECT_DOUBLE_EQ(toks[3].float_value, 2.0);
  EXPECT_DOUBLE_EQ(toks[4].float_value, 1e-3);
  EXPECT_DOUBLE_EQ(toks[5].float_value, 300.0);
  EXPECT_EQ(toks[6].kind, TokenKind::kInt);
  EXPECT_EQ(toks[6].int_value, 42);
}

TEST(ExprLexer, OperatorsAndKeywords) {
  EXPECT_EQ(kinds("< <= > >= == != = / // % and or not andy"),
            (std::vector<TokenKind>{TokenKind::kLT, TokenKind::kLE, TokenKind::kGT, TokenKind::kGE,
                                    TokenKind::kEQ, TokenKind::kNE, TokenKind::kAssign,
                                    TokenKind::kSlash, TokenKind::kSlashSlash, TokenKind::kPercent,
                                    TokenKind::kAnd, TokenKind::kOr, TokenKind::kNot,
                                    TokenKind::kIdent, TokenKind::kEnd}));
}

TEST(ExprLexer, NewlinesSeparateOnlyOutsideBrackets) {
  // Inside brackets a newline is whitespace; outside it ends a statement, like ';'.
  auto k = kinds("a[i,\n j] # comment\nb;c");
  EXPECT_EQ(k, (std::vector<TokenKind>{TokenKind::kIdent, TokenKind::kLBracket, TokenKind::kIdent,
                                       TokenKind::kComma, TokenKind::kIdent, TokenKind::kRBracket,
                                       TokenKind::kSeparator, TokenKind::kIdent,
                                       TokenKind::kSeparator, TokenKind::kIdent, TokenKind::kEnd}));
}

// ---- error helpers ---------------------------------------------------------------------------

// Runs `f`, expecting an ExpressionError at `column` whose message contains `needle`.
template <typename F>
void expect_error(F&& f, int column, const std::string& needle, const std::string& label) {
  try {
    f();
    ADD_FAILURE() << label << ": no error, expected one at column " << column << " (" << needle
                  << ")";
  } catch (const ExpressionError& e) {
    EXPECT_EQ(e.column(), column) << label << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << label << ": message lacks '" << needle << "': " << e.what();
  }
}

void expect_parse_error(const std::string& src, int column, const std::string& needle) {
  expect_error([&] { frontend::parse_expression(src); }, column, needle, src);
}

void expect_build_error(const std::string& src, const Shapes& shapes, int column,
                        const std::string& needle, const frontend::ExtentHints& hints = {},
                        const std::map<std::string, ir::DType>& dtypes = {}) {
  expect_error([&] { frontend::expression_to_te(src, shapes, dtypes, hints); }, column, needle,
               src);
}

// ---- parser ----------------------------------------------------------------------------------

std::string rhs(const std::string& src) {
  frontend::Program p = frontend::parse_expression(src);
  return frontend::ast_to_string(*p.output().rhs);
}

TEST(ExprParser, ArithmeticPrecedenceAndAssociativity) {
  EXPECT_EQ(rhs("C[i] = A[i] + B[i] * D[i]"), "(+ A[i] (* B[i] D[i]))");
  EXPECT_EQ(rhs("C[i] = (A[i] + B[i]) * D[i]"), "(* (+ A[i] B[i]) D[i])");
  EXPECT_EQ(rhs("C[i] = A[i] - B[i] - D[i]"), "(- (- A[i] B[i]) D[i])");
  EXPECT_EQ(rhs("C[i] = A[i] / B[i] * 2"), "(* (/ A[i] B[i]) 2)");
  EXPECT_EQ(rhs("C[i] = -A[i] * B[i]"), "(* (neg A[i]) B[i])");
  EXPECT_EQ(rhs("C[i] = A[i] - -1.5"), "(- A[i] (neg 1.5))");
  EXPECT_EQ(rhs("C[i] = +A[i]"), "A[i]");
  EXPECT_EQ(rhs("C[i] = A[i // 2 % 3 + 1]"), "A[(+ (% (// i 2) 3) 1)]");
  EXPECT_EQ(rhs("C[i] = A[i] * 2.0"), "(* A[i] 2.0)");
}

TEST(ExprParser, ComparisonsAndLogic) {
  EXPECT_EQ(rhs("C[i] = where(A[i] > 0 and A[i] < 1 or not B[i] == 2, A[i], 0.0)"),
            "where((or (and (> A[i] 0) (< A[i] 1)) (not (== B[i] 2))), A[i], 0.0)");
  EXPECT_EQ(rhs("C[i] = A[i] + 1 <= B[i] * 2"), "(<= (+ A[i] 1) (* B[i] 2))");
}

TEST(ExprParser, ReductionsBindLikeSigma) {
  // The body is the product that follows; '+' ends it.
  EXPECT_EQ(rhs("C[i, j] = sum(k) A[i, k] * B[k, j] + D[i, j]"),
            "(+ (sum [k] (* A[i, k] B[k, j])) D[i, j])");
  EXPECT_EQ(rhs("C[i, j] = sum(k) (A[i, k] + B[k, j])"), "(sum [k] (+ A[i, k] B[k, j]))");
  EXPECT_EQ(rhs("C[i] = 2 * sum(k) A[i, k] * B[k]"), "(* 2 (sum [k] (* A[i, k] B[k])))");
  EXPECT_EQ(rhs("C[i] = -sum(k, l) A[i, k, l]"), "(neg (sum [k, l] A[i, k, l]))");
  EXPECT_EQ(rhs("C[i, j] = relu(sum(k) A[i, k] * B[k, j])"), "relu((sum [k] (* A[i, k] B[k, j])))");
  EXPECT_EQ(rhs("C[i] = sum(k) A[i, k] * (max(j) B[k, j])"),
            "(sum [k] (* A[i, k] (max [j] B[k, j])))");
}

TEST(ExprParser, MaxMinAreReductionsOrFunctionsByWhatFollows) {
  EXPECT_EQ(rhs("C[i] = max(j) X[i, j]"), "(max [j] X[i, j])");
  EXPECT_EQ(rhs("C[i] = min(j) (X[i, j])"), "(min [j] X[i, j])");
  EXPECT_EQ(rhs("C[i] = max(j) -X[i, j]"), "(max [j] (neg X[i, j]))");
  EXPECT_EQ(rhs("C[i] = max(X[i], 0.0)"), "max(X[i], 0.0)");
  EXPECT_EQ(rhs("C[i] = max(X[i], 0.0) * 2"), "(* max(X[i], 0.0) 2)");
  EXPECT_EQ(rhs("C[i, j] = X[max(i, j) - 1]"), "X[(- max(i, j) 1)]");
  EXPECT_EQ(rhs("C[i] = min(X[i], Y[i])"), "min(X[i], Y[i])");
}

TEST(ExprParser, StatementsAndProgramFacts) {
  frontend::Program p = frontend::parse_expression(
      "\n  T[i] = max(j) X[i, j]   # row max\n\n"
      "  Y[i, j] = exp(X[i, j] - T[i]) * b[j];\n");
  ASSERT_EQ(p.statements.size(), 2u);
  EXPECT_EQ(p.output_name(), "Y");
  EXPECT_EQ(p.inputs, (std::vector<std::string>{"X", "b"}));
  EXPECT_EQ(p.ndim.at("T"), 1);
  EXPECT_EQ(p.ndim.at("X"), 2);
  EXPECT_EQ(p.defined_by.at("T"), 0);
  EXPECT_EQ(frontend::statement_to_string(p.statements[0]), "T[i] = (max [j] X[i, j])");
  // Inputs in order of first appearance; one statement may span lines inside brackets.
  frontend::Program q = frontend::parse_expression("O[i] = B[i] * (A[i] +\n  B[i]); ");
  EXPECT_EQ(q.inputs, (std::vector<std::string>{"B", "A"}));
  frontend::Program s = frontend::parse_expression("S[] = sum(i) X[i]");
  EXPECT_TRUE(s.output().indices.empty());
}

// ---- error columns ---------------------------------------------------------------------------

TEST(ExprErrors, MessageShowsLineAndCaret) {
  try {
    frontend::parse_expression("C[i] = A[i] +");
    FAIL() << "no error";
  } catch (const ExpressionError& e) {
    EXPECT_EQ(std::string(e.what()),
              "expression error at column 14: expected an operand (a tensor access, an iterator, "
              "a number, a function or a reduction), got end of input\n"
              "  C[i] = A[i] +\n"
              "               ^");
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), 14);
  }
  // Multi-line sources name the line and show only that line.
  try {
    frontend::parse_expression("T[i] = A[i]\nC[i] = T[i] + B[k]");
    FAIL() << "no error";
  } catch (const ExpressionError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.column(), 17);
    std::string what = e.what();
    EXPECT_EQ(what.rfind("expression error at line 2, column 17: iterator k is not bound", 0), 0u)
        << what;
    EXPECT_NE(what.find("\n  C[i] = T[i] + B[k]\n                  ^"), std::string::npos) << what;
  }
}

// Hostile nesting is refused with a clear error instead of overflowing the stack: the parser's
// recursion and the trees it builds (which every later pass walks recursively) are bounded.
TEST(ExprErrors, DeepNestingIsAClearError) {
  auto expect_too_deep = [](const std::string& src, const std::string& what) {
    try {
      frontend::parse_expression(src);
      ADD_FAILURE() << what << ": no error";
    } catch (const ExpressionError& e) {
      EXPECT_NE(std::string(e.what()).find("nests deeper than 256 levels"), std::string::npos)
          << what << ": " << e.what();
    }
  };
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  expect_too_deep("C[i] = " + repeat("(", 10000) + "A[i]" + repeat(")", 10000), "parentheses");
  expect_too_deep("C[i] = " + repeat("-", 20000) + "A[i]", "unary minus");
  expect_too_deep("C[i] = " + repeat("not ", 20000) + "A[i] > 0", "not");
  expect_too_deep("C[i] = A[i]" + repeat(" + A[i]", 10000), "a flat sum of 10000 terms");
  expect_too_deep("C[i] = " + repeat("exp(", 5000) + "A[i]" + repeat(")", 5000), "calls");
  expect_too_deep("C[] = " + repeat("sum(i) ", 300) + "A[i]", "reductions");
  // Within the limit everything still parses.
  frontend::parse_expression("C[i] = " + repeat("(", 200) + "A[i]" + repeat(")", 200));
  frontend::parse_expression("C[i] = A[i]" + repeat(" + A[i]", 200));
  frontend::parse_expression("C[i] = " + repeat("-", 200) + "A[i]");
}

TEST(ExprErrors, SyntaxErrorColumns) {
  struct Case {
    const char* src;
    int column;
    const char* needle;
  };
  const Case cases[] = {
      {"", 1, "empty expression"},
      {"  ;  ", 1, "empty expression"},
      {"C[i] = ", 8, "expected an operand"},
      {"C[i] = A[i] $ B[i]", 13, "unexpected character '$'"},
      {"C[i = A[i]", 2, "'[' is never closed"},
      {"C[i] = A[i))", 11, "')' closes the '['"},
      {"C[i] = A[i]]", 12, "unmatched ']'"},
      {"C[i + 1] = A[i]", 5, "must be iterator names"},
      {"C = A[i]", 3, "expected '[' after C"},
      {"C[i] == A[i]", 6, "expected '='"},
      {"[i] = A[i]", 1, "name of the tensor being defined"},
      {"C[i] = foo(A[i])", 8, "unknown function 'foo'"},
      {"C[i] = exp(A[i], 1)", 8, "exp takes 1 argument, got 2"},
      {"C[i] = pow(A[i])", 8, "pow takes 2 arguments, got 1"},
      {"C[i] = max(A[i])", 8, "(to reduce, follow the iterators"},
      {"C[i] = where(A[i] > 0, A[i])", 8, "where takes 3 arguments"},
      {"C[i] = sum(k)", 14, "needs the expression to reduce"},
      {"C[i] = sum(k) * A[i, k]", 15, "needs the expression to reduce"},
      {"C[i] = sum() A[i]", 8, "needs the iterators"},
      {"C[i] = sum(A[i, k]) A[i, k]", 12, "the parentheses of sum(...) list the iterators"},
      {"C[i] = sum(k, k) A[i, k]", 15, "listed twice"},
      {"C[i] = A[i] < B[i] < 1", 20, "cannot be chained"},
      {"C[i] = A[i] ** 2", 13, "'**' is not supported"},
      {"C[i] = A[i] 2", 13, "expected ';' or a new line"},
      {"C[i] = 2i", 9, "after a number"},
      {"C[i] = 1e+ * A[i]", 9, "malformed exponent"},
      {"C[i] = A[i] ! B[i]", 13, "use 'not'"},
      {"C[i] = A[i] * not B[i]", 15, "'not' applies to a whole comparison"},
      {"C[i] = A[i, ]", 13, "expected an operand"},
      {"C[i] = (A[i] + 1", 8, "'(' is never closed"},
      {"C[i] = A[i]; D[j] = C[j] +", 27, "expected an operand"},
  };
  for (const Case& c : cases) expect_parse_error(c.src, c.column, c.needle);
}

TEST(ExprErrors, SemanticErrorColumns) {
  struct Case {
    const char* src;
    int column;
    const char* needle;
  };
  const Case cases[] = {
      {"C[i] = A[k]", 10, "iterator k is not bound"},
      {"C[i] = A[i] * j", 15, "iterator j is not bound"},
      {"C[i] = A[i] + A", 15, "A is a tensor; read it with indices"},
      {"C[i] = A[i, 1.5]", 13, "is not an integer"},
      {"C[i] = A[B[i]]", 10, "data-dependent indexing"},
      {"C[i] = A[i / 2]", 12, "use '//' for integer division"},
      {"C[i] = A[exp(i)]", 10, "exp() cannot be used in an index"},
      {"C[i] = A[i < 2]", 12, "'<' cannot be used in an index"},
      {"C[i] = A[sum(k) k]", 10, "a reduction cannot be used as an index"},
      {"C[i, i] = A[i]", 6, "index i appears twice"},
      {"C[i] = A[i] + A[i, 0]", 15, "A is read with 2 indices here but is read with 1 at column 8"},
      {"C[i] = C[i] + 1", 8, "C cannot read itself"},
      {"C[i] = sum(i) A[i]", 12, "iterator i is already bound at column 3"},
      {"C[i] = sum(k) A[i, k] * (sum(k) B[k])", 30, "iterator k is already bound"},
      {"C[i] = sum(k) A[i, k] / sum(k) B[i, k]", 29, "end the enclosing reduction's body"},
      {"T[i] = A[i]; C[i] = A[i]", 1, "T is defined but never read"},
      {"C[i] = A[i]; C[i] = A[i] + 1", 14, "C is defined twice (first at column 1)"},
      {"C[i] = T[i]; T[i] = A[i]", 14, "T is read at column 8 before this statement defines it"},
      {"T[i] = A[i]; C[i] = T[i, 0]", 21, "T is read with 2 indices here but is defined with 1"},
  };
  for (const Case& c : cases) expect_parse_error(c.src, c.column, c.needle);
}

TEST(ExprErrors, ShapeAndTypeErrorColumns) {
  const std::string gemm = "C[i, j] = sum(k) A[i, k] * B[k, j]";
  expect_build_error(
      gemm, {{"A", {4, 5}}, {"B", {6, 7}}}, 30,
      "iterator k has extent 6 here (dim 0 of B at column 30) but 5 from dim 1 of A at column 23");
  expect_build_error(gemm, {{"A", {4, 5, 1}}, {"B", {5, 7}}}, 18,
                     "A is read with 2 indices but the given tensor has 3 dims");
  expect_build_error(gemm, {{"A", {4, 5}}}, 28, "no shape was given for the input B");
  expect_build_error("C[i, j] = A[i]", {{"A", {4}}}, 6, "iterator j appears only in the output");
  expect_build_error("C[i] = sum(k) A[i, i * k]", {{"A", {4, 4}}}, 12,
                     "cannot infer the extent of iterator k");
  expect_build_error("C[i] = A[i] + A[i + 1]", {{"A", {5}}}, 17,
                     "ranges over [1, 5] but dim 0 of A has size 5");
  // A read that can leave its tensor needs a where(...) whose condition bounds that index.
  expect_build_error("C[i] = where(i >= 0, A[i - 1], 0.0)", {{"A", {5}}}, 24,
                     "read it under a where(...) whose condition keeps this index in [0, 5)");
  expect_build_error("C[i] = where(i - 1 < 5, A[i - 1], 0.0)", {{"A", {5}}}, 27,
                     "ranges over [-1, 4] but dim 0 of A has size 5");
  expect_build_error("C[i] = where(i < 1, 0.0, A[i - 1])", {{"A", {5}}}, 28, "or clamp the index");
  expect_build_error("C[i] = where(i > 0 or i > 2, A[i - 1], 0.0)", {{"A", {5}}}, 32,
                     "or clamp the index");
  // i + 1 < 5.5 lets the index reach 5: only integer comparisons bound an index.
  frontend::ExtentHints i5;
  i5.iterators["i"] = 5;
  expect_build_error("C[i] = where(i + 1 < 5.5, A[i + 1], 0.0)", {{"A", {5}}}, 29,
                     "or clamp the index", i5);
  expect_build_error("O[y] = sum(r) I[y + r] * W[r]", {{"I", {2}}, {"W", {3}}}, 3,
                     "iterator y gets extent 0");
  expect_build_error("C[i] = (A[i] > 0) * A[i]", {{"A", {4}}}, 19,
                     "a comparison cannot be used in arithmetic");
  expect_build_error("C[i] = where(A[i], 1.0, 0.0)", {{"A", {4}}}, 14,
                     "the condition of where(...) must be a comparison");
  expect_build_error("C[i] = A[i] > 0 and A[i]", {{"A", {4}}}, 17,
                     "'and' needs comparisons on both sides");
  expect_build_error("C[i] = sum(k) (A[i, k] > 0)", {{"A", {4, 3}}}, 8, "cannot sum a comparison");
  expect_build_error("C[i] = A[i] + A[i // 0]", {{"A", {4}}}, 19,
                     "the divisor of this '//' can be zero");
  expect_build_error("C[i] = A[i] // 0", {{"A", {4}}}, 13, "division by zero", {},
                     {{"A", ir::DType::kInt64}});
  // Explicit extents that contradict the inputs.
  frontend::ExtentHints h;
  h.iterators["k"] = 3;
  expect_build_error(
      gemm, {{"A", {4, 5}}, {"B", {5, 7}}}, 23,
      "iterator k has extent 5 here (dim 1 of A at column 23) but 3 from shapes={'k': ...}", h);
  // Hints naming nothing have no column.
  frontend::ExtentHints bad;
  bad.iterators["q"] = 3;
  expect_error(
      [&] {
        frontend::expression_to_te(gemm, {{"A", {4, 5}}, {"B", {5, 7}}}, {}, bad);
      },
      0, "shapes: q is not an iterator", "hint q");
}

// ---- definitions vs. independent loops and vs. the JIT --------------------------------------

// Array of `shape` whose element at each index is f(index).
NDArray tabulate(const Dims& shape, const std::function<double(const Dims&)>& f) {
  NDArray out(ir::DType::kFloat64, shape);
  int64_t n = out.numel();
  for (int64_t flat = 0; flat < n; ++flat) {
    Dims idx(shape.size());
    int64_t rest = flat;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    out.set(flat, f(idx));
  }
  return out;
}

struct Built {
  frontend::TeProgram te;
  std::vector<NDArray> inputs;  // random, one per program input
  NDArray reference;            // the reference interpreter's value of the output
};

// Builds `src` for `shapes`, runs the reference interpreter on random inputs and checks the
// JIT kernel (default schedule) against it.
Built build_and_check(const std::string& src, const Shapes& shapes,
                      const frontend::ExtentHints& hints = {},
                      const std::map<std::string, ir::DType>& dtypes = {}) {
  Built b;
  b.te = frontend::expression_to_te(src, shapes, dtypes, hints);
  std::map<const ir::TensorNode*, NDArray> in;
  for (size_t i = 0; i < b.te.inputs.size(); ++i) {
    const ir::Tensor& t = b.te.inputs[i];
    b.inputs.push_back(NDArray::random(t->dtype, shapes.at(t->name), 11 + i, -2.0, 2.0));
    in[t.get()] = b.inputs.back();
  }
  b.reference = ops::run_reference({b.te.output}, in)[0];
  check_graph({{b.te.output}, b.te.inputs, {}}, std::nullopt, /*use_jit=*/true);
  return b;
}

void expect_matches(const NDArray& got, const NDArray& want, const std::string& label) {
  runtime::CompareResult r = runtime::allclose(got, want, 1e-5, 1e-5);
  EXPECT_TRUE(r.ok) << label << ": " << r.message;
}

TEST(ExprToTe, Gemm) {
  Built b =
      build_and_check("C[i, j] = sum(k) A[i, k] * B[k, j]", {{"A", {13, 21}}, {"B", {21, 9}}});
  const NDArray &a = b.inputs[0], &bb = b.inputs[1];
  NDArray want = tabulate({13, 9}, [&](const Dims& ix) {
    double s = 0;
    for (int64_t k = 0; k < 21; ++k) s += a.at({ix[0], k}) * bb.at({k, ix[1]});
    return s;
  });
  expect_matches(b.reference, want, "gemm");
  EXPECT_EQ(b.te.output->op->reduce, ir::ReduceKind::kSum);
  EXPECT_EQ(b.te.output->name, "C");
}

TEST(ExprToTe, GemmReluIsReductionPlusFusedEpilogue) {
  Built b = build_and_check("C[i, j] = relu(sum(k) A[i, k] * B[k, j])",
                            {{"A", {17, 32}}, {"B", {32, 24}}});
  const NDArray &a = b.inputs[0], &bb = b.inputs[1];
  NDArray want = tabulate({17, 24}, [&](const Dims& ix) {
    double s = 0;
    for (int64_t k = 0; k < 32; ++k) s += a.at({ix[0], k}) * bb.at({k, ix[1]});
    return std::max(s, 0.0);
  });
  expect_matches(b.reference, want, "gemm+relu");
  EXPECT_EQ(b.te.output->op->reduce, ir::ReduceKind::kNone);
  schedule::StagePlan plan = schedule::plan_stages({b.te.output}, b.te.inputs);
  ASSERT_EQ(plan.stages.size(), 1u);
  ASSERT_TRUE(plan.stages[0].epilogue != nullptr);
  EXPECT_EQ(plan.stages[0].op->name, "C_sum");
}

TEST(ExprToTe, GemmWithBiasAddsBiasOnce) {
  Built b = build_and_check("C[i, j] = sum(k) A[i, k] * B[k, j] + bias[j]",
                            {{"A", {5, 7}}, {"B", {7, 6}}, {"bias", {6}}});
  NDArray want = tabulate({5, 6}, [&](const Dims& ix) {
    double s = b.inputs[2].at({ix[1]});
    for (int64_t k = 0; k < 7; ++k) s += b.inputs[0].at({ix[0], k}) * b.inputs[1].at({k, ix[1]});
    return s;
  });
  expect_matches(b.reference, want, "gemm+bias");
}

TEST(ExprToTe, SoftmaxInStatements) {
  const Shapes shapes = {{"X", {6, 37}}};
  // The design's two-statement form (exp(x - rowmax)) ...
  Built e = build_and_check("T[i] = max(j) X[i, j]; Y[i, j] = exp(X[i, j] - T[i])", shapes);
  const NDArray& x = e.inputs[0];
  auto row_max = [&](int64_t i) {
    double m = -INFINITY;
    for (int64_t j = 0; j < 37; ++j) m = std::max(m, x.at({i, j}));
    return m;
  };
  NDArray want_e =
      tabulate({6, 37}, [&](const Dims& ix) { return std::exp(x.at(ix) - row_max(ix[0])); });
  expect_matches(e.reference, want_e, "exp(x - max)");
  // ... and the full softmax, statements on separate lines.
  Built s = build_and_check(
      "M[i] = max(j) X[i, j]\n"
      "E[i, j] = exp(X[i, j] - M[i])\n"
      "Y[i, j] = E[i, j] / sum(k) E[i, k]\n",
      shapes);
  NDArray want = tabulate({6, 37}, [&](const Dims& ix) {
    double z = 0;
    for (int64_t j = 0; j < 37; ++j) z += std::exp(x.at({ix[0], j}) - row_max(ix[0]));
    return std::exp(x.at(ix) - row_max(ix[0])) / z;
  });
  expect_matches(s.reference, want, "softmax");
}

TEST(ExprToTe, ConvLikeIndexArithmeticInfersValidExtents) {
  const std::string src = "O[n, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[c, r, s]";
  Built b = build_and_check(src, {{"I", {2, 3, 10, 9}}, {"W", {3, 3, 2}}});
  ASSERT_EQ(b.te.output->shape.size(), 3u);
  EXPECT_EQ(b.te.output->shape[1]->int_value, 8);  // 10 - 3 + 1
  EXPECT_EQ(b.te.output->shape[2]->int_value, 8);  // 9 - 2 + 1
  const NDArray &in = b.inputs[0], &w = b.inputs[1];
  NDArray want = tabulate({2, 8, 8}, [&](const Dims& ix) {
    double acc = 0;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t s = 0; s < 2; ++s)
          acc += in.at({ix[0], c, ix[1] + r, ix[2] + s}) * w.at({c, r, s});
    return acc;
  });
  expect_matches(b.reference, want, "conv");
  // Strided taps: 2 * y + r keeps every read in bounds: y < (10 - 1 - 2) / 2 + 1 = 4.
  Built st = build_and_check("O[y] = sum(r) I[2 * y + r] * W[r]", {{"I", {10}}, {"W", {3}}});
  EXPECT_EQ(st.te.output->shape[0]->int_value, 4);
}

TEST(ExprToTe, TransposesAndBroadcastingByIndexReuse) {
  Built t = build_and_check("Y[j, i] = X[i, j]", {{"X", {5, 7}}});
  expect_matches(t.reference,
                 tabulate({7, 5},
                          [&](const Dims& ix) {
                            return t.inputs[0].at({ix[1], ix[0]});
                          }),
                 "transpose");
  Built bt = build_and_check("C[i, j] = sum(k) A[k, i] * B[j, k]", {{"A", {6, 4}}, {"B", {3, 6}}});
  expect_matches(bt.reference,
                 tabulate({4, 3},
                          [&](const Dims& ix) {
                            double s = 0;
                            for (int64_t k = 0; k < 6; ++k)
                              s += bt.inputs[0].at({k, ix[0]}) * bt.inputs[1].at({ix[1], k});
                            return s;
                          }),
                 "A^T B^T");
  Built bc =
      build_and_check("Y[i, j] = X[i, j] + b[j] * a[i]", {{"X", {4, 6}}, {"b", {6}}, {"a", {4}}});
  expect_matches(bc.reference,
                 tabulate({4, 6},
                          [&](const Dims& ix) {
                            return bc.inputs[0].at(ix) +
                                   bc.inputs[1].at({ix[1]}) * bc.inputs[2].at({ix[0]});
                          }),
                 "broadcast");
  // The diagonal: one iterator used twice in the same access.
  Built d = build_and_check("D[i] = X[i, i] * 2", {{"X", {5, 5}}});
  expect_matches(d.reference,
                 tabulate({5},
                          [&](const Dims& ix) {
                            return 2 * d.inputs[0].at({ix[0], ix[0]});
                          }),
                 "diagonal");
}

TEST(ExprToTe, ElementwiseFunctionsWhereAndIterators) {
  Built b = build_and_check(
      "Y[i, j] = where(X[i, j] > 0.5 and j % 2 == 0, gelu(X[i, j]), "
      "sigmoid(X[i, j]) * tanh(X[i, j]) + abs(X[i, j]) + pow(abs(X[i, j]), 1.5) - i / 4)",
      {{"X", {5, 8}}});
  const NDArray& x = b.inputs[0];
  NDArray want = tabulate({5, 8}, [&](const Dims& ix) {
    double v = x.at(ix);
    if (v > 0.5 && ix[1] % 2 == 0) return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    return 1 / (1 + std::exp(-v)) * std::tanh(v) + std::fabs(v) + std::pow(std::fabs(v), 1.5) -
           ix[0] / 4.0;
  });
  expect_matches(b.reference, want, "functions");
  Built r = build_and_check("Y[i] = rsqrt(exp(X[i]) + 1) + log(sqrt(abs(X[i]) + 1)) + erf(X[i])",
                            {{"X", {9}}});
  expect_matches(r.reference,
                 tabulate({9},
                          [&](const Dims& ix) {
                            double v = r.inputs[0].at(ix);
                            return 1 / std::sqrt(std::exp(v) + 1) +
                                   std::log(std::sqrt(std::fabs(v) + 1)) + std::erf(v);
                          }),
                 "more functions");
}

// `src` computes Y[i] = X[i - 1] for 0 < i < 7 and 0 at i = 0 (X of 7 elements, i given 7).
void expect_zero_filled_shift(const std::string& src, const std::string& what) {
  frontend::ExtentHints n7;
  n7.iterators["i"] = 7;
  Built s = build_and_check(src, {{"X", {7}}}, n7);
  expect_matches(
      s.reference,
      tabulate({7}, [&](const Dims& ix) { return ix[0] > 0 ? s.inputs[0].at({ix[0] - 1}) : 0.0; }),
      what);
}

TEST(ExprToTe, ClampedShiftAndModularIndices) {
  // A clamped index does not determine its iterator's extent: it is given.
  expect_build_error("Y[i] = where(i > 0, X[max(i - 1, 0)], 0.0)", {{"X", {7}}}, 14,
                     "cannot infer the extent of iterator i");
  expect_zero_filled_shift("Y[i] = where(i > 0, X[max(i - 1, 0)], 0.0)", "clamped shift");
  frontend::ExtentHints h;
  h.tensors["Y"] = {6, 6};
  Built m = build_and_check("Y[i, j] = X[i // 2, j % 3]", {{"X", {3, 3}}}, h);
  expect_matches(m.reference,
                 tabulate({6, 6},
                          [&](const Dims& ix) {
                            return m.inputs[0].at({ix[0] / 2, ix[1] % 3});
                          }),
                 "div/mod indices");
}

// A read guarded by its where's condition may leave its tensor where the condition is false:
// the generated code reads a where's branch only where the condition holds (masked vector lanes).
TEST(ExprToTe, GuardedReadsLeaveTheirTensorOnlyWhereTheGuardIsFalse) {
  expect_zero_filled_shift("Y[i] = where(i > 0, X[i - 1], 0.0)", "guarded shift");
  // A "same" 1-D convolution along rows, zero outside: both ends guarded on the index itself.
  frontend::ExtentHints h;
  h.iterators["i"] = 19;
  h.iterators["k"] = 3;
  Built c = build_and_check(
      "Y[i, j] = sum(k) where(i + k - 1 >= 0 and i + k - 1 < 19, X[i + k - 1, j], 0.0) * W[k]",
      {{"X", {19, 33}}, {"W", {3}}}, h);
  expect_matches(c.reference,
                 tabulate({19, 33},
                          [&](const Dims& ix) {
                            double acc = 0;
                            for (int64_t k = 0; k < 3; ++k) {
                              const int64_t r = ix[0] + k - 1;
                              if (r >= 0 && r < 19) {
                                acc += c.inputs[0].at({r, ix[1]}) * c.inputs[1].at({k});
                              }
                            }
                            return acc;
                          }),
                 "guarded same convolution");
}

TEST(ExprToTe, NestedReductionsAndScalars) {
  Built n =
      build_and_check("Y[i] = sum(k) A[i, k] * (max(j) B[k, j])", {{"A", {4, 5}}, {"B", {5, 3}}});
  expect_matches(n.reference,
                 tabulate({4},
                          [&](const Dims& ix) {
                            double s = 0;
                            for (int64_t k = 0; k < 5; ++k) {
                              double m = -INFINITY;
                              for (int64_t j = 0; j < 3; ++j)
                                m = std::max(m, n.inputs[1].at({k, j}));
                              s += n.inputs[0].at({ix[0], k}) * m;
                            }
                            return s;
                          }),
                 "nested");
  // The inner max depends on k only: it becomes its own 1-d op.
  EXPECT_EQ(n.te.output->op->reduce, ir::ReduceKind::kSum);
  Built s = build_and_check("S[] = min(i, j) X[i, j] - 1", {{"X", {3, 4}}});
  EXPECT_TRUE(s.te.output->shape.empty());
  double m = INFINITY;
  for (int64_t f = 0; f < 12; ++f) m = std::min(m, s.inputs[0].get(f));
  EXPECT_NEAR(s.reference.get(0), m - 1, 1e-6);
}

TEST(ExprToTe, ExplicitExtentsAndTypes) {
  frontend::ExtentHints h;
  h.iterators["j"] = 3;
  Built b = build_and_check("Y[i, j] = X[i] + j", {{"X", {4}}}, h);
  expect_matches(b.reference,
                 tabulate({4, 3}, [&](const Dims& ix) { return b.inputs[0].at({ix[0]}) + ix[1]; }),
                 "hint");
  // Integer inputs: floor division and modulo stay integers, '/' is float32 division.
  Built i =
      build_and_check("Y[i] = X[i] // 3 + X[i] % 3", {{"X", {6}}}, {}, {{"X", ir::DType::kInt64}});
  EXPECT_EQ(i.te.output->dtype, ir::DType::kInt64);
  Built f = build_and_check("Y[i] = X[i] / 2", {{"X", {6}}}, {}, {{"X", ir::DType::kInt32}});
  EXPECT_EQ(f.te.output->dtype, ir::DType::kFloat32);
  // float32 with float64 promotes to float64.
  Built w = build_and_check("Y[i] = X[i] + Z[i]", {{"X", {3}}, {"Z", {3}}}, {},
                            {{"Z", ir::DType::kFloat64}});
  EXPECT_EQ(w.te.output->dtype, ir::DType::kFloat64);
}

TEST(ExprShapes, SymbolicSizesGiveFormulas) {
  frontend::Program p =
      frontend::parse_expression("O[n, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[c, r, s]");
  ir::Var h = ir::size_var("H", 1), w = ir::size_var("Wd", 1), r = ir::size_var("R", 1);
  ir::Var n = ir::size_var("N", 1), c = ir::size_var("C", 1), s = ir::size_var("S", 1);
  frontend::ProgramShapes ps = frontend::infer_shapes(p, {{"I", {n, c, h, w}}, {"W", {c, r, s}}});
  const auto& out = ps.shapes.at("O");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].same_as(n));
  ir::EvalEnv env;
  env.vars[h.get()] = ir::Scalar::of_int(10);
  env.vars[r.get()] = ir::Scalar::of_int(3);
  env.vars[w.get()] = ir::Scalar::of_int(9);
  env.vars[s.get()] = ir::Scalar::of_int(2);
  EXPECT_EQ(ir::evaluate(out[1], env).i, 8);
  EXPECT_EQ(ir::evaluate(out[2], env).i, 8);
  // Concrete shapes: the same through expression_output_shape.
  EXPECT_EQ(frontend::expression_output_shape(p, {{"I", {2, 3, 10, 9}}, {"W", {3, 3, 2}}}),
            (Dims{2, 8, 8}));
}

}  // namespace
}  // namespace tessera::testing
