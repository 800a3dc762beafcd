"""The source generated cases run on: the module plus the test section's imports it lacks."""

from tritonforge.testgen.generate import module_source


def test_section_imports_the_module_lacks_are_added(tmp_path):
    module = tmp_path / "k.py"
    section = tmp_path / "test_section.py"
    module.write_text("import torch\n\ndef f(x):\n    return math.sqrt(x)\n")
    section.write_text("import torch\nimport math\nfrom functools import partial\n\nf(4.0)\n")
    source, added = module_source(module, section)
    assert added == ["import math", "from functools import partial"]
    assert source.startswith(module.read_text().rstrip("\n"))
    assert source.count("import torch") == 1 and source.rstrip().endswith("from functools import partial")
    namespace: dict = {}
    exec(compile(source, "k", "exec"), namespace)
    assert namespace["f"](9.0) == 3.0


def test_no_section_means_the_module_as_written(tmp_path):
    module = tmp_path / "k.py"
    module.write_text("x = 1\n")
    assert module_source(module) == ("x = 1\n", [])
