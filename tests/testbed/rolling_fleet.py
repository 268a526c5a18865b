# -*- coding: utf-8 -*-
# Copyright (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make rolling-fleet: playbooks/rolling_upgrade.yml on a real Slurm (the simulated fleet), end to end.

Boots a Slurm fleet of its own (head + el9-b200-01 + ubuntu2404-h200-01; TESTBED_PREFIX nprr, TESTBED_SUBNET 10.239,
TESTBED_DIR .testbed-rolling; ROLLING_FLEET_PREFIX, ROLLING_FLEET_SUBNET and ROLLING_FLEET_DIR change them;
ROLLING_FLEET_REUSE=1 uses a fleet already up there and leaves it up). The fresh nodes have no NVIDIA driver, so the
driver plan of both is disruptive (install, nouveau blacklist, reboot). Checks, with the real daemons:

  1. check mode with the roles' default reboot timeout (1800 s > ResumeTimeout 600 s): the plan is printed, the
     run refused by the preflight, and nothing changed in Slurm (no update_node in slurmctld.log) or on the nodes;
  2. a job (sleep 900) on el9; a run with drain timeout 40 s under busy=skip: el9 is drained, not touched, then
     resumed and reported busy with its job id, the job still RUNNING; ubuntu is drained, upgraded (driver loaded,
     it rebooted), verified, resumed: IDLE, no reason;
  3. an admin drains el9 (its job cancelled): the next run skips it (skipped-held), its reason is kept, and no
     `scontrol update` is made;
  4. the admin resumes el9 and a job holds it; a run is killed after its drain; the rerun (another run id) finishes
     el9 without a second drain (one "reason set to: nodeprep:...:drain" in slurmctld.log for that node);
  5. a run on the upgraded fleet asks Slurm nothing (slurm_asked false, no update_node), reports nothing to do;
     sinfo shows both nodes idle and gpufleet.nodeprep.readiness passes on both.

Exit 0 when every check passed. Run as root from the repository root. Takes about 15 minutes on 2 shared cores.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
os.environ['SLURM_FLEET_PREFIX'] = os.environ.get('ROLLING_FLEET_PREFIX') or 'nprr'
os.environ['SLURM_FLEET_SUBNET'] = os.environ.get('ROLLING_FLEET_SUBNET') or '10.239'
os.environ['SLURM_FLEET_DIR'] = os.environ.get('ROLLING_FLEET_DIR') or os.path.join(REPO, '.testbed-rolling')
sys.path.insert(0, HERE)
import slurm_fleet as sf  # noqa: E402  (its helpers, on our prefix)

REUSE = os.environ.get('ROLLING_FLEET_REUSE') == '1'
EL, UB, HEAD = sf.EL, sf.UBUNTU, sf.HEAD
INVENTORY = os.path.join(sf.STATE_DIR, 'inventory.yml')
REPORT = os.path.join(REPO, '.tmp', 'rolling-fleet')
# The Python that runs this script (make: the virtualenv's) has ansible-playbook beside it.
VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))
check, say, head, ssh, timed = sf.check, sf.say, sf.head, sf.ssh, sf.timed


def playbook_env():
    env = dict(sf.ENV)
    purelib = sysconfig.get_paths()['purelib']
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.tmp', 'collections') + ':' + purelib,
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH='false', ANSIBLE_NOCOLOR='1', LC_ALL='C.UTF-8',
               PATH=VENV_BIN + ':' + env.get('PATH', ''))
    return env


def playbook_argv(run_id, *extra, **kw):
    argv = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', INVENTORY,
            os.path.join(REPO, kw.get('playbook', 'playbooks/rolling_upgrade.yml')),
            '-e', 'nodeprep_rolling_hosts=slurm_nodes', '-e', 'nodeprep_rolling_report_dir=' + REPORT,
            '-e', 'nodeprep_rolling_run_id=' + run_id]
    if kw.get('timeouts', True):
        argv += ['-e', 'nodeprep_kernel_reboot_timeout=600', '-e', 'nodeprep_nvidia_driver_reboot_timeout=600']
    return argv + list(extra)


