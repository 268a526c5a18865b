# -*- coding: utf-8 -*-
# Copyright (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make rolling-fleet: playbooks/rolling_upgrade.yml on a real Slurm (the simulated fleet), end to end.

Boots a Slurm fleet of its own (head + el9-b200-01 + ubuntu2404-h200-01; TESTBED_PREFIX nprr, TESTBED_SUBNET 10.239,
TESTBED_DIR .testbed-rolling; ROLLING_FLEET_PREFIX, ROLLING_FLEET_SUBNET and ROLLING_FLEET_DIR change them;
ROLLING_FLEET_REUSE=1 uses a fleet already up there and leaves it up; without it the fleet is taken down first, so
the nodes are always fresh), with the Slurm TESTBED_SLURM_VERSION names (24.11 by default, or 22.05); checks that
differ between the two say so. The fresh nodes have no NVIDIA driver, so the driver plan of both is disruptive
(install, nouveau blacklist, reboot). Checks, with the real daemons:

  1. check mode with the roles' default reboot timeout (1800 s) and Slurm reboots: refused (ResumeTimeout 600 s),
     nothing changed (no update_node in slurmctld.log, no marker); the same with the roles' reboots: not refused (our
     own nodes are resumed whatever SlurmdTimeout); a batch of a non-ASCII digit and a slice of an AWX sliced job:
     refused, clear messages, nothing changed; check mode with batch 50%: one node a batch; batch 100% with
     min_available 1: refused, nothing changed;
  2. a job (sleep 900) on el9; a run with batch 2 and drain timeout 40 s under busy=skip: both nodes drained by one
     scontrol update before any work; el9 not touched, resumed and reported busy with its job id, the job still
     RUNNING; ubuntu upgraded (driver loaded, it rebooted), verified, resumed: IDLE, no reason of ours in force; the
     lock given back; then busy=fail: the run stops on el9, which stays drained with our reason, its job RUNNING;
  3. an admin drains el9 (its job cancelled): the next run skips it (skipped-held), its reason is kept, and no
     `scontrol update` is made; include_held with 600 s reboot timeouts > SlurmdTimeout 300 s is refused on 24.11
     (not on 22.05); with 300 s (and reboot=slurm) el9 is worked on, rebooted by the roles, and keeps the admin's
     drain and reason (no scontrol update, no scontrol reboot);
  4. the admin resumes el9; a branch move to 590 for el9 only (host_vars; the fleet's apt packages cannot move an
     Ubuntu node between branches); a job holds it; a run is killed after its drain; a GPU fault (remapped rows
     pending); the rerun (reboot=slurm, busy=wait, drain timeout 10 s) takes over the lock the killed run left, a
     second run is refused naming it, the rerun is still waiting when the drain timeout has passed, lets the job
     end, drains nothing again, has Slurm reboot el9 (scontrol reboot nextstate=DOWN: "reboot request queued",
     "returned to service", a new BootTime, driver 590) and the verification fails: DOWN, reason
     nodeprep:run4:verify-failed:...gpu.remapped_rows...; the lock given back;
  5. a rerun with max_failed 0 verifies el9 only, fails again and stops the run (reason updates only);
  6. healed: the next run verifies el9 only and resumes it: IDLE;
  8. SlurmdTimeout=60, el9 off for 150 s at each reboot (slow-boot), a branch move 590 -> 580 rebooted by the roles:
     slurmctld sets el9 DOWN while it is off ("not responding, setting DOWN"), the run still resumes it: driver 580,
     IDLE, result resumed;
  7. a run on the upgraded fleet asks Slurm nothing (slurm_asked false, no update_node), reports nothing to do;
     sinfo shows both nodes idle and gpufleet.nodeprep.readiness passes on both;
  9. readiness's verdict in Slurm: with rows pending remapping on el9, report (default) changes nothing; drain
     drains el9 with nodeprep:health:<its failed checks> and leaves ubuntu; a bad value is refused naming report,
     drain; an admin-drained failing ubuntu keeps the admin's reason; after the heal the next run resumes el9 only.

Exit 0 when every check passed. Run as root from the repository root. Takes 15 to 60 minutes on 2 shared cores,
as loaded by the others.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402

