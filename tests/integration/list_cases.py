"""Print "module.Class" for every unittest.TestCase class in the given test files that has
tests of its own, one per line (a base class shared by a file's cases is not listed, its
subclasses are). meson.build uses it to register each class as its own test."""
import ast
import os
import sys

ROOTS = ("TestCase", "StackTest")

for path in sys.argv[1:]:
    mod = os.path.splitext(os.path.basename(path))[0]
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    cases = set()
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
        if bases & (set(ROOTS) | cases):
            cases.add(node.name)
            if any(isinstance(f, ast.FunctionDef) and f.name.startswith("test")
                   for f in node.body):
                print("%s.%s" % (mod, node.name))