def playbook(label, run_id, *extra, **kw):
    t0 = time.time()
    log = os.path.join(REPORT, '{0}.log'.format(run_id))
    with open(log, 'w') as out:
        proc = subprocess.run(playbook_argv(run_id, *extra, **kw), env=playbook_env(), stdout=out,
                              stderr=subprocess.STDOUT, check=False, cwd=REPO)
    timed('{0} ({1})'.format(label, run_id), t0)
    with open(log) as f:
        text = f.read()
    return proc.returncode, text


def result(run_id):
    path = os.path.join(REPORT, 'result-{0}.json'.format(run_id))
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def updates(node=None):
    """slurmctld's update_node lines (one per state or reason change made with scontrol update)."""
    lines = [line for line in head('cat /var/log/slurm/slurmctld.log').splitlines() if 'update_node:' in line]
    return [line for line in lines if node is None or ' node {0} '.format(node) in line]


def status(node):
    return sf.nodes()[node]


def marker(node):
    return ssh(node, 'cat /var/lib/nodeprep/rolling-state 2>/dev/null || true').strip()


def scenario():
    if not REUSE:
        # Fresh nodes every time: `down` removes the nodes' disks (their overlay upper dirs, slurmctld's state on the
        # head), so a fleet left up by an earlier run (or ROLLING_FLEET_REUSE=1) is never upgraded already.
        t0 = time.time()
        proc = subprocess.run(sf.TESTBED + ['down'], env=sf.ENV, check=False)
        if not check(proc.returncode == 0, 'testbed.py down before up (fresh nodes)'):
            return
        proc = subprocess.run(sf.TESTBED + ['up', '--nodes', '2', '--slurm', '--kinds', sf.KINDS], env=sf.ENV,
                              check=False)
        timed('testbed.py up --slurm', t0)
        if not check(proc.returncode == 0, 'testbed.py up --slurm'):
            return
    if not os.path.isdir(REPORT):
        os.makedirs(REPORT)
    idle = sf.wait_for('both nodes idle', lambda: sf.sinfo_states() == {EL: 'idle', UB: 'idle'} and True)
    if not check(bool(idle), 'sinfo: both nodes idle before the runs', repr(sf.sinfo_states())):
        return

    # 1. check mode, with the default reboot timeouts: plan printed, refused, nothing changed.
    before = updates()
    rc, text = playbook('check mode with the default reboot timeout', 'check1', '--check', timeouts=False)
    check(rc != 0 and 'ResumeTimeout=600 s (slurm.conf) is shorter than the reboot timeout 1800 s' in text,
          'preflight refuses ResumeTimeout 600 s < reboot timeout 1800 s', 'rc={0}'.format(rc))
    check('candidate' in text and 'nvidia_driver' in text, 'check mode prints the plan (candidates, driver work)')
    check(updates() == before, 'check mode: no scontrol update (slurmctld.log)')
    check(marker(EL) == '' and marker(UB) == '', 'check mode: no marker written on the nodes')
    rc, text = playbook('check mode', 'check2', '--check')
    check(rc == 0 and updates() == before and result('check2').get('check_mode') is True,
          'check mode with reboot timeouts 600 s: plan only, rc 0, no scontrol update', 'rc={0}'.format(rc))

    # 2. a long job on el9: drained, not touched, resumed as busy; ubuntu upgraded.
    job = head("sbatch --parsable -w {0} -J long --wrap 'sleep 900'".format(EL)).strip().split(';')[0]
    sf.wait_for('job {0} RUNNING'.format(job), lambda: head("squeue -h -j {0} -o %T".format(job)).strip() == 'RUNNING')
    boot_ub = status(UB)['BootTime']
    rc, text = playbook('rolling run, a busy node', 'run1', '-e', 'nodeprep_rolling_drain_timeout=40')
    got = result('run1').get('nodes', {})
    check(rc == 0, 'run1 finished', text[-1500:])
    check(got.get(EL, {}).get('state') == 'busy' and got.get(EL, {}).get('jobs') == [job],
          '{0} reported busy with job {1}'.format(EL, job), repr(got.get(EL)))
    check(any('nodeprep:run1:drain' in line for line in updates(EL)), '{0} was drained by run1'.format(EL))
    check('DRAIN' not in status(EL)['State'] and 'Reason' not in status(EL) and
          head("squeue -h -j {0} -o %T".format(job)).strip() == 'RUNNING',
          '{0} resumed (State={1}), its job still RUNNING'.format(EL, status(EL)['State']), repr(status(EL)))
    check(ssh(EL, 'test -e /usr/bin/nvidia-smi && echo yes || echo no').strip() == 'no',
          '{0} not touched: no driver installed'.format(EL))
    check(got.get(UB, {}).get('state') == 'resumed', '{0} upgraded, verified, resumed'.format(UB), repr(got.get(UB)))
    check(status(UB)['State'] == 'IDLE' and 'Reason' not in status(UB) and status(UB)['BootTime'] != boot_ub,
          '{0} IDLE, no reason, rebooted (BootTime {1} -> {2})'.format(UB, boot_ub, status(UB)['BootTime']))
    check(marker(UB) == '' and marker(EL) == '', 'markers removed')

    # 3. an admin's drain: skipped, reason kept, no scontrol update.
    head('scancel {0}'.format(job))
    head("scontrol update nodename={0} state=drain reason='admin: bad fan'".format(EL))
    sf.wait_for('{0} drained'.format(EL), lambda: sf.sinfo_states().get(EL) == 'drained')
    before = updates()
    rc, text = playbook('rolling run, an admin-drained node', 'run2')
    got = result('run2').get('nodes', {})
    check(rc == 0 and got.get(EL, {}).get('state') == 'skipped-held', '{0} skipped-held'.format(EL),
          repr(got.get(EL)))
    check(status(EL).get('Reason', '').startswith('admin: bad fan') and 'DRAIN' in status(EL)['State'],
          "{0} keeps the admin's reason: {1}".format(EL, status(EL).get('Reason')))
    check(updates() == before, 'run2: no scontrol update', repr(updates()[len(before):]))

    # 4. killed after the drain, then rerun: no second drain.
    head('scontrol update nodename={0} state=resume'.format(EL))
    sf.wait_for('{0} idle'.format(EL), lambda: sf.sinfo_states().get(EL) == 'idle')
    job = head("sbatch --parsable -w {0} -J short --wrap 'sleep 45'".format(EL)).strip().split(';')[0]
    sf.wait_for('job {0} RUNNING'.format(job), lambda: head("squeue -h -j {0} -o %T".format(job)).strip() == 'RUNNING')
    t0 = time.time()
    with open(os.path.join(REPORT, 'run3.log'), 'w') as out:
        proc = subprocess.Popen(playbook_argv('run3'), env=playbook_env(), stdout=out, stderr=subprocess.STDOUT,
                                cwd=REPO, start_new_session=True)
    drained = sf.wait_for('{0} drained by run3'.format(EL),
                          lambda: status(EL).get('Reason', '').startswith('nodeprep:run3:drain'), timeout=300)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    timed('run3 until its drain, killed', t0)
    check(bool(drained), 'run3 drained {0}, then was killed'.format(EL))
    rc, text = playbook('rerun after the kill', 'run4')
    got = result('run4').get('nodes', {})
    check(rc == 0 and got.get(EL, {}).get('state') == 'resumed', 'run4 finished {0}: resumed'.format(EL),
          repr(got.get(EL)) + text[-1500:])
    drains = [line for line in updates(EL) if 'reason set to: nodeprep:' in line and ':drain' in line]
    check(len([line for line in drains if 'run3' in line]) == 1 and not [line for line in drains if 'run4' in line],
          '{0} drained once (by run3), not again by run4'.format(EL), repr(drains))
    check(ssh(EL, 'test -e /usr/bin/nvidia-smi && echo yes || echo no').strip() == 'yes',
          '{0} has the driver now'.format(EL))

    # 5. on target: Slurm not asked, nothing to do; sinfo idle, readiness passes.
    before = updates()
    rc, text = playbook('rolling run on the upgraded fleet', 'run5')
    got = result('run5')
    check(rc == 0 and got.get('slurm_asked') is False and
          set(n['state'] for n in got.get('nodes', {}).values()) <= set(['on-target', 'in-place']),
          'run5: Slurm not asked, nothing to do', repr(got))
    check(updates() == before, 'run5: no scontrol update')
    check(sf.sinfo_states() == {EL: 'idle', UB: 'idle'}, 'sinfo: both idle at the end', repr(sf.sinfo_states()))
    rc, text = playbook('readiness', 'readiness', '-e', 'nodeprep_hosts=slurm_nodes',
                        '-e', 'nodeprep_readiness_report_dir=' + os.path.join(REPORT, 'readiness'),
                        playbook='playbooks/readiness.yml')
    check(rc == 0, 'readiness passes on both nodes', text[-1500:])

    more_options()