# Its lines start "slurm-fleet:", as they always have.
FLEET = fleetlib.SlurmFleet('slurm-fleet', *fleetlib.identity('ROLLING_FLEET', 'nprr', '10.239', '.testbed-rolling'))
REUSE = os.environ.get('ROLLING_FLEET_REUSE') == '1'
EL, UB, HEAD = FLEET.EL, FLEET.UBUNTU, FLEET.HEAD
INVENTORY = FLEET.inventory
REPORT = os.path.join(fleetlib.REPO, '.tmp', 'rolling-fleet')
check, say, head, ssh, timed = FLEET.check, FLEET.say, FLEET.head, FLEET.ssh, FLEET.timed
wait_for, sinfo_states = FLEET.wait_for, FLEET.sinfo_states


def options(run_id, *extra, **kw):
    """The rolling run's extra variables, then ``extra``; ``timeouts``: the roles' reboot timeouts of 600 s."""
    argv = ['-e', 'nodeprep_rolling_hosts=slurm_nodes', '-e', 'nodeprep_rolling_report_dir=' + REPORT,
            '-e', 'nodeprep_rolling_run_id=' + run_id]
    if kw.get('timeouts', True):
        argv += ['-e', 'nodeprep_kernel_reboot_timeout=600', '-e', 'nodeprep_nvidia_driver_reboot_timeout=600']
    return argv + list(extra)


def playbook(label, run_id, *extra, **kw):
    t0 = time.time()
    rc, text, _seconds = FLEET.playbook(os.path.join(REPORT, '{0}.log'.format(run_id)),
                                        kw.get('playbook', 'rolling_upgrade.yml'), *options(run_id, *extra, **kw))
    timed('{0} ({1})'.format(label, run_id), t0)
    return rc, text


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
    return FLEET.nodes()[node]


def marker(node):
    return ssh(node, 'cat /var/lib/nodeprep/rolling-state 2>/dev/null || true').strip()


def host_vars(node, values=None):
    """Write (or, with None, remove) the host_vars file of a node beside the fleet's inventory."""
    path = os.path.join(FLEET.state_dir, 'host_vars', node + '.yml')
    if values is None:
        if os.path.exists(path):
            os.unlink(path)
        return
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path, 'w') as f:
        f.write('---\n' + ''.join('{0}: {1}\n'.format(k, json.dumps(v)) for k, v in sorted(values.items())))


testbed = FLEET.testbed_ok


def plan_rows(run_id):
    """The plan table a run wrote: {node: {'state', 'batch'}}."""
    path = os.path.join(REPORT, 'plan-{0}.txt'.format(run_id))
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        lines = f.read().splitlines()
    return dict((cells[0], {'state': cells[1], 'batch': cells[2]}) for cells in (line.split() for line in lines[1:])
                if cells)


def strip(text):
    """A reason without the " [user@time]" Slurm appends."""
    text = text or ''
    return text.rsplit(' [', 1)[0] if text.endswith(']') else text


def cleared(node, stale):
    """After our resume the node has no reason on 22.05; Slurm >= 23.11 without accounting storage keeps the last
    one (the fleet's case, slurm_fleet.KEEPS_REASON): then it must be exactly ``stale``, ours and left over."""
    got = status(node).get('Reason')
    if FLEET.keeps_reason:
        return strip(got) == stale
    return got is None


def lock_target():
    """The cluster's lock on the head (rolling_slurm op=lock), '' when there is none."""
    return head('readlink /var/lib/nodeprep/rolling-{0}.lock || true'.format(FLEET.prefix.lower())).strip()


def set_slurmd_timeout(seconds):
    for name in (HEAD, EL, UB):
        ssh(name, "sed -i '/^SlurmdTimeout=/d' /etc/slurm/slurm.conf && echo 'SlurmdTimeout={0}' >> "
                  "/etc/slurm/slurm.conf".format(seconds))
    head('scontrol reconfigure')
    return wait_for('SlurmdTimeout={0} in slurmctld'.format(seconds), lambda: ssh(
        HEAD, "scontrol show config | awk '$1 == \"SlurmdTimeout\" {print $3}'", check_rc=False).strip()
        == str(seconds))


def ctld_log():
    return head('cat /var/log/slurm/slurmctld.log').splitlines()


def first_line(lines, text):
    return next((i for i, line in enumerate(lines) if text in line), None)


def driver_version(node):
    return ssh(node, 'nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true',
               check_rc=False).strip()


def job_state(job):
    return head("squeue -h -j {0} -o %T 2>/dev/null || true".format(job)).strip()


def submit(node, name, seconds):
    job = head("sbatch --parsable -w {0} -J {1} --wrap 'sleep {2}'".format(node, name, seconds)).strip().split(';')[0]
    wait_for('job {0} RUNNING'.format(job), lambda: job_state(job) == 'RUNNING')
    return job


