# -*- coding: utf-8 -*-
# Copyright (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Capture what the fleet's real Slurm prints in the node states rolling maintenance and readiness meet.

    TESTBED_SLURM_VERSION=24.11 python3 tests/testbed/slurm_captures.py OUTDIR

Boots the Slurm fleet of `make slurm-fleet` (SLURM_FLEET_PREFIX/SUBNET/DIR), drives the two GPU nodes through the
states below with scontrol, sbatch, the nodes' own `systemctl reboot` and the testbed's slow-boot fault, saves the
stdout of each command on the head unchanged as OUTDIR/<name>.txt and logs every command, with the time, in
OUTDIR/captures.log. The fleet is taken down at the end. tests/unit/plugins/module_utils/slurm/<version>/SOURCES.md
says what each file shows. Not part of any gate: it is how the unit tests' captures were made.
"""

from __future__ import absolute_import, division, print_function

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402
import slurmconf  # noqa: E402

# The fleet of make slurm-fleet (its lines start "slurm-fleet:").
FLEET = fleetlib.SlurmFleet('slurm-fleet', *fleetlib.identity('SLURM_FLEET', 'npsl', '10.236', '.testbed-slurm'))
A, B, HEAD = FLEET.EL, FLEET.UBUNTU, FLEET.HEAD
OUT = None
LOG = []


def note(text):
    line = '{0} {1}'.format(time.strftime('%Y-%m-%dT%H:%M:%S'), text)
    LOG.append(line)
    FLEET.say(text)


def do(command, node=HEAD, check_rc=True):
    note('{0}: {1}'.format(node, command))
    return FLEET.ssh(node, command, check_rc=check_rc)


def save(name, command):
    text = do(command)
    with open(os.path.join(OUT, name + '.txt'), 'w') as f:
        f.write(text)
    note('saved {0}.txt'.format(name))
    return text


def state(node):
    """The node's record; slurmctld restarts on reconfigure (24.11), so a refused answer is asked again."""
    for _attempt in range(30):
        text = FLEET.ssh(HEAD, 'scontrol show node -o {0}'.format(node), check_rc=False)
        record = slurmconf.parse_nodes(text).get(node)
        if record:
            return record
        time.sleep(1)
    raise RuntimeError('scontrol show node {0} gave no record'.format(node))


def wait(what, probe, timeout=240):
    def safe():
        try:
            return probe()
        except RuntimeError:      # slurmctld restarting (reconfigure): ask again
            return False
    got = FLEET.wait_for(what, safe, timeout=timeout)
    note('{0}: {1}'.format(what, 'yes' if got else 'TIMED OUT'))
    return got


def set_conf(**values):
    """Change slurm.conf on every node the same way, then scontrol reconfigure."""
    for name in (HEAD, A, B):
        for key, value in sorted(values.items()):
            do("grep -q '^{0}=' /etc/slurm/slurm.conf && sed -i 's|^{0}=.*|{0}={1}|' /etc/slurm/slurm.conf || "
               "echo '{0}={1}' >> /etc/slurm/slurm.conf".format(key, value), node=name)
    do('scontrol reconfigure')
    for key, value in sorted(values.items()):
        wait('{0}={1} in slurmctld'.format(key, value), lambda: any(
            line.split()[0] == key and line.split('=', 1)[1].strip().split()[0] == str(value).split()[0]
            for line in FLEET.ssh(HEAD, 'scontrol show config', check_rc=False).splitlines()
            if '=' in line and line.split()))
    time.sleep(3)


def testbed(*argv):
    note('testbed.py ' + ' '.join(argv))
    FLEET.testbed(*argv, check=True)


def reboot(node, slow=None):
    """The node's own reboot (systemctl reboot in it), optionally slow (the slow-boot fault)."""
    if slow:
        testbed('fault', node, 'slow-boot', '--value', str(slow))
    before = state(node)['BootTime']
    do('systemctl reboot', node=node, check_rc=False)
    return before


def back(node, before, timeout=300):
    return wait('{0} registered again (BootTime moved from {1})'.format(node, before),
                lambda: state(node)['BootTime'] != before and 'NOT_RESPONDING' not in state(node)['State'] and
                '*' not in state(node)['State'], timeout=timeout)


def resume(node):
    do('scontrol update nodename={0} state=resume'.format(node))
    wait('{0} idle'.format(node), lambda: FLEET.sinfo_states().get(node) == 'idle')


