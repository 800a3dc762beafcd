"""RunStore.claim: shards of one suite run take each record once, across processes."""

import subprocess
import sys

from tritonforge.store import RunStore

CLAIMER = '''
import sys
from tritonforge.store import RunStore
path, owner = sys.argv[1], sys.argv[2]
with RunStore(path) as store:
    got = [f"k{i}" for i in range(40) if store.claim("optimize-claim", f"k{i}", "g1", owner)]
print(" ".join(got))
'''


def test_one_owner_per_group_and_stale_groups_are_taken_over(tmp_path):
    with RunStore(tmp_path / "s.sqlite") as store:
        assert store.claim("optimize-claim", "a", "g1", "shard0")
        assert not store.claim("optimize-claim", "a", "g1", "shard1")    # held in this run
        assert store.claim("optimize-claim", "a", "g1", "shard0")        # its own claim
        assert store.claim("optimize-claim", "a", "g2", "shard1")        # g1 ended: stale


def test_processes_claiming_at_once_each_get_a_record_exactly_once(tmp_path):
    path = tmp_path / "s.sqlite"
    RunStore(path).close()                                                # schema first
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, str(path), f"p{i}"],
                              stdout=subprocess.PIPE, text=True) for i in range(4)]
    claimed = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        claimed += out.split()
    assert sorted(claimed) == sorted(f"k{i}" for i in range(40))