def start_playbook(run_id, *extra):
    out = open(os.path.join(REPORT, '{0}.log'.format(run_id)), 'w')
    proc = subprocess.Popen(FLEET.playbook_argv('rolling_upgrade.yml', *options(run_id, *extra)),
                            env=FLEET.playbook_env(), stdout=out, stderr=subprocess.STDOUT, cwd=fleetlib.REPO,
                            start_new_session=True)
    return proc, out


def scenario():
    host_vars(EL)
    # Fresh nodes every time: `down` removes the nodes' disks (their overlay upper dirs, slurmctld's state on the
    # head), so a fleet left up by an earlier run (or ROLLING_FLEET_REUSE=1) is never upgraded already.
    if not REUSE and not FLEET.fresh_up(FLEET.up, 'testbed.py up --slurm'):
        return
    if not os.path.isdir(REPORT):
        os.makedirs(REPORT)
    idle = wait_for('both nodes idle', lambda: sinfo_states() == {EL: 'idle', UB: 'idle'} and True)
    if not check(bool(idle), 'sinfo: both nodes idle before the runs', repr(sinfo_states())):
        return

    # 1. check mode, with the default reboot timeouts: a Slurm reboot is refused (ResumeTimeout), plan printed,
    # nothing changed; the roles' reboot of our own nodes is not (SlurmdTimeout loses none of them).
    before = updates()
    rc, text = playbook('check mode with the default reboot timeout, Slurm reboots', 'check1', '--check',
                        '-e', 'nodeprep_rolling_reboot=slurm', timeouts=False)
    check(rc != 0 and 'ResumeTimeout=600 s (slurm.conf) is shorter than the reboot timeout 1800 s' in text,
          'preflight refuses ResumeTimeout 600 s < reboot timeout 1800 s for Slurm reboots', 'rc={0}'.format(rc))
    check('candidate' in text and 'nvidia_driver' in text, 'check mode prints the plan (candidates, driver work)')
    check(updates() == before, 'check mode: no scontrol update (slurmctld.log)')
    check(marker(EL) == '' and marker(UB) == '', 'check mode: no marker written on the nodes')
    rc, text = playbook('check mode with the default reboot timeout, reboots by the roles', 'check1r', '--check',
                        timeouts=False)
    check(rc == 0 and 'refused' not in text and updates() == before and lock_target() == '',
          'roles reboot 1800 s > SlurmdTimeout 300 s of our own nodes: not refused; check mode takes no lock',
          'rc={0} '.format(rc) + text[-800:])
    # Settings are typed once: strings behave as the typed values, bad ones are refused before anything.
    rc, text = playbook('a batch of a non-ASCII digit', 'typed1', '--check', '-e', 'nodeprep_rolling_batch=\u00b2')
    check(rc != 0 and "nodeprep_rolling_batch: '\u00b2' is not allowed" in text and updates() == before,
          'nodeprep_rolling_batch=\u00b2: a clear error, nothing changed', text[-600:])
    rc, text = playbook('a sliced AWX job', 'slice1', '--check', '-e', 'awx_workflow_job_id=12',
                        '-e', 'awx_workflow_job_name=rolling', '-e', 'awx_job_template_name=rolling')
    check(rc != 0 and 'run the rolling job unsliced' in text and updates() == before,
          'a slice of an AWX sliced job is refused', text[-600:])
    rc, text = playbook('check mode, batch 50%', 'check2', '--check', '-e', 'nodeprep_rolling_batch=50%')
    check(rc == 0 and updates() == before and result('check2').get('check_mode') is True,
          'check mode with reboot timeouts 600 s: plan only, rc 0, no scontrol update', 'rc={0}'.format(rc))
    rows = plan_rows('check2')
    check(rows.get(EL) == {'state': 'candidate', 'batch': '1'} and rows.get(UB) == {'state': 'candidate', 'batch': '2'},
          'batch 50% of 2 candidates: one node a batch (plan table)', repr(rows))
    # min_available: a batch of 100 % would leave the partition empty; refused before any change.
    rc, text = playbook('batch 100%, min_available 1', 'refuse1', '-e', 'nodeprep_rolling_batch=100%',
                        '-e', 'nodeprep_rolling_min_available=1')
    want = ('batch 1 ({0}, {1}) would leave partition gpu with 0 usable node(s) (none); '
            'nodeprep_rolling_min_available is 1').format(EL, UB)
    check(rc != 0 and want in text, 'min_available 1, batch 100%: refused: ' + want, 'rc={0} '.format(rc) + text[-800:])
    rows = plan_rows('refuse1')
    check(rows.get(EL, {}).get('batch') == '1' and rows.get(UB, {}).get('batch') == '1',
          'batch 100%: both nodes in batch 1 (plan table)', repr(rows))
    check(updates() == before and marker(EL) == '' and marker(UB) == '',
          'refuse1: no scontrol update, no marker', repr(updates()[len(before):]))

    # 2. batch 2 with a long job on el9: both drained in one scontrol update; el9 not touched, resumed as busy;
    # ubuntu upgraded.
    job = submit(EL, 'long', 900)
    boot_ub = status(UB)['BootTime']
    rc, text = playbook('rolling run, batch 2, a busy node', 'run1', '-e', 'nodeprep_rolling_drain_timeout=40',
                        '-e', 'nodeprep_rolling_batch=2')
    got = result('run1').get('nodes', {})
    check(rc == 0, 'run1 finished', text[-1500:])
    rows = plan_rows('run1')
    check(rows.get(EL, {}).get('batch') == '1' and rows.get(UB, {}).get('batch') == '1',
          'batch 2: both nodes in batch 1 (plan table)', repr(rows))
    drains = [line for line in updates() if 'reason set to: nodeprep:run1:drain' in line]
    works = [line for line in updates() if 'reason set to: nodeprep:run1:work' in line]
    check(len(drains) == 2 and drains[0][:20] == drains[1][:20] and works and all(w > drains[1] for w in works),
          'batch 2: both nodes drained by one scontrol update (same second), before any work', repr(drains + works))
    check(got.get(EL, {}).get('state') == 'busy' and got.get(EL, {}).get('jobs') == [job],
          '{0} reported busy with job {1}'.format(EL, job), repr(got.get(EL)))
    check('DRAIN' not in status(EL)['State'] and cleared(EL, 'nodeprep:run1:drain') and job_state(job) == 'RUNNING',
          '{0} resumed (State={1}), its job still RUNNING'.format(EL, status(EL)['State']), repr(status(EL)))
    check(ssh(EL, 'test -e /usr/bin/nvidia-smi && echo yes || echo no').strip() == 'no',
          '{0} not touched: no driver installed'.format(EL))
    check(got.get(UB, {}).get('state') == 'resumed', '{0} upgraded, verified, resumed'.format(UB), repr(got.get(UB)))
    check(status(UB)['State'] == 'IDLE' and cleared(UB, 'nodeprep:run1:verify') and status(UB)['BootTime'] != boot_ub,
          '{0} IDLE, no reason of ours in force, rebooted (BootTime {1} -> {2})'.format(
              UB, boot_ub, status(UB)['BootTime']), repr(status(UB).get('Reason')))
    check(marker(UB) == '' and marker(EL) == '', 'markers removed')
    check(lock_target() == '', 'run1 gave the cluster lock back')

    # 2b. busy=fail: the job still runs on el9; the run stops there and el9 stays drained with our reason.
    before = updates()
    rc, text = playbook('busy=fail', 'fail1', '-e', 'nodeprep_rolling_busy=fail', '-e',
                        'nodeprep_rolling_drain_timeout=20')
    st = status(EL)
    check(rc != 0 and 'still runs job(s) {0} after 20 s'.format(job) in text,
          'busy=fail: the run stops on {0} (job {1})'.format(EL, job), 'rc={0} '.format(rc) + text[-800:])
    check('DRAIN' in st['State'] and strip(st.get('Reason')) == 'nodeprep:fail1:drain' and job_state(job) == 'RUNNING',
          '{0} stays drained (State={1}, Reason={2}), its job RUNNING'.format(EL, st['State'], st.get('Reason')))
    check(not [u for u in updates()[len(before):] if ' node {0} '.format(UB) in u],
          '{0} (on target) untouched by fail1'.format(UB), repr(updates()[len(before):]))

    # 3. an admin takes el9 over (job cancelled, their drain and reason): skipped, reason kept, no scontrol update.
    head('scancel {0}'.format(job))
    head("scontrol update nodename={0} state=drain reason='admin: bad fan'".format(EL))
    wait_for('{0} drained'.format(EL), lambda: sinfo_states().get(EL) == 'drained')
    before = updates()
    rc, text = playbook('rolling run, an admin-drained node', 'run2')
    got = result('run2').get('nodes', {})
    check(rc == 0 and got.get(EL, {}).get('state') == 'skipped-held', '{0} skipped-held'.format(EL),
          repr(got.get(EL)))
    check(status(EL).get('Reason', '').startswith('admin: bad fan') and 'DRAIN' in status(EL)['State'],
          "{0} keeps the admin's reason: {1}".format(EL, status(EL).get('Reason')))
    check(updates() == before, 'run2: no scontrol update', repr(updates()[len(before):]))

    # 3b. include_held (with reboot=slurm): el9 worked on, rebooted by the roles (not by scontrol reboot), its
    # admin drain and reason kept, never resumed.
    rc, text = playbook('include_held, reboot timeout 600 s > SlurmdTimeout 300 s', 'held0', '--check', '-e',
                        'nodeprep_rolling_include_held=true', '-e', 'nodeprep_rolling_reboot=slurm')
    refused = rc != 0 and 'longer than SlurmdTimeout=300 s' in text and updates() == before
    if FLEET.version == '22.05':
        # 22.05 sets a drained node that reboots DOWN whatever the time (unexpectedly rebooted): nothing to refuse.
        check(not refused and rc == 0, '22.05: a held node rebooted by the roles for up to 600 s is not refused',
              text[-800:])
    else:
        check(refused, '{0}: a held node the roles would reboot for up to 600 s > SlurmdTimeout 300 s is refused '
              'before any change'.format(FLEET.version), text[-800:])
    boot_el = status(EL)['BootTime']
    lines_before = len(ctld_log())
    rc, text = playbook('include_held', 'held1', '-e', 'nodeprep_rolling_include_held=true',
                        '-e', 'nodeprep_rolling_reboot=slurm', '-e', 'nodeprep_kernel_reboot_timeout=300',
                        '-e', 'nodeprep_nvidia_driver_reboot_timeout=300', timeouts=False)
    got = result('held1').get('nodes', {})
    st = status(EL)
    check(rc == 0 and got.get(EL, {}).get('state') == 'done', '{0} (held) worked on: done'.format(EL),
          repr(got.get(EL)) + text[-1500:])
    version = driver_version(EL)
    check(version.startswith('580.') and st['BootTime'] != boot_el,
          '{0}: driver {1}, rebooted by the roles (BootTime {2} -> {3})'.format(EL, version, boot_el, st['BootTime']))
    check('DRAIN' in st['State'] and strip(st.get('Reason')) == 'admin: bad fan',
          "{0} keeps the admin's drain: State={1} Reason={2}".format(EL, st['State'], st.get('Reason')))
    check(updates() == before and first_line(ctld_log()[lines_before:], 'reboot request queued') is None,
          'held1: no scontrol update, no scontrol reboot', repr(updates()[len(before):]))

    # 4. the admin resumes el9; a branch move 580 -> 590 for el9 only; a job holds it; a run is killed after its
    # drain; a GPU fault (rows pending remapping); the rerun (reboot=slurm, busy=wait, drain timeout 10 s) waits for
    # the job past the timeout, has Slurm reboot the node, and the verification fails.
    head('scontrol update nodename={0} state=resume'.format(EL))
    wait_for('{0} idle'.format(EL), lambda: sinfo_states().get(EL) == 'idle')
    host_vars(EL, {'nodeprep_nvidia_driver_branch': '590'})
    job = submit(EL, 'short', 200)
    opts = ('-e', 'nodeprep_rolling_reboot=slurm', '-e', 'nodeprep_rolling_busy=wait',
            '-e', 'nodeprep_rolling_drain_timeout=10')
    t0 = time.time()
    proc, out = start_playbook('run3', *opts)
    drained = wait_for('{0} drained by run3'.format(EL),
                       lambda: status(EL).get('Reason', '').startswith('nodeprep:run3:drain'), timeout=300)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    out.close()
    timed('run3 until its drain, killed', t0)
    check(bool(drained), 'run3 drained {0}, then was killed'.format(EL))
    testbed('fault', EL, 'remapped-rows')
    boot_el = status(EL)['BootTime']
    lines_before = len(ctld_log())
    t0 = time.time()
    proc, out = start_playbook('run4', *opts)
    # The lock run3 left (its process killed) is taken over by run4; a second run is refused while run4 holds it.
    took = wait_for('run4 to take the cluster lock', lambda: lock_target().startswith('run4@'), timeout=300)
    check(bool(took), 'run4 took over the lock run3 left behind (its process gone): {0}'.format(lock_target()))
    before_lock = updates()
    rc, text = playbook('a second run while run4 holds the lock', 'lock1', *opts)
    check(rc != 0 and 'run run4 holds the lock of this cluster' in text and updates() == before_lock and
          lock_target().startswith('run4@'), 'a second run is refused naming run4, before any change',
          'rc={0} '.format(rc) + text[-800:])
    ended = wait_for('job {0} to end'.format(job), lambda: job_state(job) == '', timeout=400)
    waited = time.time() - t0
    check(bool(ended) and waited > 10 and proc.poll() is None and strip(reason(EL)) == 'nodeprep:run3:drain',
          'busy=wait: run4 still waiting on {0} {1:.0f} s after its start (drain timeout 10 s), the job ran to its '
          'end'.format(EL, waited), 'reason {0}, run4 rc {1}'.format(reason(EL), proc.poll()))
    proc.wait()
    out.close()
    timed('rerun after the kill (run4)', t0)
    with open(os.path.join(REPORT, 'run4.log')) as f:
        text = f.read()
    with open(os.path.join(REPORT, 'show-node-after-run4.txt'), 'w') as f:
        f.write(head('scontrol show node -o'))
    got = result('run4').get('nodes', {})
    log = ctld_log()[lines_before:]
    st = status(EL)
    check(proc.returncode == 0, 'run4 finished (1 node failed, nodeprep_rolling_max_failed 1)', text[-1500:])
    drains = [line for line in updates(EL) if 'reason set to: nodeprep:' in line and ':drain' in line]
    check(len([line for line in drains if 'run3' in line]) == 1 and not [line for line in drains if 'run4' in line],
          '{0} drained once (by run3), not again by run4'.format(EL), repr(drains))
    exited = first_line(log, 'JobId={0} WEXITSTATUS 0'.format(job))
    asked = first_line(log, 'reboot request queued for nodes {0}'.format(EL))
    check(exited is not None and asked is not None and exited < asked,
          'job {0} ended by itself (WEXITSTATUS 0) before Slurm was asked to reboot {1}'.format(job, EL),
          'exit line {0}, reboot line {1}'.format(exited, asked))
    check(asked is not None and first_line(log, 'node {0} returned to service'.format(EL)) is not None and
          st['BootTime'] != boot_el and driver_version(EL).startswith('590.'),
          '{0} rebooted by Slurm (reboot request queued, returned to service, BootTime {1} -> {2}), driver {3}'.format(
              EL, boot_el, st['BootTime'], driver_version(EL)), '\n'.join(log[-30:]))
    ours = strip(st.get('Reason'))
    check(got.get(EL, {}).get('state') == 'verify-failed'
          and 'gpu.remapped_rows' in got.get(EL, {}).get('failed_checks', [])
          and ours.startswith('nodeprep:run4:verify-failed:') and 'gpu.remapped_rows' in ours.split(':')[3].split(',')
          and st['State'].startswith('DOWN'),
          '{0} verify-failed, stays out of service: State={1} Reason={2}'.format(EL, st['State'], st.get('Reason')),
          repr(got.get(EL)))
    check(lock_target() == '', 'run4 gave the cluster lock back at its end')

    # 5. the failure limit: a rerun with max_failed 0 verifies el9 only, fails again and stops the run.
    before = updates()
    lines_before = len(ctld_log())
    rc, text = playbook('verify-failed again, nodeprep_rolling_max_failed 0', 'stop1', '-e',
                        'nodeprep_rolling_max_failed=0', '-e', 'nodeprep_rolling_reboot=slurm')
    new = updates()[len(before):]
    check(rc != 0 and 'more than nodeprep_rolling_max_failed (0): the run stops' in text,
          'stop1: 1 node failed > nodeprep_rolling_max_failed 0: the run stops', 'rc={0} '.format(rc) + text[-800:])
    check(all('reason set to: nodeprep:stop1:' in line for line in new) and
          first_line(ctld_log()[lines_before:], 'reboot request queued') is None and
          strip(reason(EL)).startswith('nodeprep:stop1:verify-failed:') and status(EL)['State'].startswith('DOWN'),
          '{0} verified only (reasons only, no drain, reboot or resume): {1}'.format(EL, reason(EL)), repr(new))

    # 6. healed: verify only, resumed.
    testbed('heal', EL, 'remapped-rows')
    rc, text = playbook('healed: verify only, resume', 'heal1')
    got = result('heal1').get('nodes', {})
    check(rc == 0 and got.get(EL, {}).get('state') == 'resumed' and status(EL)['State'] == 'IDLE' and
          cleared(EL, 'nodeprep:heal1:verify'), '{0} verified and resumed: IDLE, no reason of ours in force'.format(EL),
          repr(got.get(EL)) + repr(status(EL)) + text[-800:])
    check(marker(EL) == '' and marker(UB) == '', 'markers removed')

    # 8. the lost node: a driver branch move (590 -> 580) rebooted by the roles, the node off for 150 s
    # (slow-boot), SlurmdTimeout=60: slurmctld sets it DOWN while it is off ("Not responding", appended to our reason
    # from 23.02); the reason is still ours, so the run resumes it.
    check(bool(set_slurmd_timeout(60)), 'SlurmdTimeout=60 on the fleet (scontrol reconfigure)')
    testbed('fault', EL, 'slow-boot', '--value', '150')
    host_vars(EL, {'nodeprep_nvidia_driver_branch': '580'})
    boot_el = status(EL)['BootTime']
    lines_before = len(ctld_log())
    t0 = time.time()
    rc, text = playbook('branch move 590 -> 580, roles reboot of 150 s, SlurmdTimeout 60 s', 'slow1')
    log = ctld_log()[lines_before:]
    got = result('slow1').get('nodes', {})
    st = status(EL)
    with open(os.path.join(REPORT, 'boots-slow1.txt'), 'w') as f:
        f.write(open(os.path.join(FLEET.state_dir, 'nodes', EL, 'boots.log')).read())
    off = [line for line in open(os.path.join(FLEET.state_dir, 'nodes', EL, 'boots.log')) if ' off 150 s' in line]
    check(rc == 0 and bool(off) and time.time() - t0 > 150,
          'slow1 finished; {0} was off 150 s in its reboot'.format(EL), text[-1500:])
    check(first_line(log, 'Nodes {0} not responding, setting DOWN'.format(EL)) is not None,
          'slurmctld set {0} DOWN while it was off (Nodes ... not responding, setting DOWN)'.format(EL),
          '\n'.join(log[-30:]))
    check(got.get(EL, {}).get('state') == 'resumed' and st['State'] == 'IDLE' and st['BootTime'] != boot_el and
          driver_version(EL).startswith('580.') and cleared(EL, 'nodeprep:slow1:verify'),
          '{0} upgraded (driver {1}, BootTime {2} -> {3}), IDLE, resumed by the run'.format(
              EL, driver_version(EL), boot_el, st['BootTime']), repr(got.get(EL)) + repr(st))
    testbed('heal', EL, 'slow-boot')
    host_vars(EL)
    check(bool(set_slurmd_timeout(300)), 'SlurmdTimeout=300 again')

    # 7. on target: Slurm not asked, nothing to do; sinfo idle, readiness passes.
    before = updates()
    rc, text = playbook('rolling run on the upgraded fleet', 'run5')
    got = result('run5')
    check(rc == 0 and got.get('slurm_asked') is False and
          set(n['state'] for n in got.get('nodes', {}).values()) <= set(['on-target', 'in-place']),
          'run5: Slurm not asked, nothing to do', repr(got))
    check(updates() == before, 'run5: no scontrol update')
    check(sinfo_states() == {EL: 'idle', UB: 'idle'}, 'sinfo: both idle at the end', repr(sinfo_states()))
    rc, text = playbook('readiness', 'readiness', '-e', 'nodeprep_hosts=slurm_nodes',
                        '-e', 'nodeprep_readiness_report_dir=' + os.path.join(REPORT, 'readiness'),
                        playbook='readiness.yml')
    check(rc == 0, 'readiness passes on both nodes', text[-1500:])
    readiness_in_slurm()


