"""Constraint expressions: a small, safe subset of Python expressions over integers, parsed with
`ast` and evaluated here (never with `eval`)."""

import ast
import operator

from .messages import TuneError


_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_CMPOPS = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
_FUNCS = {"min": min, "max": max, "abs": abs}


class Expr:
    """A parsed constraint: Expr('a * b <= 1024').names, .evaluate({'a': 32, 'b': 8})."""

    def __init__(self, text):
        self.text = text
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as e:
            raise TuneError(f"constraint '{text}': syntax error: {e.msg}") from None
        self.names = set()
        self._check(tree.body)
        self.tree = tree.body

    def _check(self, node):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise TuneError(f"constraint '{self.text}': only numbers are allowed, not {node.value!r}")
        elif isinstance(node, ast.Name):
            self.names.add(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            self._check(node.operand)
        elif isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            self._check(node.left)
            for c in node.comparators:
                self._check(c)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                self._check(v)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _FUNCS and not node.keywords and node.args):
            for a in node.args:
                self._check(a)
        else:
            raise TuneError(f"constraint '{self.text}': unsupported syntax "
                            f"'{ast.unparse(node)}' (see expression_syntax in search_space.json)")

    def evaluate(self, env):
        return self._eval(self.tree, env)

    def _eval(self, node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise TuneError(f"constraint '{self.text}': unknown name '{node.id}'")
            return env[node.id]
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, env), self._eval(node.right, env)
            try:
                return _BINOPS[type(node.op)](left, right)
            except ZeroDivisionError:
                raise TuneError(f"constraint '{self.text}': division by zero at {env}") from None
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return not v
            return -v if isinstance(node.op, ast.USub) else +v
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators):
                right = self._eval(comp, env)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(self._eval(v, env) for v in node.values)
            return any(self._eval(v, env) for v in node.values)
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*[self._eval(a, env) for a in node.args])
        raise TuneError(f"constraint '{self.text}': cannot evaluate")  # unreachable after _check
