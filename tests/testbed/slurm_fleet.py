# -*- coding: utf-8 -*-
# Copyright (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make slurm-fleet: a real Slurm on a small simulated fleet, end to end, then nothing left.

Boots a fleet of its own (TESTBED_PREFIX npsl, TESTBED_SUBNET 10.236, TESTBED_DIR .testbed-slurm; SLURM_FLEET_PREFIX,
SLURM_FLEET_SUBNET and SLURM_FLEET_DIR change them): the Slurm head and two GPU nodes, a Rocky-9-like and an
Ubuntu-like one, with the Slurm that TESTBED_SLURM_VERSION names (24.11, Debian 13's, by default; 22.05, Debian 12's).
Asks the real daemons (sinfo, squeue, scontrol, sbatch on the head) and checks:

  0. the daemons and the client are that version (scontrol version, slurmd -V);
  1. both nodes IDLE, with the CPUs and RealMemory that slurmd -C reports inside each node;
  2. an sbatch job runs on the node it was sent to (RUNNING in squeue, its process on that node only), then COMPLETED;
  3. drain with a reason: DRAINED in sinfo, the reason in scontrol show node -o; resume: IDLE again (22.05 drops the
     reason; 24.11 without accounting storage keeps it, tests/testbed/REALITY.md);
  4. ReturnToService=1: a node rebooted (the testbed's reboot, systemctl reboot in the node) comes back DOWN with
     "Node unexpectedly rebooted"; resume: IDLE;
  5. ReturnToService=2 (slurm.conf changed on every node, scontrol reconfigure): a drained node rebooted comes back
     still drained with its reason; an undrained node rebooted comes back IDLE;
  6. scontrol reboot nextstate=resume: the node reboots (RebootProgram) and comes back IDLE.

Exit 0 when every check passed; the fleet is taken down in every case (make testbed-down of another checkout or
prefix is never touched). Run as root from the repository root.
"""

from __future__ import absolute_import, division, print_function

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402
import slurmconf  # noqa: E402

FLEET = fleetlib.SlurmFleet('slurm-fleet', *fleetlib.identity('SLURM_FLEET', 'npsl', '10.236', '.testbed-slurm'))
PREFIX, SUBNET, STATE_DIR = FLEET.prefix, FLEET.subnet, FLEET.state_dir
EL, UBUNTU, HEAD, ADDR, VERSION = FLEET.EL, FLEET.UBUNTU, FLEET.HEAD, FLEET.addresses, FLEET.version
KEEPS_REASON = FLEET.keeps_reason
say, check, timed, ssh, head, nodes = FLEET.say, FLEET.check, FLEET.timed, FLEET.ssh, FLEET.head, FLEET.nodes
wait_for, sinfo_states = FLEET.wait_for, FLEET.sinfo_states


def foreign_addresses():
    """Interfaces holding an address of our subnet that are not this fleet's veths: another fleet uses it."""
    out = subprocess.run(['ip', '-o', '-4', 'addr', 'show'], stdout=subprocess.PIPE, universal_newlines=True,
                         check=False).stdout
    bad = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].startswith(SUBNET + '.') and not fields[1].startswith(PREFIX):
            bad.append('{0} {1}'.format(fields[1], fields[3]))
    return bad


def foreign_namespaces():
    """Network namespaces of our prefix while our state dir knows no fleet: another checkout runs this fleet."""
    if os.path.exists(os.path.join(STATE_DIR, 'state.json')):
        return []
    out = subprocess.run(['ip', 'netns', 'list'], stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX + '-')]


def reboot(node):
    """The testbed's reboot: systemctl reboot in the node; back when its BootTime in Slurm has moved."""
    before = nodes()[node]['BootTime']
    t0 = time.time()
    ssh(node, 'systemctl reboot', check_rc=False)
    after = wait_for('{0} to register again after its reboot'.format(node),
                     lambda: nodes()[node]['BootTime'] != before and nodes()[node])
    timed('reboot of {0} until slurmd registered again'.format(node), t0)
    check(after is not None, '{0} rebooted: BootTime moved from {1}'.format(node, before),
          'BootTime still {0}'.format(before))
    return after


