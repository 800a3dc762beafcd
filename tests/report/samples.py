"""A synthetic optimization result with everything report.html can plot (no kernel runs)."""

from tritonforge.model import Bound, Candidate, Decision, HistoryEntry, Roofline, Status
from tritonforge.report.gather import CaseBound, ReportExtras
from tritonforge.search.loop import OptimizeResult


def sample_result() -> tuple[OptimizeResult, ReportExtras]:
    orig = Candidate("BLOCK = 4\n", "original")
    step1 = Candidate("BLOCK = 256\n", "rules:constexpr_override", orig.hash, "BLOCK 4 -> 256")
    best = Candidate("BLOCK = 1024\n", "rules:constexpr_override", step1.hash, "BLOCK 256 -> 1024")
    bad = Candidate("BLOCK = 3\n", "rules:constexpr_override", orig.hash, "BLOCK 4 -> 3")
    slow = Candidate("BLOCK = 8\n", "rules:num_warps", orig.hash, "num_warps 4 -> 8")
    d1 = Decision(step1.hash, True, 6.0, 5.7, 5.0, 0.9, "6.0x faster", (("perf-16M", 6.5),))
    d2 = Decision(best.hash, True, 1.5, 1.4, 1.4, 0.9, "1.5x faster", (("perf-16M", 1.6),))
    ds = Decision(slow.hash, False, 0.97, 0.9, 0.97, 0.97, "within noise", (("perf-16M", 0.97),))
    final = Decision(best.hash, True, 9.4, 9.1, 4.5, 0.9, "9.4x faster",
                     (("perf-16M", 9.8), ("perf-1M", 1.12), ("perf-64K", 0.98)))
    history = (HistoryEntry(step1.hash, step1.origin, step1.description, Status.OK, 6.0, "<accepted>"),
               HistoryEntry(bad.hash, bad.origin, bad.description, Status.MISMATCH, None, "differs"),
               HistoryEntry(slow.hash, slow.origin, slow.description, Status.OK, 0.97, "noise"),
               HistoryEntry(best.hash, best.origin, best.description, Status.OK, 1.5, "1.5x"))
    result = OptimizeResult("k", orig, best, final, 2, "no gain for 2 rounds", 60.0, 4, history,
                            ("perf-16M",), ("a note",))
    roof = Roofline(2 * 64e6, 16e6, 400.0, 320.0, 0.04, 3350.0, 989.0, 0.1, Bound.MEMORY)
    fast = Roofline(2 * 64e6, 16e6, 40.8, 3137.0, 0.39, 3350.0, 989.0, 0.94, Bound.MEMORY)
    extras = ReportExtras(
        (CaseBound("perf-16M", 9.8, 9.5, 10.1), CaseBound("perf-1M", 1.12, 1.05, 1.2),
         CaseBound("perf-64K", 0.98, 0.95, 1.01)),
        ((1, d1), (1, ds), (2, d2)), (("original", roof), ("accepted", fast)), "perf-16M")
    return result, extras


PLOT_SCRIPT = """JSON.stringify({
  plots: [...document.querySelectorAll('svg.plot')].map(s => {
    const r = s.getBoundingClientRect();
    return {plot: s.dataset.plot, marks: s.querySelectorAll('.mark').length,
            x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height};
  }),
  resources: performance.getEntriesByType('resource').length,
  scripts: document.scripts.length})"""
