# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make memlock-fleet: memlock as a job sees it, on a real Slurm (the simulated fleet), end to end.

Boots a Slurm fleet of its own (head + el9-b200-01 + ubuntu2404-h200-01; TESTBED_PREFIX npmf, TESTBED_SUBNET 10.241,
TESTBED_DIR .testbed-memlock; MEMLOCK_FLEET_PREFIX, MEMLOCK_FLEET_SUBNET and MEMLOCK_FLEET_DIR change them;
MEMLOCK_FLEET_REUSE=1 uses a fleet already up there and leaves it up). It reads only what the Slurm daemons and the
nodes say, whatever Slurm version the fleet runs (slurm.conf lines are added and removed by name, jobs are plain
``srun``). With the memlock role converged on both nodes, checks:

  1. the role's verification and readiness (memlock.users, memlock.services) pass, and a job started with srun has
     exactly the limit the memlock plan says Slurm jobs get;
  2. fault ``limits-site-file`` (a later limits.d file with a lower ``* hard memlock``): a login of an ordinary user
     (``su - <user>``) gets the lower limit; readiness fails memlock.users naming the file, the role's verification
     fails naming it and changes nothing; healed: passes;
  3. slurm.conf without PropagateResourceLimitsExcept=MEMLOCK (Slurm's default, ALL): a job gets the soft limit of
     the shell it was submitted from (``ulimit -S -l`` lowered on the head); readiness fails memlock.services naming
     both fixes; restored: passes;
  4. a site drop-in ``LimitMEMLOCK=64K`` for slurmd.service on el9: the job gets 64 KiB, as the plan says;
     readiness fails memlock.services on el9 only, naming slurmd and LimitMEMLOCK=infinity; removed: passes.

Exit 0 when every check passed; the fleet is taken down unless reused. Run as root from the repository root.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402

# Its lines start "slurm-fleet:", as they always have.
FLEET = fleetlib.SlurmFleet('slurm-fleet', *fleetlib.identity('MEMLOCK_FLEET', 'npmf', '10.241', '.testbed-memlock'))
REUSE = os.environ.get('MEMLOCK_FLEET_REUSE') == '1'
EL, UB, HEAD = FLEET.EL, FLEET.UBUNTU, FLEET.HEAD
NODES = (EL, UB)
INVENTORY = FLEET.inventory
REPORT = os.path.join(fleetlib.REPO, '.tmp', 'memlock-fleet')
SLURM_CONF = '/etc/slurm/slurm.conf'
EXCEPT = 'PropagateResourceLimitsExcept=MEMLOCK'
SITE_DROPIN = '/etc/systemd/system/slurmd.service.d/99-site.conf'
USER = 'jobuser'
check, say, head, ssh, timed = FLEET.check, FLEET.say, FLEET.head, FLEET.ssh, FLEET.timed
testbed_ok = FLEET.testbed_ok


def playbook(label, name, *extra):
    t0 = time.time()
    rc, text, _seconds = FLEET.playbook(os.path.join(REPORT, '{0}.log'.format(label)), name,
                                        '-e', 'nodeprep_hosts=slurm_nodes', *extra)
    timed('{0} ({1})'.format(name, label), t0)
    return rc, text


def readiness(label):
    """{node: {check id: (status, observed)}} of the memlock checks, from playbooks/readiness.yml's report."""
    report = os.path.join(REPORT, label)
    playbook('readiness-' + label, 'readiness.yml', '-e', 'nodeprep_readiness_fail=false',
             '-e', 'nodeprep_readiness_report_dir=' + report)
    with open(os.path.join(report, 'report.json')) as f:
        hosts = json.load(f)['hosts']
    return dict((node, dict((c['id'], (c['status'], c['observed'])) for c in hosts.get(node, {}).get('checks', [])
                            if c['id'].startswith('memlock.'))) for node in NODES)


def job_limit(node, submit_soft=None):
    """``soft/hard`` KiB as a job started with srun from the head prints them (ulimit -l; ulimit -Hl)."""
    shell = '' if submit_soft is None else 'ulimit -S -l {0}; '.format(submit_soft)
    out = head("{0}srun -w {1} sh -c 'ulimit -l; ulimit -Hl'".format(shell, node)).split()
    return '/'.join(out)


def services_words(result):
    """The 'slurm jobs S/H' part of memlock.services' observed words."""
    words = [part for part in result[1].split(';')[0].split(', ') if part.startswith('slurm jobs ')]
    return words[0][len('slurm jobs '):] if words else None


def inventory_value():
    """nodeprep_memlock_value of the fleet's inventory (testbed.py up sets it on a machine that caps memlock)."""
    with open(INVENTORY) as f:
        for line in f:
            if line.strip().startswith('nodeprep_memlock_value:'):
                return int(line.split(':', 1)[1])
    return None


def slurm_conf(present):
    """Add or remove PropagateResourceLimitsExcept=MEMLOCK on every node of the fleet, then scontrol reconfigure."""
    for node in (HEAD,) + NODES:
        ssh(node, "sed -i '/^PropagateResourceLimitsExcept=/d' {0}{1}".format(
            SLURM_CONF, '; echo {0} >> {1}'.format(EXCEPT, SLURM_CONF) if present else ''))
    head('scontrol reconfigure')
    want = 'MEMLOCK' if present else '(null)'
    return FLEET.wait_for('PropagateResourceLimitsExcept = {0} in slurmctld'.format(want), lambda: all(
        ssh(node, 'scontrol show config').count('PropagateResourceLimitsExcept = ' + want) for node in NODES))


def scenario():
    if not REUSE and not FLEET.fresh_up(FLEET.up, 'testbed.py up --slurm', down_what='testbed.py down before up'):
        return
    if not os.path.isdir(REPORT):
        os.makedirs(REPORT)
    idle = FLEET.wait_for('both nodes idle', lambda: FLEET.sinfo_states() == {EL: 'idle', UB: 'idle'} and True)
    if not check(bool(idle), 'sinfo: both nodes idle', repr(FLEET.sinfo_states())):
        return
    value = inventory_value()
    say('nodeprep_memlock_value: {0}'.format(value if value else 'unlimited (the default)'))
    for node in NODES:
        ssh(node, 'id {0} >/dev/null 2>&1 || useradd -m {0}'.format(USER))

    # 1. converged: the role verifies, readiness passes, and a job has what the plan says it has.
    rc, text = playbook('converge', 'memlock.yml')
    check(rc == 0, 'the memlock role converges and verifies on both nodes', text[-1500:])
    got = readiness('converged')
    for node in NODES:
        check(got[node].get('memlock.users', ('',))[0] == 'pass' and got[node].get('memlock.services', ('',))[0] ==
              'pass', '{0}: memlock.users and memlock.services pass'.format(node), repr(got[node]))
        predicted = services_words(got[node]['memlock.services'])
        check(predicted is not None and predicted == job_limit(node),
              '{0}: an srun job has {1}, what the plan says Slurm jobs get'.format(node, job_limit(node)),
              'plan: {0!r}'.format(predicted))

    # 2. a site file read after the role's own lowers every ordinary user: drift no run fixes, named.
    low = str(value // 2) if value else '65536'
    for node in NODES:
        testbed_ok('fault', node, 'limits-site-file', '--value', low)
    for node in NODES:
        login = ssh(node, "su - {0} -c 'ulimit -Hl'".format(USER)).strip()
        check(login == low, '{0}: a login of {1} gets the site file\'s hard limit {2}'.format(node, USER, low), login)
    got = readiness('site-file')
    for node in NODES:
        status, observed = got[node].get('memlock.users', ('', ''))
        check(status == 'fail' and 'any other user (*): memlock soft {0}, hard {0}'.format(low) in observed and
              '/etc/security/limits.d/99-site.conf:2 wins over /etc/security/limits.d/90-nodeprep-memlock.conf'
              in observed, '{0}: memlock.users fails naming 99-site.conf'.format(node), observed)
        check(got[node].get('memlock.services', ('',))[0] == 'pass', '{0}: memlock.services still passes'.format(node))
    rc, text = playbook('site-file-role', 'memlock.yml')
    check(rc != 0 and '99-site.conf:2 wins over' in text and 'changed=0' in text and 'failed=1' in text,
          'the role\'s verification fails naming the file, changing nothing', text[-1500:])
    for node in NODES:
        testbed_ok('heal', node, 'limits-site-file')
    got = readiness('site-file-healed')
    check(all(got[n].get('memlock.users', ('',))[0] == 'pass' for n in NODES), 'healed: memlock.users passes',
          repr(got))

    # 3. Slurm's default propagation: the job gets the submitting shell's soft limit.
    check(bool(slurm_conf(False)), 'slurm.conf without {0} on every node (scontrol reconfigure)'.format(EXCEPT))
    shell_soft = (value // 4) if value else 1024
    job = job_limit(EL, shell_soft)
    check(job.split('/', maxsplit=1)[0] == str(shell_soft), 'a job submitted from a shell with soft {0} gets soft {0} '
          '(propagated)'.format(shell_soft), job)
    got = readiness('propagated')
    for node in NODES:
        status, observed = got[node].get('memlock.services', ('', ''))
        check(status == 'fail' and 'PropagateResourceLimits=ALL propagates MEMLOCK' in observed and
              'set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf' in observed and
              'raise the login nodes\' memlock' in observed,
              '{0}: memlock.services fails naming both fixes'.format(node), observed)
    check(bool(slurm_conf(True)), '{0} back on every node'.format(EXCEPT))
    job = job_limit(EL, shell_soft)
    check(job.split('/', maxsplit=1)[0] != str(shell_soft), 'with {0} the shell\'s soft limit is not propagated'.format(EXCEPT),
          job)

    # 4. slurmd held low by a site drop-in: the job gets slurmd's limit.
    ssh(EL, 'mkdir -p {0} && printf "[Service]\\nLimitMEMLOCK=64K\\n" > {1} && systemctl daemon-reload && '
            'systemctl restart slurmd'.format(os.path.dirname(SITE_DROPIN), SITE_DROPIN))
    FLEET.wait_for('{0} idle after the slurmd restart'.format(EL), lambda: FLEET.sinfo_states().get(EL) == 'idle')
    job = job_limit(EL)
    got = readiness('slurmd-64k')
    status, observed = got[EL].get('memlock.services', ('', ''))
    check(job == '64/64' and services_words(got[EL]['memlock.services']) == '64/64',
          '{0}: a job gets 64/64 KiB, as the plan says'.format(EL), '{0}; {1}'.format(job, observed))
    check(status == 'fail' and 'slurmd (pid ' in observed and 'runs with memlock soft 64, hard 64' in observed and
          'give slurmd.service LimitMEMLOCK=infinity' in observed,
          '{0}: memlock.services fails naming slurmd and LimitMEMLOCK=infinity'.format(EL), observed)
    check(got[UB].get('memlock.services', ('',))[0] == 'pass', '{0}: memlock.services passes'.format(UB),
          repr(got[UB]))
    ssh(EL, 'rm -f {0} && systemctl daemon-reload && systemctl restart slurmd'.format(SITE_DROPIN))
    FLEET.wait_for('{0} idle after the slurmd restart'.format(EL), lambda: FLEET.sinfo_states().get(EL) == 'idle')
    got = readiness('slurmd-restored')
    check(all(got[n].get('memlock.services', ('',))[0] == 'pass' for n in NODES),
          'drop-in removed: memlock.services passes', repr(got))


def main():
    return FLEET.main(scenario, 'memlock-fleet', down=not REUSE)


if __name__ == '__main__':
    sys.exit(main())
