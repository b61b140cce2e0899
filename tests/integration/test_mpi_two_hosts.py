"""Two hosts for real (docs/DISTRIBUTED.md, "Two hosts"): two network namespaces joined by a
veth pair, one rank in each, talking over TCP only (`--mca btl tcp,self`, so no shared memory),
must give the logits one process gives.

mpirun runs in the first namespace and reaches the second through a launch agent that stands in
for ssh (`--mca plm_rsh_agent`): it runs the remote daemon with `ip netns exec`. The test checks
that the job really went over the veth: OpenMPI's TCP transport reports connecting to the other
address, and the veth's byte counters rise. Skipped where namespaces cannot be made (not root,
no iproute2, a container without CAP_SYS_ADMIN).
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import DATA

MPIRUN = shutil.which("mpirun")
IP = shutil.which("ip")
MODEL = DATA / "tiny-deepseek-v2"

AGENT = """#!/bin/sh
# Stands in for ssh: "AGENT HOST COMMAND..." runs COMMAND in HOST's network namespace.
host="$1"; shift
case "$host" in
{cases}
  *) echo "agent: unknown host $host" >&2; exit 1 ;;
esac
exec {ip} netns exec "$ns" /bin/sh -c "$*"
"""


def sh(*argv):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts(tmp_path):
    """Namespaces A and B, veth A <-> B, addresses 10.231.N.1 and .2; yields their layout."""
    if MPIRUN is None:
        pytest.skip("mpirun not installed (openmpi-bin)")
    if IP is None:
        pytest.skip("ip not installed (iproute2: scripts/setup.sh test installs it)")
    if os.geteuid() != 0:
        pytest.skip("making network namespaces needs root")
    tag = os.getpid() % 10000
    subnet = 10 + os.getpid() % 240
    hosts = [{"ns": f"di{tag}a", "veth": f"di{tag}va", "addr": f"10.231.{subnet}.1"},
             {"ns": f"di{tag}b", "veth": f"di{tag}vb", "addr": f"10.231.{subnet}.2"}]
    made = []
    try:
        for h in hosts:
            proc = sh(IP, "netns", "add", h["ns"])
            if proc.returncode != 0:
                pytest.skip(f"cannot make a network namespace here: {proc.stderr.strip()}")
            made.append(h["ns"])
        steps = [(IP, "link", "add", hosts[0]["veth"], "type", "veth", "peer", "name",
                  hosts[1]["veth"])]
        for h in hosts:
            steps += [(IP, "link", "set", h["veth"], "netns", h["ns"]),
                      (IP, "-n", h["ns"], "addr", "add", f"{h['addr']}/24", "dev", h["veth"]),
                      (IP, "-n", h["ns"], "link", "set", "lo", "up"),
                      (IP, "-n", h["ns"], "link", "set", h["veth"], "up")]
        for step in steps:
            proc = sh(*step)
            if proc.returncode != 0:
                pytest.skip(f"cannot wire the namespaces ({' '.join(step)}): {proc.stderr.strip()}")
        agent = tmp_path / "netns_agent.sh"
        cases = "\n".join(f"  {h['addr']}) ns={h['ns']} ;;" for h in hosts)
        agent.write_text(AGENT.format(cases=cases, ip=IP))
        agent.chmod(0o755)
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"{h['addr']} slots=1\n" for h in hosts))
        yield {"hosts": hosts, "agent": agent, "hostfile": hostfile,
               "subnet": f"10.231.{subnet}.0/24"}
    finally:
        for ns in made:
            sh(IP, "netns", "del", ns)  # takes its end of the veth pair with it


def veth_bytes(host):
    proc = sh(IP, "netns", "exec", host["ns"], "cat",
              f"/sys/class/net/{host['veth']}/statistics/tx_bytes",
              f"/sys/class/net/{host['veth']}/statistics/rx_bytes")
    assert proc.returncode == 0, proc.stderr
    return sum(int(v) for v in proc.stdout.split())


def test_two_namespaces_over_tcp_give_the_logits_of_one_process(deepinfer_bin, two_hosts,
                                                                tmp_path):
    generate = ("generate", "-m", MODEL, "--prompt-ids", "3,1,4,1,5,9,2,6", "-n", 16,
                "--ignore-eos", "--json", "--threads", 1, "--log-level", "warn")
    ref = subprocess.run([str(a) for a in (deepinfer_bin, *generate, "--dump-logits",
                                           tmp_path / "ref.npy")],
                         capture_output=True, text=True, timeout=60)
    assert ref.returncode == 0, ref.stderr

    first = two_hosts["hosts"][0]
    before = veth_bytes(first)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    argv = [IP, "netns", "exec", first["ns"], MPIRUN, "--allow-run-as-root",
            # Both "hosts" share this machine's cores: each would bind its rank to core 0.
            "--bind-to", "none",
            "-np", 2, "--hostfile", two_hosts["hostfile"],
            "--mca", "plm_rsh_agent", two_hosts["agent"],
            "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", two_hosts["subnet"],
            "--mca", "oob_tcp_if_include", two_hosts["subnet"],
            "--mca", "btl_base_verbose", 30,
            deepinfer_bin, *generate, "--expert-parallel-size", 2,
            "--dump-logits", tmp_path / "ep.npy"]
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = veth_bytes(first)

    # TCP between the two addresses, and the traffic on the veth.
    # The side that completes the connection logs it, so either rank may (the other's address).
    addrs = [host["addr"] for host in two_hosts["hosts"]]
    log = proc.stdout + proc.stderr
    assert any(f"btl:tcp: now connected to {addr}" in log for addr in addrs), log
    assert after - before > 10_000, f"the veth carried {after - before} bytes"

    got = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert got["output_ids"] == json.loads(ref.stdout)["output_ids"]
    want, have = np.load(tmp_path / "ref.npy"), np.load(tmp_path / "ep.npy")
    assert np.max(np.abs(have - want)) / np.max(np.abs(want)) <= 1e-5
