"""scripts/progress_case_times.py: generated vs own case seconds from a progress log."""


LOG = """\
10:00:00 pid 7 k (2 variants, time=False): sent
10:00:00 pid 7 k (2 variants, time=False): import original
10:00:01 pid 7 k (2 variants, time=False): import candidate
10:00:01 pid 7 k (2 variants, time=False): run original test
10:00:03 pid 7 k (2 variants, time=False): run original gen-odd-n
10:00:08 pid 7 k (2 variants, time=False): verify candidate
10:00:09 pid 7 k (1 variants, time=True): sent
10:00:09 pid 7 k (1 variants, time=True): run original gen-odd-n
10:00:20 pid 7 k (1 variants, time=True): done
"""


def test_seconds_are_split_by_case_kind_and_timed_requests_are_left_out(script):
    times = script("progress_case_times").case_times(LOG.splitlines())
    assert times == {"k": (1, 5, 2)}


def test_lines_with_milliseconds_and_a_worker_read_the_same(script):
    newer = "\n".join(ln[:8] + ".250" + ln[8:].replace("pid 7 ", "pid 7/w4242 ")
                      for ln in LOG.splitlines())
    assert script("progress_case_times").case_times(newer.splitlines()) == {"k": (1, 5, 2)}
