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
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402

PREFIX, SUBNET, STATE_DIR = fleetlib.identity('IMEX_FLEET', 'npix', '10.252', '.testbed-imex')
KINDS = 'el9-gb200'
NODES = ['el9-gb200-01', 'el9-gb200-02', 'el9-gb200-03']
GROUP = 'nvl72_rack01'
REPORT = os.path.join(fleetlib.REPO, '.tmp', 'imex-fleet')
# The three trays' addresses in the domain's order, written by hand from the testbed's addressing (node i has
# <subnet>.0.<4i+2>): ascending as addresses, not as text.
ORDER = ['{0}.0.2'.format(SUBNET), '{0}.0.6'.format(SUBNET), '{0}.0.10'.format(SUBNET)]
ADDR = dict(zip(NODES, ORDER))
FLEET = fleetlib.Fleet('imex-fleet', PREFIX, SUBNET, STATE_DIR, leaks=fleetlib.IMEX_LEAKS, addresses=ADDR,
                       wait=int(os.environ.get('IMEX_FLEET_WAIT') or 120), interval=2.0, reraise=False)
WAIT = FLEET.wait
say, check, timed, ssh, wait_for, recap = FLEET.say, FLEET.check, FLEET.timed, FLEET.ssh, FLEET.wait_for, fleetlib.recap


def playbook(label, name, *extra, **kw):
    t0 = time.time()
    rc, text, _seconds = FLEET.playbook(os.path.join(REPORT, '{0}.log'.format(label.replace(' ', '-'))), name,
                                        '-e', 'nodeprep_hosts=' + GROUP, *extra, record=kw.get('record'))
    timed(label, t0)
    return rc, text


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
    if not FLEET.fresh_up(lambda: FLEET.testbed('up', '--nodes', '3', '--kinds', KINDS, '--imex'), 'testbed.py up --imex',
                          timed_as='testbed.py up --imex (3 GB200 nodes, until SSH answers)'):
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
    proc = subprocess.run([sys.executable, os.path.join(fleetlib.REPO, 'molecule', 'default', 'compare_runs.py'),
                           check_dir, real_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
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
    FLEET.testbed_ok('fault', NODES[1], 'imex-peer-down', what='fault imex-peer-down on ' + NODES[1])
    named = 'peer {0} ({1}) is UNAVAILABLE'.format(NODES[1], ADDR[NODES[1]])
    got = readiness_until('peer-down', 'fail')
    check(got and all(got[n][0] == 'fail' for n in NODES), 'readiness: imex.domain fails on the three nodes',
          repr(got))
    for other in (NODES[0], NODES[2]):
        check(got and named in (got.get(other) or ('', ''))[1], '{0}: imex.domain names {1}'.format(other, named),
              repr(got.get(other) if got else None))

    # 7. Healed.
    FLEET.testbed_ok('heal', NODES[1], 'imex-peer-down', what='heal imex-peer-down on ' + NODES[1])
    got = readiness_until('healed', 'pass')
    check(got and all(got[n][0] == 'pass' for n in NODES), 'readiness after the heal: imex.domain passes on the '
          'three nodes', repr(got))


def main():
    return FLEET.main(scenario, 'imex-fleet')


if __name__ == '__main__':
    sys.exit(main())
