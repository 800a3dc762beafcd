"""scripts/verify_step_times.py: seconds per verification step from a progress log."""

LOG = """\
10:00:00.000 pid 7/w1 k (2 variants, time=False): verify candidate
10:00:00.500 pid 7/w1 k (2 variants, time=False): verify (first calls) candidate
10:00:02.000 pid 7/w2 q (2 variants, time=False): verify (probe) candidate
10:00:02.000 pid 7/w1 k (2 variants, time=False): verify (seed 0) candidate perf-00
10:00:05.000 pid 7/w1 k (2 variants, time=False): verify (recheck) candidate perf-00
10:00:06.250 pid 7/w1 k (2 variants, time=False): verify (probe) candidate
10:00:09.000 pid 7/w1 k (2 variants, time=False): done
"""


def test_each_step_lasts_until_its_workers_next_line(script):
    steps = script("verify_step_times").step_times(LOG.splitlines())
    assert steps == [("k", "first calls", None, 1.5), ("k", "seed", "perf-00", 3.0),
                     ("k", "recheck", "perf-00", 1.25), ("k", "probe", None, 2.75)]
