"""Print "module.Class" for every unittest.TestCase class in the given test files, one per
line. meson.build uses it to register each class as its own test."""
import ast
import os
import sys

for path in sys.argv[1:]:
    mod = os.path.splitext(os.path.basename(path))[0]
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", getattr(b, "attr", "")) in ("TestCase", "StackTest")
                for b in node.bases):
            print("%s.%s" % (mod, node.name))
