"""One composition root: ``compose.py`` alone builds the Optimizer for the CLI, the API and the
bench; bench code imports neither api nor the CLI, and ray only lazily; options are typed."""

import ast
import dataclasses
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tritonforge"


def _imports(path):
    tree = ast.parse(path.read_text())
    top, anywhere = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            name = "." * node.level + (node.module or "")
        elif isinstance(node, ast.Import):
            name = node.names[0].name
        else:
            continue
        anywhere.add(name)
        if node in tree.body:
            top.add(name)
    return top, anywhere


def test_bench_imports_neither_api_nor_cli_and_ray_only_lazily():
    for path in sorted((SRC / "bench").glob("*.py")):
        top, anywhere = _imports(path)
        assert not any(n.endswith(("api", "cli")) and n.startswith("..") for n in anywhere), path
        assert "ray" not in top and "libcst" not in top and "rich" not in top, path


def test_only_the_composition_root_builds_an_optimizer():
    builders = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Optimizer":
                builders.append(path.relative_to(SRC).as_posix())
    assert builders == ["compose.py"]


def test_bench_options_are_frozen_dataclasses_built_by_the_cli():
    from tritonforge.bench import options
    from tritonforge.cli import _bench_options, build_parser

    args = build_parser().parse_args(["bench", "optimize", "--names", "a, b", "--gpus", "0,1",
                                      "--redo", "a", "--executor", "ray", "--budget", "30"])
    opts = _bench_options(args)
    assert isinstance(opts, options.PassOptions)
    assert (opts.names, opts.gpus, opts.redo, opts.executor, opts.budget_s) == \
        (("a", "b"), ("0", "1"), ("a",), "ray", 30.0)
    assert dataclasses.is_dataclass(opts) and opts.__dataclass_params__.frozen
