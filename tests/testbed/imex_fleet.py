# -*- coding: utf-8 -*-
# Copyright (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make imex-fleet: an NVIDIA IMEX domain of three GB200 compute trays (the simulated fleet), end to end.

Boots a fleet of its own, always fresh (taken down first and at the end): three el9-gb200 nodes in one IMEX domain
(`testbed.py up --imex`: inventory group nvl72_rack01 with nodeprep_imex_domain_group and
nodeprep_nvidia_driver_imex, the nodes routed to each other). TESTBED_PREFIX npix, TESTBED_SUBNET 10.252,
TESTBED_DIR .testbed-imex; IMEX_FLEET_PREFIX, IMEX_FLEET_SUBNET and IMEX_FLEET_DIR change them. Checks, with the GPU
double's nvidia-imex daemons talking TCP to each other across the nodes' network namespaces:

  1. the nvidia_driver role installs the driver and nvidia-imex (and reboots the nodes); nvidia-imex runs with no
     node list: nvidia-imex-ctl says "Failed to read node configuration file";
  2. check mode of playbooks/imex.yml predicts exactly the tasks the real run then changes, host by host
     (molecule/default/compare_runs.py on the recorded runs); a second run changes nothing;
  3. every node has the same nodes_config.cfg: the three addresses in ascending order, written here by hand
     (10.252.0.2, 10.252.0.6, 10.252.0.10 - as text 10.252.0.10 would come first), and
     /dev/nvidia-caps-imex-channels/channel0 is a character device with the major the driver registered in the
     node's /proc/devices, minor 0, mode 0666; nvidia-imex-ctl -N prints "Domain State: UP";
  4. readiness: imex.domain passes on the three nodes;
  5. a node rebooted comes back with its channel made again (a new /dev) and the domain UP; imex.domain passes;
  6. the fault imex-peer-down on el9-gb200-02: readiness fails imex.domain on every node, naming
     el9-gb200-02 (10.252.0.6) as UNAVAILABLE on the two others;
  7. healed: imex.domain passes again on the three nodes.

Exit 0 when every check passed. Not part of `make test`. Run as root from the repository root.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PREFIX = os.environ.get('IMEX_FLEET_PREFIX') or 'npix'
SUBNET = os.environ.get('IMEX_FLEET_SUBNET') or '10.252'
STATE_DIR = os.environ.get('IMEX_FLEET_DIR') or os.path.join(REPO, '.testbed-imex')
KINDS = 'el9-gb200'
NODES = ['el9-gb200-01', 'el9-gb200-02', 'el9-gb200-03']
GROUP = 'nvl72_rack01'
ENV = dict(os.environ, TESTBED_PREFIX=PREFIX, TESTBED_SUBNET=SUBNET, TESTBED_DIR=STATE_DIR, LC_ALL='C')
for leak in ('TESTBED_SLURM', 'TESTBED_KINDS', 'TESTBED_IMEX', 'NODES'):
    ENV.pop(leak, None)
TESTBED = [sys.executable, os.path.join(HERE, 'testbed.py')]
INVENTORY = os.path.join(STATE_DIR, 'inventory.yml')
REPORT = os.path.join(REPO, '.tmp', 'imex-fleet')
VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))
WAIT = int(os.environ.get('IMEX_FLEET_WAIT') or 120)
# The three trays' addresses in the domain's order, written by hand from the testbed's addressing (node i has
# <subnet>.0.<4i+2>): ascending as addresses, not as text.
ORDER = ['{0}.0.2'.format(SUBNET), '{0}.0.6'.format(SUBNET), '{0}.0.10'.format(SUBNET)]
ADDR = dict(zip(NODES, ORDER))

TIMES = []
FAILED = []


def say(msg):
    sys.stdout.write('imex-fleet: {0}\n'.format(msg))
    sys.stdout.flush()


def check(ok, what, detail=''):
    say('{0} {1}{2}'.format('PASS' if ok else 'FAIL', what, '' if ok or not detail else ': ' + detail))
    if not ok:
        FAILED.append(what)
    return ok


def timed(label, start):
    TIMES.append((label, time.time() - start))


def ssh(node, command, check_rc=True, timeout=60):
    argv = ['ssh', '-i', os.path.join(STATE_DIR, 'ssh', 'id_ed25519'), '-o', 'StrictHostKeyChecking=no',
            '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', '-o', 'BatchMode=yes',
            '-o', 'ConnectTimeout=3', 'root@' + ADDR[node], command]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=timeout, check=False)
    if check_rc and proc.returncode != 0:
        raise RuntimeError('{0}: {1!r} failed (rc={2}): {3}{4}'.format(
            node, command, proc.returncode, proc.stdout, proc.stderr))
    return proc.stdout