def testbed(*argv):
    proc = subprocess.run(sf.TESTBED + list(argv), env=sf.ENV, check=False)
    return check(proc.returncode == 0, 'testbed.py ' + ' '.join(argv))


def plan_rows(run_id):
    """The plan table a run wrote: {node: {'state', 'batch'}}."""
    path = os.path.join(REPORT, 'plan-{0}.txt'.format(run_id))
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        lines = f.read().splitlines()
    return dict((cells[0], {'state': cells[1], 'batch': cells[2]}) for cells in (line.split() for line in lines[1:])
                if cells)


def reason(node):
    return sf.slurmconf.parse_nodes(head('scontrol show node -o {0}'.format(node)))[node].get('Reason', '')


def ctld_log():
    return head('cat /var/log/slurm/slurmctld.log').splitlines()


def first_line(lines, text):
    return next((i for i, line in enumerate(lines) if text in line), None)


def driver_version(node):
    return ssh(node, 'nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true',
               check_rc=False).strip()


def more_options():
    """The options shown on the fleet on target (580): a branch move to 590 makes both nodes candidates again."""
    move = ('-e', 'nodeprep_nvidia_driver_branch=590')

    # 6. a batch of 100 % with min_available 1: refused before any change, the plan shows both in batch 1.
    before = updates()
    rc, text = playbook('batch 100% and min_available 1', 'refuse1', *(move + (
        '-e', 'nodeprep_rolling_batch=100%', '-e', 'nodeprep_rolling_min_available=1')))
    want = ('batch 1 ({0}, {1}) would leave partition gpu with 0 usable node(s) (none); '
            'nodeprep_rolling_min_available is 1').format(EL, UB)
    check(rc != 0 and want in text, 'min_available 1, batch 100%: refused: ' + want, 'rc={0} '.format(rc) + text[-800:])
    rows = plan_rows('refuse1')
    check(rows.get(EL) == {'state': 'candidate', 'batch': '1'} and rows.get(UB) == {'state': 'candidate', 'batch': '1'},
          'batch 100% of 2 nodes: both in batch 1 (plan table)', repr(rows))
    check(updates() == before, 'refuse1: no scontrol update', repr(updates()[len(before):]))

    # 7. busy=fail: a job on el9 outlives the drain timeout; the run stops, el9 stays drained with our reason.
    job = head("sbatch --parsable -w {0} -J long2 --wrap 'sleep 600'".format(EL)).strip().split(';')[0]
    sf.wait_for('job {0} RUNNING'.format(job), lambda: head("squeue -h -j {0} -o %T".format(job)).strip() == 'RUNNING')
    rc, text = playbook('busy=fail', 'fail1', *(move + (
        '-e', 'nodeprep_rolling_busy=fail', '-e', 'nodeprep_rolling_drain_timeout=20')))
    check(rc != 0 and 'still runs job(s) {0} after 20 s'.format(job) in text,
          'busy=fail: the run stops on {0} (job {1})'.format(EL, job), 'rc={0} '.format(rc) + text[-800:])
    st = status(EL)
    check('DRAIN' in st['State'] and R_strip(st.get('Reason')) == 'nodeprep:fail1:drain' and
          head("squeue -h -j {0} -o %T".format(job)).strip() == 'RUNNING',
          '{0} stays drained (State={1}, Reason={2}), its job RUNNING'.format(EL, st['State'], st.get('Reason')))
    check(not [line for line in updates(UB) if 'fail1' in line] and status(UB)['State'] == 'IDLE',
          '{0} not drained by fail1 (the run stopped before its batch): IDLE'.format(UB), repr(status(UB)))

    # The admin takes el9 over (job cancelled, their own reason): held from now on.
    head('scancel {0}'.format(job))
    head("scontrol update nodename={0} reason='admin: firmware check'".format(EL))
    sf.wait_for('{0} drained'.format(EL), lambda: sf.sinfo_states().get(EL) == 'drained')
    check(R_strip(reason(EL)) == 'admin: firmware check', "{0} has the admin's reason".format(EL), reason(EL))

    # 8. one run: batch 2, include_held, busy=wait, reboot=slurm, and a GPU fault on ubuntu (gpu.health fails).
    job = head("sbatch --parsable -w {0} -J short2 --wrap 'sleep 45'".format(UB)).strip().split(';')[0]
    sf.wait_for('job {0} RUNNING'.format(job), lambda: head("squeue -h -j {0} -o %T".format(job)).strip() == 'RUNNING')
    testbed('fault', UB, 'remapped-rows')
    boot = dict((n, status(n)['BootTime']) for n in (EL, UB))
    before_lines = len(ctld_log())
    rc, text = playbook('batch 2, include_held, busy=wait, reboot=slurm, a GPU fault', 'big1', *(move + (
        '-e', 'nodeprep_rolling_batch=2', '-e', 'nodeprep_rolling_include_held=true',
        '-e', 'nodeprep_rolling_busy=wait', '-e', 'nodeprep_rolling_drain_timeout=10',
        '-e', 'nodeprep_rolling_reboot=slurm')))
    got = result('big1').get('nodes', {})
    head('scontrol show node -o > /tmp/show-node-after-big1.txt')
    with open(os.path.join(REPORT, 'show-node-after-big1.txt'), 'w') as f:
        f.write(head('cat /tmp/show-node-after-big1.txt'))
    log = ctld_log()[before_lines:]
    check(rc == 0, 'big1 finished (1 node failed, nodeprep_rolling_max_failed 1)', text[-1500:])
    rows = plan_rows('big1')
    check(rows.get(EL, {}).get('batch') == '1' and rows.get(UB, {}).get('batch') == '1',
          'batch 2: both nodes in batch 1 (plan table)', repr(rows))
    # include_held: el9 worked on (590, rebooted by the roles), its admin state and reason kept, never resumed.
    st = status(EL)
    check(got.get(EL, {}).get('state') == 'done', '{0} (held) worked on: done'.format(EL), repr(got.get(EL)))
    check(driver_version(EL).startswith('590.') and st['BootTime'] != boot[EL],
          '{0}: driver {1}, rebooted (BootTime {2} -> {3})'.format(EL, driver_version(EL), boot[EL], st['BootTime']))
    check('DRAIN' in st['State'] and R_strip(st.get('Reason')) == 'admin: firmware check',
          "{0} keeps the admin's drain: State={1} Reason={2}".format(EL, st['State'], st.get('Reason')))
    check(not [line for line in updates(EL) if 'big1' in line] and
          first_line(log, 'reboot request queued for nodes {0}'.format(EL)) is None,
          '{0}: no scontrol update and no scontrol reboot by big1'.format(EL))
    # busy=wait: ubuntu's job ran to its end (past the 10 s drain timeout) before Slurm was asked to reboot it.
    job_state = sf.slurmconf.parse_key_values(head('scontrol show job -o {0}'.format(job)))
    done_at = first_line(log, 'JobId={0} done'.format(job))
    asked_at = first_line(log, 'reboot request queued for nodes {0}'.format(UB))
    check(job_state.get('JobState') == 'COMPLETED' and done_at is not None and asked_at is not None and
          done_at < asked_at, 'busy=wait: job {0} COMPLETED (JobState={1}) before the reboot of {2} was asked'.format(
              job, job_state.get('JobState'), UB), 'done line {0}, reboot line {1}'.format(done_at, asked_at))
    drains = [line for line in updates(UB) if 'nodeprep:big1:drain' in line]
    check(len(drains) == 1, '{0} drained once by big1'.format(UB), repr(drains))
    # reboot=slurm: scontrol reboot through slurmctld and slurmd's RebootProgram, the node back DOWN, then verified.
    st = status(UB)
    check(asked_at is not None and first_line(log, 'node {0} returned to service'.format(UB)) is not None and
          st['BootTime'] != boot[UB] and driver_version(UB).startswith('590.'),
          '{0} rebooted by Slurm (reboot request queued, returned to service, BootTime {1} -> {2}), driver {3}'.format(
              UB, boot[UB], st['BootTime'], driver_version(UB)))
    # verify-failed: the node stays out of service with the failed checks in its reason.
    ours = R_strip(st.get('Reason'))
    check(got.get(UB, {}).get('state') == 'verify-failed' and 'gpu.health' in got.get(UB, {}).get('failed_checks', [])
          and ours.startswith('nodeprep:big1:verify-failed:') and 'gpu.health' in ours.split(':')[-1].split(',')
          and ('DOWN' in st['State'] or 'DRAIN' in st['State']),
          '{0} verify-failed, stays out: State={1} Reason={2}'.format(UB, st['State'], st.get('Reason')),
          repr(got.get(UB)))

    # 9. the failure limit: a rerun with max_failed 0 verifies ubuntu only, fails again and stops the run.
    before = updates()
    before_lines = len(ctld_log())
    rc, text = playbook('verify-failed again, nodeprep_rolling_max_failed 0', 'stop1', *(move + (
        '-e', 'nodeprep_rolling_max_failed=0', '-e', 'nodeprep_rolling_reboot=slurm')))
    new = updates()[len(before):]
    check(rc != 0 and 'more than nodeprep_rolling_max_failed (0): the run stops' in text,
          'stop1: 1 node failed > nodeprep_rolling_max_failed 0: the run stops', 'rc={0} '.format(rc) + text[-800:])
    check(all('reason set to: nodeprep:stop1:' in line for line in new) and
          first_line(ctld_log()[before_lines:], 'reboot request queued') is None and
          R_strip(reason(UB)).startswith('nodeprep:stop1:verify-failed:'),
          '{0} verified only (no drain, no reboot, no resume), reason {1}'.format(UB, reason(UB)), repr(new))

    # 10. healed: verify only, resumed; the admin resumes el9 themselves.
    testbed('heal', UB, 'remapped-rows')
    rc, text = playbook('healed: verify only, resume', 'heal1', *move)
    got = result('heal1').get('nodes', {})
    check(rc == 0 and got.get(UB, {}).get('state') == 'resumed' and status(UB)['State'] == 'IDLE' and
          'Reason' not in status(UB), '{0} verified and resumed: IDLE, no reason'.format(UB),
          repr(got.get(UB)) + repr(status(UB)) + text[-800:])
    check(got.get(EL, {}).get('state') == 'skipped-held' or got.get(EL, {}).get('state') == 'on-target',
          '{0} (the admin\'s) left alone by heal1: {1}'.format(EL, got.get(EL, {}).get('state')))
    head('scontrol update nodename={0} state=resume'.format(EL))
    idle = sf.wait_for('both idle', lambda: sf.sinfo_states() == {EL: 'idle', UB: 'idle'})
    check(bool(idle), 'sinfo: both idle at the very end', repr(sf.sinfo_states()))


def R_strip(text):
    """A reason without the " [user@time]" Slurm appends."""
    text = text or ''
    return text.rsplit(' [', 1)[0] if text.endswith(']') else text


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
        if not REUSE:
            proc = subprocess.run(sf.TESTBED + ['down'], env=sf.ENV, check=False)
            check(proc.returncode == 0, 'testbed.py down')
    timed('make rolling-fleet in all', t0)
    for label, seconds in sf.TIMES:
        say('time: {0:6.1f} s  {1}'.format(seconds, label))
    if sf.FAILED:
        say('{0} check(s) failed: {1}'.format(len(sf.FAILED), '; '.join(sf.FAILED)))
        return 1
    say('all checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
