"""Checks bundles before they become versions: every .py file compiles, and the entrypoint defines a
top-level `handler` (def, async def, assignment or import). Long-lived: reads one request a line on
stdin, {entrypoint, files}, and answers one line on stdout, [{file, line?, column?, message}]."""
import ast
import json
import sys


def check(data):
    problems = []
    for path, code in data["files"].items():
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(code, filename=path)
            compile(tree, path, "exec")
        except SyntaxError as e:
            problems.append({"file": path, "line": e.lineno, "column": e.offset, "message": f"SyntaxError: {e.msg}"})
            continue
        except ValueError as e:  # e.g. source with NUL bytes
            problems.append({"file": path, "message": str(e)})
            continue
        if path == data["entrypoint"]:
            names = set()
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Assign):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names.add(node.target.id)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in node.names)
            if "handler" not in names:
                problems.append({"file": path, "message": "defines no top-level handler: add `def handler(input): ...`"})
    return problems


for line in sys.stdin:
    if not line.strip():
        continue
    try:
        answer = check(json.loads(line))
    except Exception as e:  # a malformed request: say so, keep serving
        answer = {"error": repr(e)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