def wait_for(what, probe, timeout=WAIT, interval=2.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = probe()
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    say('timed out after {0} s waiting for {1}; last: {2!r}'.format(timeout, what, last))
    return None


def playbook_env(record=None):
    env = dict(ENV)
    purelib = sysconfig.get_paths()['purelib']
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.tmp', 'collections') + ':' + purelib,
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH='false', ANSIBLE_NOCOLOR='1', LC_ALL='C.UTF-8',
               PATH=VENV_BIN + ':' + env.get('PATH', ''))
    if record:
        env.update(NODEPREP_RECORD_DIR=record,
                   ANSIBLE_CALLBACKS_ENABLED='nodeprep_record',
                   ANSIBLE_CALLBACK_PLUGINS=os.path.join(REPO, 'molecule', 'default', 'callback_plugins'))
    return env


def playbook(label, name, *extra, **kw):
    t0 = time.time()
    log = os.path.join(REPORT, '{0}.log'.format(label.replace(' ', '-')))
    argv = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', INVENTORY, os.path.join(REPO, 'playbooks', name),
            '-e', 'nodeprep_hosts=' + GROUP] + list(extra)
    with open(log, 'w') as out:
        proc = subprocess.run(argv, env=playbook_env(kw.get('record')), stdout=out, stderr=subprocess.STDOUT,
                              check=False, cwd=REPO)
    timed(label, t0)
    with open(log) as f:
        return proc.returncode, f.read()


def recap(text):
    """{host: {'changed': n, 'failed': n, 'unreachable': n}} of a PLAY RECAP."""
    out = {}
    for match in re.finditer(r'^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', text, re.M):
        out[match.group(1)] = {'changed': int(match.group(2)), 'unreachable': int(match.group(3)),
                               'failed': int(match.group(4))}
    return out


def readiness(run):
    """imex.domain of every node: {host: (status, observed)} from readiness's report.json."""
    folder = os.path.join(REPORT, 'readiness-' + run)
    rc, text = playbook('readiness ' + run, 'readiness.yml', '-e', 'nodeprep_readiness_fail=false',
                        '-e', 'nodeprep_readiness_report_dir=' + folder)
    path = os.path.join(folder, 'report.json')
    if rc != 0 or not os.path.exists(path):
        say('readiness {0} (rc={1}): {2}'.format(run, rc, text[-1500:]))
        return {}
    with open(path) as f:
        report = json.load(f)
    out = {}
    for host, entry in report.get('hosts', {}).items():
        for item in entry.get('checks') or []:
            if item.get('id') == 'imex.domain':
                out[host] = (item.get('status'), item.get('observed'))
    return out


def readiness_until(run, want, timeout=WAIT):
    """Readiness again until imex.domain has status ``want`` on every node (the daemons connect every 2 s)."""
    deadline = time.time() + timeout
    attempt = 0
    while True:
        attempt += 1
        got = readiness('{0}-{1}'.format(run, attempt))
        if got and all(got.get(n, ('', ''))[0] == want for n in NODES):
            return got
        if time.time() > deadline:
            return got
        time.sleep(3)


def channel(node):
    """(major in /proc/devices, 'major minor mode type' of channel0) on a node."""
    major = ssh(node, "awk '$2 == \"nvidia-caps-imex-channels\" {print $1}' /proc/devices").strip()
    node_info = ssh(node, 'stat -c "%t %T %a %F" /dev/nvidia-caps-imex-channels/channel0', check_rc=False).strip()
    return major, node_info


def channel_ok(node):
    major, info = channel(node)
    if not major:
        return False
    return info == '{0:x} 0 666 character special file'.format(int(major))


def boot_time(node):
    return ssh(node, "awk '{print $22}' /proc/1/stat").strip()