def scenario():
    proc = FLEET.up()
    if proc.returncode:
        raise RuntimeError('testbed.py up failed')
    wait('both nodes idle', lambda: FLEET.sinfo_states() == {A: 'idle', B: 'idle'})
    save('version', 'scontrol version')
    save('show-config', 'scontrol show config')
    save('show-partition', 'scontrol show partition -o')
    save('show-node-idle', 'scontrol show node -o')
    # Hostlists as Slurm writes and reads them.
    save('show-hostlist', 'scontrol show hostlist gpu001,gpu002,gpu003,gpu007,rack1-n01,rack1-n02,rack2-n01')
    save('show-hostnames', "scontrol show hostnames 'gpu[001-003,007],rack[1-2]-n[01-02],b200x'")

    # An undrained node that reboots by itself: "Node unexpectedly rebooted" (ReturnToService=1), on a node
    # that never had a reason (24.11 without accounting storage keeps an old reason, and then writes none).
    before = reboot(B)
    back(B, before)
    wait('{0} down'.format(B), lambda: 'DOWN' in state(B)['State'], timeout=60)
    save('show-node-unexpected-reboot', 'scontrol show node -o {0}'.format(B))
    resume(B)

    # An admin's reason holding key=value text.
    do("scontrol update nodename={0} state=drain reason='admin: ticket=42 disk=bad'".format(B))
    save('show-node-admin-key-value', 'scontrol show node -o {0}'.format(B))
    resume(B)

    # Ours, drained; then a quick reboot by the node itself (shorter than SlurmdTimeout, 300 s by default).
    do('scontrol update nodename={0} state=drain reason=nodeprep:cap1:drain'.format(A))
    save('show-node-drained-ours', 'scontrol show node -o {0}'.format(A))
    do('scontrol update nodename={0} reason=nodeprep:cap1:work'.format(A))
    before = reboot(A)
    back(A, before)
    time.sleep(3)
    save('show-node-ours-quick-reboot', 'scontrol show node -o {0}'.format(A))

    # SlurmdTimeout 10 s and a reboot of 45 s: slurmctld marks the node DOWN (Not responding) while it is off.
    set_conf(SlurmdTimeout=10)
    before = reboot(A, slow=45)
    wait('{0} not responding'.format(A), lambda: 'NOT_RESPONDING' in state(A)['State'] or '*' in state(A)['State'] or
         'Not responding' in state(A).get('Reason', ''), timeout=120)
    save('show-node-ours-not-responding', 'scontrol show node -o {0}'.format(A))
    back(A, before)
    time.sleep(3)
    save('show-node-ours-slow-reboot', 'scontrol show node -o {0}'.format(A))
    testbed('heal', A, 'slow-boot')
    resume(A)
    save('show-node-resumed-ours', 'scontrol show node -o {0}'.format(A))

    # An admin's drain, rebooted for longer than SlurmdTimeout (a held node under include_held).
    do("scontrol update nodename={0} state=drain reason='admin: bad fan'".format(B))
    before = reboot(B, slow=45)
    back(B, before)
    time.sleep(3)
    save('show-node-admin-slow-reboot', 'scontrol show node -o {0}'.format(B))
    testbed('heal', B, 'slow-boot')
    resume(B)

    set_conf(SlurmdTimeout=300)

    # Our Slurm reboot (scontrol reboot nextstate=DOWN), the node off for 30 s: issued, then complete.
    do('scontrol update nodename={0} state=drain reason=nodeprep:cap2:drain'.format(A))
    testbed('fault', A, 'slow-boot', '--value', '30')
    before = state(A)['BootTime']
    do('scontrol reboot nextstate=DOWN reason=nodeprep:cap2:reboot {0}'.format(A))
    wait('{0} reboot issued'.format(A), lambda: 'REBOOT_ISSUED' in state(A)['State'], timeout=60)
    save('show-node-reboot-issued', 'scontrol show node -o {0}'.format(A))
    back(A, before)
    wait('{0} reboot complete'.format(A), lambda: 'REBOOT_ISSUED' not in state(A)['State'], timeout=60)
    save('show-node-reboot-complete', 'scontrol show node -o {0}'.format(A))

    # ResumeTimeout 15 s and a Slurm reboot of 45 s: "reboot timed out", then the node registers late.
    set_conf(ResumeTimeout=15)
    testbed('fault', A, 'slow-boot', '--value', '45')
    before = state(A)['BootTime']
    do('scontrol reboot nextstate=DOWN reason=nodeprep:cap3:reboot {0}'.format(A))
    wait('{0} reboot timed out'.format(A), lambda: 'timed out' in state(A).get('Reason', ''), timeout=120)
    save('show-node-reboot-timed-out', 'scontrol show node -o {0}'.format(A))
    back(A, before)
    time.sleep(3)
    save('show-node-after-reboot-timed-out', 'scontrol show node -o {0}'.format(A))
    testbed('heal', A, 'slow-boot')
    set_conf(ResumeTimeout=600)
    resume(A)

    # reboot ASAP on a node running a job, then cancelled.
    job = do("sbatch --parsable -w {0} -J cap --wrap 'sleep 300'".format(B)).strip().split(';')[0]
    wait('job {0} running'.format(job), lambda: do('squeue -h -j {0} -o %T'.format(job)).strip() == 'RUNNING')
    do('scontrol reboot ASAP nextstate=RESUME {0}'.format(B))
    save('show-node-reboot-asap', 'scontrol show node -o {0}'.format(B))
    do('scontrol cancel_reboot {0}'.format(B))
    do('scancel {0}'.format(job))
    wait('{0} idle'.format(B), lambda: FLEET.sinfo_states().get(B) == 'idle', timeout=60)
    save('show-node-after-cancel-reboot-asap', 'scontrol show node -o {0}'.format(B))
    if 'DRAIN' in state(B)['State']:
        resume(B)

    # Jobs on both nodes (one of them on two nodes), one squeue over a hostlist.
    j1 = do("sbatch --parsable -w {0} -J one --wrap 'sleep 300'".format(A)).strip().split(';')[0]
    j2 = do("sbatch --parsable -N 2 -w {0},{1} -J two --wrap 'sleep 300'".format(A, B)).strip().split(';')[0]
    j3 = do("sbatch --parsable -w {0} -J three --exclusive --wrap 'sleep 300'".format(B)).strip().split(';')[0]
    wait('job {0} running'.format(j1), lambda: do('squeue -h -j {0} -o %T'.format(j1)).strip() == 'RUNNING')
    time.sleep(2)
    save('squeue-w-hostlist', "squeue -h -w {0},{1} -o '%i|%T|%u|%N'".format(A, B))
    save('show-node-hostlist-busy', 'scontrol show node -o {0},{1}'.format(A, B))
    do('scancel {0} {1} {2}'.format(j1, j2, j3))
    wait('both idle', lambda: FLEET.sinfo_states() == {A: 'idle', B: 'idle'}, timeout=90)

    # Reservations: an ordinary one and a maintenance one.
    # slurmctld sets the RESERVED and MAINTENANCE flags in its periodic reservation pass (reservation.c
    # set_node_maint_mode), not at once.
    do('scontrol create reservation reservationname=cap starttime=now duration=10 nodes={0} users=root'.format(B))
    wait('{0} RESERVED'.format(B), lambda: 'RESERVED' in state(B)['State'], timeout=150)
    save('show-node-reserved', 'scontrol show node -o {0}'.format(B))
    do('scontrol delete reservationname=cap')
    wait('{0} not RESERVED'.format(B), lambda: 'RESERVED' not in state(B)['State'], timeout=150)
    do('scontrol create reservation reservationname=capm starttime=now duration=10 nodes={0} users=root '
       'flags=maint'.format(B))
    wait('{0} MAINTENANCE'.format(B), lambda: 'MAINT' in state(B)['State'], timeout=150)
    save('show-node-maint', 'scontrol show node -o {0}'.format(B))
    do('scontrol delete reservationname=capm')

    # Power saving configured (programs that do nothing), a node powered down by hand, then up again.
    set_conf(SuspendProgram='/bin/true', ResumeProgram='/bin/true', SuspendTime=3600, SuspendTimeout=20)
    do('scontrol update nodename={0} state=power_down'.format(B))
    save('show-node-powering-down', 'scontrol show node -o {0}'.format(B))
    wait('{0} powered down'.format(B), lambda: 'POWERED_DOWN' in state(B)['State'], timeout=90)
    save('show-node-powered-down', 'scontrol show node -o {0}'.format(B))
    do('scontrol update nodename={0} state=power_up'.format(B))
    # ResumeProgram did nothing: slurmd registering again is the node "powered up".
    do('systemctl restart slurmd', node=B)
    wait('{0} up again'.format(B), lambda: 'POWER' not in state(B)['State'] and FLEET.sinfo_states().get(B) == 'idle',
         timeout=180)


def main():
    global OUT
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    OUT = os.path.abspath(sys.argv[1])
    if not os.path.isdir(OUT):
        os.makedirs(OUT)
    rc = 0
    try:
        scenario()
    except Exception as exc:    # noqa: BLE001 (report, then always take the fleet down)
        note('FAILED: {0}: {1}'.format(type(exc).__name__, exc))
        rc = 1
    finally:
        FLEET.testbed('down')
        with open(os.path.join(OUT, 'captures.log'), 'w') as f:
            f.write('\n'.join(LOG) + '\n')
    return rc


if __name__ == '__main__':
    sys.exit(main())