def readiness(label, run_id, *extra):
    return playbook(label, run_id, '-e', 'nodeprep_hosts=slurm_nodes', '-e', 'nodeprep_readiness_fail=false',
                    '-e', 'nodeprep_readiness_report_dir=' + os.path.join(REPORT, run_id), *extra,
                    playbook='readiness.yml', timeouts=False)


def failed_in_report(run_id, node):
    """The ids of the checks that failed on ``node`` in the readiness report of run ``run_id``."""
    path = os.path.join(REPORT, run_id, 'report.json')
    if not os.path.exists(path):
        return []
    with open(path) as f:
        report = json.load(f)
    return [c['id'] for c in report.get('hosts', {}).get(node, {}).get('checks', []) if c.get('status') == 'fail']


def readiness_in_slurm():
    """9. Readiness's verdict in Slurm (nodeprep_readiness_slurm=drain): a faulty node drained with our health reason,
    an admin's reason kept, a healed node resumed, report mode changing nothing. The fault is remapped-rows (rows
    pending remapping: gpu.remapped_rows), which the readiness gather reads from nvidia-smi."""
    testbed('fault', EL, 'remapped-rows')
    before = updates()
    rc, text = readiness('readiness with rows pending remapping on el9, report (the default)', 'health0')
    failed = failed_in_report('health0', EL)
    check(rc == 0 and 'gpu.remapped_rows' in failed and not failed_in_report('health0', UB) and updates() == before and
          'DRAIN' not in status(EL)['State'],
          'nodeprep_readiness_slurm=report: {0} fails {1}, nothing changes in Slurm'.format(EL, ','.join(failed)),
          'rc={0} '.format(rc) + repr(updates()[len(before):]) + text[-600:])
    rc, text = readiness('readiness with rows pending remapping on el9, drain', 'health1',
                         '-e', 'nodeprep_readiness_slurm=drain')
    st = status(EL)
    want = 'nodeprep:health:' + ','.join(failed_in_report('health1', EL))
    check(rc == 0 and 'DRAIN' in st['State'] and strip(st.get('Reason')) == want and 'gpu.remapped_rows' in want,
          '{0} drained by the verdict: State={1} Reason={2}'.format(EL, st['State'], st.get('Reason')), text[-1500:])
    check(not [u for u in updates()[len(before):] if ' node {0} '.format(UB) in u] and
          'DRAIN' not in status(UB)['State'], '{0} (passing) untouched'.format(UB), repr(updates()[len(before):]))
    rc, text = readiness('a bad value', 'health-bad', '-e', 'nodeprep_readiness_slurm=yes')
    check(rc != 0 and 'nodeprep_readiness_slurm' in text and 'report, drain' in text,
          'nodeprep_readiness_slurm=yes is refused naming report, drain', text[-800:])
    # An admin drains ubuntu; it fails a check too: the admin's reason stays.
    head("scontrol update nodename={0} state=drain reason='admin: bad fan'".format(UB))
    testbed('fault', UB, 'remapped-rows')
    before = updates()
    rc, text = readiness('readiness, both failing, ubuntu drained by an admin', 'health2',
                         '-e', 'nodeprep_readiness_slurm=drain')
    st = status(UB)
    check(rc == 0 and 'gpu.remapped_rows' in failed_in_report('health2', UB) and 'DRAIN' in st['State'] and
          strip(st.get('Reason')) == 'admin: bad fan' and
          not [u for u in updates()[len(before):] if ' node {0} '.format(UB) in u],
          "{0} fails a check but keeps the admin's drain and reason: State={1} Reason={2}".format(
              UB, st['State'], st.get('Reason')), text[-1500:])
    check(strip(status(EL).get('Reason')) == want and updates() == before,
          '{0} still failing: stays drained, reason unchanged, no scontrol update'.format(EL),
          repr(updates()[len(before):]))
    # Healed: the next run resumes the node the verdict drained, and only that one.
    testbed('heal', EL)
    testbed('heal', UB)
    rc, text = readiness('readiness after make testbed-heal, drain', 'health3', '-e', 'nodeprep_readiness_slurm=drain')
    st = status(EL)
    check(rc == 0 and not failed_in_report('health3', EL) and st['State'] == 'IDLE' and cleared(EL, want),
          '{0} healed: resumed by the verdict, State={1}'.format(EL, st['State']), text[-1500:])
    st = status(UB)
    check('DRAIN' in st['State'] and strip(st.get('Reason')) == 'admin: bad fan',
          "{0} healed but drained by an admin: never resumed by the verdict (State={1})".format(UB, st['State']))
    head('scontrol update nodename={0} state=resume'.format(UB))
    check(bool(wait_for('{0} idle'.format(UB), lambda: sinfo_states().get(UB) == 'idle')),
          'the admin resumes {0}'.format(UB))


def reason(node):
    return status(node).get('Reason', '')


def main():
    return FLEET.main(scenario, 'rolling-fleet', down=not REUSE, before_down=lambda: host_vars(EL))


if __name__ == '__main__':
    sys.exit(main())