def scenario():
    t0 = time.time()
    proc = FLEET.up()
    timed('testbed.py up --slurm (head + 2 nodes, until SSH answers)', t0)
    if proc.returncode != 0:
        for name in (EL, UBUNTU, HEAD):
            for log in ('boots.log', 'console.log'):
                path = os.path.join(STATE_DIR, 'nodes', name, log)
                if os.path.exists(path):
                    with open(path, errors='replace') as f:
                        say('{0} {1} (end):\n{2}'.format(name, log, ''.join(f.readlines()[-15:])))
        check(False, 'testbed.py up --slurm', 'exit {0}'.format(proc.returncode))
        return
    for name in (EL, UBUNTU, HEAD):
        check(ssh(name, 'hostname').strip() == name, '{0} answers SSH at {1}'.format(name, ADDR[name]))
    got = head('scontrol version').strip()
    check(got.startswith('slurm-wlm {0}.'.format(VERSION)) or got.startswith('slurm {0}.'.format(VERSION)),
          'scontrol version on the head: {0} (TESTBED_SLURM_VERSION {1})'.format(got, VERSION))
    for name in (EL, UBUNTU):
        got = ssh(name, 'slurmd -V').strip()
        check(got.split()[-1].startswith(VERSION + '.'), 'slurmd -V on {0}: {1}'.format(name, got))
    check(ssh(HEAD, 'systemctl is-active munge slurmctld').split() == ['active', 'active'],
          'munge and slurmctld active on the head')
    check(ssh(HEAD, 'test ! -e /usr/sbin/slurmd && test ! -e /usr/bin/nvidia-smi && echo none').strip() == 'none',
          'the head has no slurmd and no GPU double')

    # 1. nodes IDLE with their real hardware
    idle = wait_for('both nodes IDLE in sinfo', lambda: sinfo_states() == {EL: 'idle', UBUNTU: 'idle'} and True)
    timed('up until both nodes IDLE in sinfo', t0)
    check(bool(idle), 'sinfo: {0} and {1} idle'.format(EL, UBUNTU), repr(sinfo_states()))
    info = nodes()
    for name in (EL, UBUNTU):
        hw = slurmconf.parse_slurmd_c(ssh(name, 'slurmd -C'))
        got = info[name]
        check(got.get('CPUTot') == str(hw['CPUs']) and got.get('RealMemory') == str(hw['RealMemory']),
              '{0}: CPUTot={1} RealMemory={2} as slurmd -C reports in the node'.format(
                  name, got.get('CPUTot'), got.get('RealMemory')), repr(hw))
        check(ssh(name, 'systemctl is-active munge slurmd').split() == ['active', 'active'],
              'munge and slurmd active on {0}'.format(name))

    # 2. a real job
    t1 = time.time()
    job = head("sbatch --parsable -w {0} -J testbed-sleep --wrap 'sleep 12'".format(EL)).strip().split(';')[0]
    running = wait_for('job {0} RUNNING'.format(job),
                       lambda: head("squeue -h -j {0} -o '%T %N'".format(job)).split() == ['RUNNING', EL])
    check(bool(running), 'squeue: job {0} RUNNING on {1}'.format(job, EL),
          head("squeue -h -j {0} -o '%T %N %r'".format(job)))
    check(ssh(EL, "pgrep -x sleep -a || true").count('sleep 12') == 1 and
          'sleep 12' not in ssh(UBUNTU, 'pgrep -x sleep -a || true'),
          "the job's process (sleep 12) runs on {0} and not on {1}".format(EL, UBUNTU))
    gone = wait_for('job {0} to leave squeue'.format(job), lambda: head('squeue -h -j {0}'.format(job)).strip() == '')
    record = slurmconf.parse_key_values(head('scontrol show job -o {0}'.format(job)))
    check(bool(gone) and record.get('JobState') == 'COMPLETED' and record.get('ExitCode') == '0:0',
          'job {0} COMPLETED with exit code 0:0 (scontrol show job)'.format(job),
          '{0} {1}'.format(record.get('JobState'), record.get('ExitCode')))
    timed('sbatch of sleep 12 until COMPLETED', t1)

    # 3. drain and resume
    t1 = time.time()
    head("scontrol update nodename={0} state=drain reason='testbed: drain check'".format(UBUNTU))
    drained = wait_for('{0} drained'.format(UBUNTU), lambda: sinfo_states().get(UBUNTU) == 'drained')
    node = nodes()[UBUNTU]
    check(bool(drained) and 'DRAIN' in node['State'] and node.get('Reason', '').startswith('testbed: drain check'),
          '{0} DRAINED, scontrol show node -o: State={1} Reason={2}'.format(UBUNTU, node['State'], node.get('Reason')))
    head('scontrol update nodename={0} state=resume'.format(UBUNTU))
    resumed = wait_for('{0} idle'.format(UBUNTU), lambda: sinfo_states().get(UBUNTU) == 'idle')
    node = nodes()[UBUNTU]
    if KEEPS_REASON:
        check(bool(resumed) and node['State'] == 'IDLE' and node.get('Reason', '').startswith('testbed: drain check'),
              '{0} resumed: State={1}, the reason kept (Slurm {2}, no accounting storage): {3}'.format(
                  UBUNTU, node['State'], VERSION, node.get('Reason')))
    else:
        check(bool(resumed) and node['State'] == 'IDLE' and 'Reason' not in node,
              '{0} resumed: State={1}, no reason'.format(UBUNTU, node['State']), node.get('Reason', ''))
    timed('drain and resume', t1)

    # 4. ReturnToService=1: an unexpected reboot leaves the node DOWN
    conf = head("scontrol show config | awk '$1 == \"ReturnToService\" {print $3}'").strip()
    check(conf == '1', 'slurmctld runs with ReturnToService=1', conf)
    after = reboot(EL)
    down = wait_for('{0} DOWN after the reboot'.format(EL), lambda: 'DOWN' in nodes()[EL]['State'] and nodes()[EL])
    node = down or after or {}
    check(bool(down) and node.get('Reason', '').startswith('Node unexpectedly rebooted'),
          'ReturnToService=1: {0} back as State={1} Reason={2}'.format(EL, node.get('State'), node.get('Reason')))
    head('scontrol update nodename={0} state=resume'.format(EL))
    check(bool(wait_for('{0} idle'.format(EL), lambda: sinfo_states().get(EL) == 'idle')),
          '{0} resumed after the unexpected reboot: idle'.format(EL), repr(sinfo_states()))

    # 5. ReturnToService=2: a drained node stays drained (its reason survives), an undrained one returns IDLE
    for name in (HEAD, EL, UBUNTU):
        ssh(name, "sed -i 's/^ReturnToService=.*/ReturnToService=2/' /etc/slurm/slurm.conf")
    head('scontrol reconfigure')
    conf = wait_for('ReturnToService=2 in slurmctld', lambda: head(
        "scontrol show config | awk '$1 == \"ReturnToService\" {print $3}'").strip() == '2')
    check(bool(conf), 'scontrol reconfigure: slurmctld runs with ReturnToService=2')
    head("scontrol update nodename={0} state=drain reason='testbed: before reboot'".format(UBUNTU))
    wait_for('{0} drained'.format(UBUNTU), lambda: sinfo_states().get(UBUNTU) == 'drained')
    node = reboot(UBUNTU) or {}
    time.sleep(2)
    node = nodes()[UBUNTU]
    check('DRAIN' in node['State'] and 'DOWN' not in node['State'] and
          node.get('Reason', '').startswith('testbed: before reboot'),
          'ReturnToService=2: drained {0} back as State={1} Reason={2}'.format(UBUNTU, node['State'],
                                                                               node.get('Reason')))
    head('scontrol update nodename={0} state=resume'.format(UBUNTU))
    wait_for('{0} idle'.format(UBUNTU), lambda: sinfo_states().get(UBUNTU) == 'idle')
    before = nodes()[EL].get('Reason')
    reboot(EL)
    time.sleep(2)
    node = nodes()[EL]
    if KEEPS_REASON:
        # The reason still shown is the one kept since check 4; the reboot added none.
        check(node['State'] == 'IDLE' and node.get('Reason') == before,
              'ReturnToService=2: {0} back as State={1}, no new reason (kept: {2})'.format(EL, node['State'], before),
              node.get('Reason', ''))
    else:
        check(node['State'] == 'IDLE' and 'Reason' not in node,
              'ReturnToService=2: {0} back as State={1}, no reason'.format(EL, node['State']), node.get('Reason', ''))

    # 6. scontrol reboot (Slurm's own reboot, RebootProgram): the node reboots and returns to service by itself
    before = nodes()[UBUNTU]['BootTime']
    t1 = time.time()
    head("scontrol reboot nextstate=resume reason='testbed: scontrol reboot' {0}".format(UBUNTU))
    back = wait_for('{0} back IDLE after scontrol reboot'.format(UBUNTU),
                    lambda: nodes()[UBUNTU]['BootTime'] != before and nodes()[UBUNTU]['State'] == 'IDLE')
    timed('scontrol reboot of {0} until IDLE'.format(UBUNTU), t1)
    node = nodes()[UBUNTU]
    check(bool(back), 'scontrol reboot: {0} rebooted (BootTime {1} -> {2}) and back as State={3}'.format(
        UBUNTU, before, node['BootTime'], node['State']), node.get('Reason', ''))
    check(sinfo_states() == {EL: 'idle', UBUNTU: 'idle'}, 'sinfo: both nodes idle at the end', repr(sinfo_states()))


def refuse():
    """Why this fleet cannot start here (another fleet holds its prefix or subnet), or None."""
    taken = foreign_namespaces()
    if taken:
        return ('namespaces of prefix {0} exist ({1}) but {2} holds no fleet: another checkout runs one; set '
                'SLURM_FLEET_PREFIX and SLURM_FLEET_SUBNET'.format(PREFIX, ', '.join(taken), STATE_DIR))
    bad = foreign_addresses()
    if bad:
        return 'another fleet uses {0}.0.0/16 ({1}): set SLURM_FLEET_SUBNET (and SLURM_FLEET_PREFIX)'.format(
            SUBNET, ', '.join(bad))
    return None


def main():
    return FLEET.main(scenario, 'slurm-fleet', refuse=refuse, time_down=True,
                      down_what='testbed.py down: no namespace, mount or process of {0} left'.format(PREFIX))


if __name__ == '__main__':
    sys.exit(main())
