"""A run keeps one copy of each input nobody wrote (verify.runner._kept), and what the verifier
keeps between checks is only what it reads again: a KV-cache copy's 4 GiB of arguments a call
put its verification out of an H100's memory when every run cloned every argument twice."""

from __future__ import annotations

import gc
import types

import torch

from standin import T, build, spec_case
from tritonforge.verify import VerifyOptions, verify
from tritonforge.verify.differential import _written_part
from tritonforge.verify.runner import Run, run_variant


def _module(fn) -> types.ModuleType:
    m = types.ModuleType("variant")
    m.f = fn
    return m


def _add_into(x, out):
    out.copy_(x + 1)


CASE = spec_case("c", "f", T(256), T(256, init="zeros"))


def test_a_reference_run_shares_what_it_only_read_and_clones_what_it_wrote():
    run = run_variant(_module(_add_into), CASE, 0, build, "cpu", keep_pristine=True)
    assert run.args["arg[0]"] is run.pristine["arg[0]"]            # read only: one copy
    assert run.args["arg[1]"] is not run.pristine["arg[1]"]        # written: its own clone
    assert torch.equal(run.args["arg[1]"], run.pristine["arg[0]"] + 1)


def test_a_candidate_run_shares_the_imposed_inputs_it_left_alone_and_not_those_it_wrote():
    ref = run_variant(_module(_add_into), CASE, 0, build, "cpu", keep_pristine=True)

    def scribbles(x, out):
        out.copy_(x + 1)
        x.zero_()                                                   # writes its input

    honest = run_variant(_module(_add_into), CASE, 0, build, "cpu", inputs=ref.pristine)
    assert honest.args["arg[0]"] is ref.pristine["arg[0]"]
    bad = run_variant(_module(scribbles), CASE, 0, build, "cpu", inputs=ref.pristine)
    assert bad.args["arg[0]"] is not ref.pristine["arg[0]"] and not bool(bad.args["arg[0]"].any())
    assert bool(ref.pristine["arg[0]"].any())                       # the shared copy untouched


def test_the_run_kept_for_the_stale_output_check_holds_only_what_was_written():
    run = run_variant(_module(_add_into), CASE, 0, build, "cpu", keep_pristine=True)
    slim = _written_part(run)
    assert set(slim.args) == {"arg[1]"} == set(slim.pristine)
    assert slim.args["arg[1]"] is run.args["arg[1]"]


def test_a_candidate_serving_the_previous_calls_outputs_is_still_caught():
    cache: list[torch.Tensor] = []

    def stale(x, out):                                              # answers one call late
        cache.append((x + 1).clone())
        out.copy_(cache[-2] if len(cache) > 1 else cache[-1])

    cases = [spec_case("a", "f", T(64), T(64, init="zeros")),
             spec_case("b", "f", T(64), T(64, init="zeros"))]
    verdict = verify(_module(_add_into), _module(stale), cases, build, device="cpu",
                     options=VerifyOptions(nonce=3, catch_errors=True, first_calls=False))
    assert not verdict.passed and any(c.startswith("stale_output") for c in verdict.cheats)


def test_no_run_outlives_a_verification():
    gc.collect()
    before = sum(isinstance(o, Run) for o in gc.get_objects())
    verify(_module(_add_into), _module(_add_into), [CASE], build, device="cpu",
           options=VerifyOptions(nonce=3, catch_errors=True))
    gc.collect()
    assert sum(isinstance(o, Run) for o in gc.get_objects()) == before