def scenario():
    t0 = time.time()
    proc = subprocess.run(TESTBED + ['down'], env=ENV, check=False)
    if not check(proc.returncode == 0, 'testbed.py down before up (fresh nodes)'):
        return
    proc = subprocess.run(TESTBED + ['up', '--nodes', '3', '--kinds', KINDS, '--imex'], env=ENV, check=False)
    timed('testbed.py up --imex (3 GB200 nodes, until SSH answers)', t0)
    if not check(proc.returncode == 0, 'testbed.py up --imex'):
        return
    if not os.path.isdir(REPORT):
        os.makedirs(REPORT)

    # 1. The driver and nvidia-imex: installed and started by the nvidia_driver role, with no node list yet.
    rc, text = playbook('nvidia_driver', 'nvidia_driver.yml')
    if not check(rc == 0, 'nvidia_driver: driver and nvidia-imex installed on the three nodes', text[-2000:]):
        return
    said = ssh(NODES[0], 'nvidia-imex-ctl -N -j', check_rc=False)
    check('Failed to read node configuration file /etc/nvidia-imex/nodes_config.cfg' in said,
          'nvidia-imex-ctl before the imex role: no node list', said)

    # 2. Check mode exact, then the real run, then nothing to do.
    check_dir, real_dir = os.path.join(REPORT, 'record-check'), os.path.join(REPORT, 'record-real')
    for folder in (check_dir, real_dir):
        if os.path.isdir(folder):
            for name in os.listdir(folder):
                os.unlink(os.path.join(folder, name))
        else:
            os.makedirs(folder)
    rc, text = playbook('imex check mode', 'imex.yml', '--check', record=check_dir)
    check(rc == 0, 'imex.yml --check on the fresh domain', text[-2000:])
    rc, text = playbook('imex', 'imex.yml', record=real_dir)
    check(rc == 0, 'imex.yml configures the domain', text[-2000:])
    changed = recap(text)
    check(all(changed.get(n, {}).get('changed', 0) > 0 for n in NODES), 'imex.yml changed every node', repr(changed))
    proc = subprocess.run([sys.executable, os.path.join(REPO, 'molecule', 'default', 'compare_runs.py'), check_dir,
                           real_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False)
    check(proc.returncode == 0, 'check mode predicted exactly what the real run changed', proc.stdout[-2000:])
    rc, text = playbook('imex again', 'imex.yml')
    again = recap(text)
    check(rc == 0 and all(again.get(n, {}).get('changed') == 0 for n in NODES),
          'imex.yml again: changed=0 on every node (idempotent)', repr(again))

    # 3. The same ordered list everywhere; the channel; the domain.
    wanted = '\n'.join(ORDER) + '\n'
    for node in NODES:
        got = ssh(node, 'cat /etc/nvidia-imex/nodes_config.cfg')
        check(got == wanted, '{0}: nodes_config.cfg is {1}'.format(node, ', '.join(ORDER)), repr(got))
        check(channel_ok(node), '{0}: channel0 char <major from /proc/devices>:0 mode 0666'.format(node),
              repr(channel(node)))
    up = wait_for('Domain State: UP on ' + NODES[0],
                  lambda: 'Domain State: UP' in ssh(NODES[0], 'nvidia-imex-ctl -N', check_rc=False))
    check(bool(up), 'nvidia-imex-ctl -N on {0}: Domain State: UP'.format(NODES[0]),
          ssh(NODES[0], 'nvidia-imex-ctl -N', check_rc=False))

    # 4. Readiness.
    got = readiness_until('configured', 'pass')
    check(got and all(got[n][0] == 'pass' for n in NODES), 'readiness: imex.domain passes on the three nodes',
          repr(got))

    # 5. A reboot: the channel is made again at boot.
    node = NODES[1]
    before = boot_time(node)
    t0 = time.time()
    ssh(node, 'systemctl reboot', check_rc=False)
    back = wait_for('{0} back from its reboot'.format(node), lambda: boot_time(node) != before, timeout=300)
    timed('reboot of ' + node, t0)
    check(bool(back), '{0} rebooted'.format(node))
    ok = wait_for('channel0 on {0} after its reboot'.format(node), lambda: channel_ok(node))
    check(bool(ok), '{0}: channel0 made again at boot (char <major>:0, mode 0666)'.format(node), repr(channel(node)))
    journal = ssh(node, 'journalctl -b -u nodeprep-imex-channels --no-pager', check_rc=False)
    check('/dev/nvidia-caps-imex-channels/channel0 char {0}:0 made'.format(channel(node)[0]) in journal,
          '{0}: nodeprep-imex-channels.service made it in this boot'.format(node), journal[-800:])
    got = readiness_until('rebooted', 'pass')
    check(got and all(got[n][0] == 'pass' for n in NODES),
          'readiness after the reboot: imex.domain passes on the three nodes', repr(got))

    # 6. A peer down.
    proc = subprocess.run(TESTBED + ['fault', NODES[1], 'imex-peer-down'], env=ENV, check=False)
    check(proc.returncode == 0, 'fault imex-peer-down on ' + NODES[1])
    named = 'peer {0} ({1}) is UNAVAILABLE'.format(NODES[1], ADDR[NODES[1]])
    got = readiness_until('peer-down', 'fail')
    check(got and all(got[n][0] == 'fail' for n in NODES), 'readiness: imex.domain fails on the three nodes',
          repr(got))
    for other in (NODES[0], NODES[2]):
        check(got and named in (got.get(other) or ('', ''))[1], '{0}: imex.domain names {1}'.format(other, named),
              repr(got.get(other) if got else None))

    # 7. Healed.
    proc = subprocess.run(TESTBED + ['heal', NODES[1], 'imex-peer-down'], env=ENV, check=False)
    check(proc.returncode == 0, 'heal imex-peer-down on ' + NODES[1])
    got = readiness_until('healed', 'pass')
    check(got and all(got[n][0] == 'pass' for n in NODES), 'readiness after the heal: imex.domain passes on the '
          'three nodes', repr(got))


def main():
    if os.geteuid() != 0:
        say('needs root (the simulated fleet)')
        return 2
    t0 = time.time()
    try:
        scenario()
    except Exception as exc:      # report, then take the fleet down
        check(False, 'scenario raised {0}'.format(type(exc).__name__), str(exc)[-1500:])
    finally:
        proc = subprocess.run(TESTBED + ['down'], env=ENV, check=False)
        check(proc.returncode == 0, 'testbed.py down')
    timed('make imex-fleet in all', t0)
    for label, seconds in TIMES:
        say('time: {0:6.1f} s  {1}'.format(seconds, label))
    if FAILED:
        say('{0} check(s) failed: {1}'.format(len(FAILED), '; '.join(FAILED)))
        return 1
    say('all checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
