# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the fleet scenarios share (make slurm-fleet, memlock-fleet, rolling-fleet, imex-fleet, sliced-fleet,
hung-fleet, and tests/testbed/slurm_captures.py): the fleet's identity and environment, reporting (say, check, timed,
the closing summary), testbed.py, SSH into a node, waiting for a state, ansible-playbook and its recap.

One copy of each; what differs between the scenarios is a parameter. A scenario holds its own checks and imports
this module, never another scenario. Controller side only (Python 3 of the virtualenv); root, from the repository
root.
"""

from __future__ import absolute_import, division, print_function

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PLAYBOOKS = os.path.join(REPO, 'playbooks')
# The Python that runs a scenario (make: the virtualenv's) has ansible-playbook beside it.
VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))
TESTBED = [sys.executable, os.path.join(HERE, 'testbed.py')]
sys.path.insert(0, HERE)
import slurmconf  # noqa: E402
# Settings of `testbed.py up` that must not reach a fleet of a scenario's own from the caller's shell.
LEAKS = ('TESTBED_SLURM', 'TESTBED_KINDS', 'NODES')
SLURM_LEAKS = LEAKS + ('TESTBED_SLURM_RETURN_TO_SERVICE', 'TESTBED_SLURMD_TIMEOUT')
IMEX_LEAKS = ('TESTBED_SLURM', 'TESTBED_KINDS', 'TESTBED_IMEX', 'NODES')
_RECAP = re.compile(r'^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$')


def identity(variable, prefix, subnet, state_dir):
    """(prefix, subnet, state dir) of a fleet: <variable>_PREFIX, _SUBNET and _DIR of the environment, else the
    scenario's defaults (state_dir relative to the repository root)."""
    return (os.environ.get(variable + '_PREFIX') or prefix, os.environ.get(variable + '_SUBNET') or subnet,
            os.environ.get(variable + '_DIR') or os.path.join(REPO, state_dir))


def recap(text):
    """host -> {ok, changed, unreachable, failed, skipped, rescued, ignored} from ansible-playbook's PLAY RECAP."""
    out = {}
    for line in text.splitlines():
        match = _RECAP.match(line.strip())
        if match:
            out[match.group(1)] = dict((k, int(v)) for k, v in re.findall(r'(\w+)=(\d+)', match.group(2)))
    return out


def stop_masters(folder):
    """Close the ssh master connections left in ``folder`` (ssh -O exit on each control socket), then remove it."""
    for socket in glob.glob(os.path.join(folder, '*')):
        subprocess.run(['ssh', '-o', 'ControlPath=' + socket, '-O', 'exit', 'x'], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    shutil.rmtree(folder, ignore_errors=True)


def inventory_hosts(inventory):
    """Every host of a YAML inventory (testbed's: groups with hosts and children), in the order met."""
    found = []

    def walk(group):
        for name in (group or {}).get('hosts') or {}:
            if name not in found:
                found.append(name)
        for child in ((group or {}).get('children') or {}).values():
            walk(child)
    walk(inventory.get('all'))
    return found


class Fleet(object):
    """A simulated fleet of a scenario's own and the scenario's record of checks and times.

    ``name`` starts every line the scenario prints; ``prefix``, ``subnet``, ``state_dir``: its TESTBED_PREFIX,
    TESTBED_SUBNET and TESTBED_DIR; ``leaks``: variables removed from the environment of testbed.py and
    ansible-playbook; ``addresses``: node -> address for :meth:`ssh`; ``wait`` and ``interval``: the default
    seconds of :meth:`wait_for`; ``reraise``: whether :meth:`wait_for` stops at a failed command other than an SSH
    connection refused (rc 255); ``echo_times``: whether :meth:`timed` also prints the step's seconds.
    """

    def __init__(self, name, prefix, subnet, state_dir, leaks=LEAKS, addresses=None, wait=150, interval=1.0,
                 reraise=True, echo_times=False):
        self.name, self.prefix, self.subnet, self.state_dir = name, prefix, subnet, state_dir
        self.inventory = os.path.join(state_dir, 'inventory.yml')
        self.env = dict(os.environ, TESTBED_PREFIX=prefix, TESTBED_SUBNET=subnet, TESTBED_DIR=state_dir, LC_ALL='C')
        for leak in leaks:
            self.env.pop(leak, None)
        self.addresses = dict(addresses or {})
        self.wait, self.interval, self.reraise, self.echo_times = wait, interval, reraise, echo_times
        self.times = []
        self.failed = []
        self.control_dirs = []

    # ---------------------------------------------------------------------------------------- reporting

    def say(self, msg):
        sys.stdout.write('{0}: {1}\n'.format(self.name, msg))
        sys.stdout.flush()

    def check(self, ok, what, detail=''):
        self.say('{0} {1}{2}'.format('PASS' if ok else 'FAIL', what, '' if ok or not detail else ': ' + detail))
        if not ok:
            self.failed.append(what)
        return ok

    def timed(self, label, start):
        self.times.append((label, time.time() - start))
        if self.echo_times:
            self.say('{0}: {1:.0f} s'.format(label, time.time() - start))

    def finish(self):
        """Every step's time, then the failed checks: the exit code (0 when every check passed, else 1)."""
        for label, seconds in self.times:
            self.say('time: {0:6.1f} s  {1}'.format(seconds, label))
        if self.failed:
            self.say('{0} check(s) failed: {1}'.format(len(self.failed), '; '.join(self.failed)))
            return 1
        self.say('all checks passed')
        return 0

    def main(self, scenario, title, down=True, before_down=None, refuse=None, down_what='testbed.py down',
             time_down=False):
        """A scenario's main(): as root only (else 2), ``refuse()`` (a reason to stop before anything, else None:
        2), the scenario (an exception is a failed check), ``before_down()``, the fleet taken down (when ``down``),
        then :meth:`finish`."""
        if os.geteuid() != 0:
            self.say('needs root (the simulated fleet)')
            return 2
        reason = refuse() if refuse else None
        if reason:
            self.say(reason)
            return 2
        t0 = time.time()
        try:
            scenario()
        except Exception as exc:      # report, then take the fleet down
            self.check(False, 'scenario raised {0}'.format(type(exc).__name__), str(exc)[-1500:])
        finally:
            if before_down:
                before_down()
            if down:
                t1 = time.time()
                proc = self.testbed('down')
                if time_down:
                    self.timed('testbed.py down', t1)
                self.check(proc.returncode == 0, down_what)
        self.timed('make {0} in all'.format(title), t0)
        return self.finish()

    # ---------------------------------------------------------------------------------------- the fleet

    def fresh_up(self, up, what, timed_as=None, down_what='testbed.py down before up (fresh nodes)'):
        """Fresh nodes: the fleet taken down (its nodes' disks go), then ``up()`` (the finished testbed.py process),
        each a check (``down_what``, ``what``), both timed as ``timed_as`` (else ``what``). True when both worked."""
        t0 = time.time()
        if not self.check(self.testbed('down').returncode == 0, down_what):
            return False
        proc = up()
        self.timed(timed_as or what, t0)
        return self.check(proc.returncode == 0, what)

    def testbed(self, *argv, **kw):
        """testbed.py with the fleet's identity; ``check=True`` raises when it fails. The finished process."""
        return subprocess.run(TESTBED + list(argv), env=self.env, check=kw.get('check', False), cwd=REPO)

    def testbed_ok(self, *argv, **kw):
        """testbed.py as a check (``what``: its text, else the command line)."""
        proc = self.testbed(*argv)
        return self.check(proc.returncode == 0, kw.get('what') or 'testbed.py ' + ' '.join(argv))

    def ssh(self, node, command, check_rc=True, timeout=60):
        """``command`` run by root in ``node``: its stdout; RuntimeError naming the node when it fails (check_rc)."""
        argv = ['ssh', '-i', os.path.join(self.state_dir, 'ssh', 'id_ed25519'), '-o', 'StrictHostKeyChecking=no',
                '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', '-o', 'BatchMode=yes',
                '-o', 'ConnectTimeout=3', 'root@' + self.addresses[node], command]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, check=False)
        if check_rc and proc.returncode != 0:
            raise RuntimeError('{0}: {1!r} failed (rc={2}): {3}{4}'.format(
                node, command, proc.returncode, proc.stdout, proc.stderr))
        return proc.stdout

    def wait_for(self, what, probe, timeout=None, interval=None):
        """Poll probe() until it returns a true value; that value, or None after timeout (the last one is reported).
        A command that timed out, or that failed (unless ``reraise``: then only SSH's rc 255), is polled again."""
        timeout = self.wait if timeout is None else timeout
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                last = probe()
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                last = exc
                if self.reraise and not isinstance(exc, subprocess.TimeoutExpired) and 'rc=255' not in str(exc):
                    raise
            if last and not isinstance(last, Exception):
                return last
            time.sleep(self.interval if interval is None else interval)
        self.say('timed out after {0} s waiting for {1}; last: {2!r}'.format(timeout, what, last))
        return None

    # ---------------------------------------------------------------------------------------- ansible-playbook

    def playbook_env(self, control_dir=None, record=None):
        """The environment of ansible-playbook (and of ansible-runner): this checkout's collection; ``control_dir``:
        an ssh control path directory of its own (a run that connects cold); ``record``: molecule's recording
        callback writes there (molecule/default/compare_runs.py reads it)."""
        purelib = sysconfig.get_paths()['purelib']
        env = dict(self.env, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.tmp', 'collections') + ':' + purelib,
                   ANSIBLE_COLLECTIONS_SCAN_SYS_PATH='false', ANSIBLE_NOCOLOR='1', LC_ALL='C.UTF-8',
                   PATH=VENV_BIN + ':' + self.env.get('PATH', ''))
        if control_dir:
            os.makedirs(control_dir, exist_ok=True)
            env['ANSIBLE_SSH_CONTROL_PATH_DIR'] = control_dir
        if record:
            env.update(NODEPREP_RECORD_DIR=record, ANSIBLE_CALLBACKS_ENABLED='nodeprep_record',
                       ANSIBLE_CALLBACK_PLUGINS=os.path.join(REPO, 'molecule', 'default', 'callback_plugins'))
        return env

    def playbook_argv(self, playbook, *extra, **kw):
        """ansible-playbook -i <the fleet's inventory, or ``inventory``> playbooks/<playbook> <extra>."""
        return [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', kw.get('inventory') or self.inventory,
                os.path.join(PLAYBOOKS, playbook)] + list(extra)

    def playbook(self, log, playbook, *extra, **kw):
        """Run ansible-playbook (:meth:`playbook_argv`, :meth:`playbook_env` with ``control_dir`` and ``record``),
        its output in the file ``log``: (rc, output, seconds)."""
        os.makedirs(os.path.dirname(log), exist_ok=True)
        env = self.playbook_env(kw.get('control_dir'), kw.get('record'))
        start = time.time()
        with open(log, 'w') as out:
            proc = subprocess.run(self.playbook_argv(playbook, *extra, inventory=kw.get('inventory')), env=env,
                                  stdout=out, stderr=subprocess.STDOUT, check=False, cwd=REPO)
        seconds = time.time() - start
        with open(log) as f:
            return proc.returncode, f.read(), seconds

    def control_dir(self, label):
        """A fresh, short ssh control path directory (a socket path must stay under 108 bytes), closed by
        :meth:`cleanup`."""
        short = re.sub(r'[^a-z0-9]+', '', label)
        path = os.path.join('/tmp', '{0}-cp-{1}-{2}'.format(self.prefix, os.getpid(), short))
        shutil.rmtree(path, ignore_errors=True)
        self.control_dirs.append(path)
        return path

    def cleanup(self):
        """What the runs left on the controller: their ssh master connections and control path directories."""
        for folder in self.control_dirs:
            stop_masters(folder)


class SlurmFleet(Fleet):
    """The Slurm fleet (head + el9-b200-01 + ubuntu2404-h200-01) of make slurm-fleet, memlock-fleet and
    rolling-fleet: addresses and the Slurm version from testbed.py's own plan; the head's view of the nodes."""

    KINDS = 'el9-b200,ubuntu2404-h200'
    EL, UBUNTU, HEAD = 'el9-b200-01', 'ubuntu2404-h200-01', 'slurm-head'

    def __init__(self, name, prefix, subnet, state_dir, **kw):
        kw.setdefault('leaks', SLURM_LEAKS)
        kw.setdefault('wait', int(os.environ.get('SLURM_FLEET_WAIT') or 150))
        super(SlurmFleet, self).__init__(name, prefix, subnet, state_dir, **kw)
        os.environ.update(TESTBED_PREFIX=prefix, TESTBED_SUBNET=subnet, TESTBED_DIR=state_dir)
        import testbed   # noqa: E402  (reads the prefix, subnet and state dir when imported)
        self.addresses = dict((n['name'], n['node_ip']) for n in testbed.plan_fleet(2, kinds=self.KINDS, slurm=True))
        self.version = testbed.slurm_version()
        # Slurm >= 23.11 with no accounting storage (the fleet has none) keeps a node's reason when it returns to
        # service: clusteracct_storage_g_node_up(), which clears it, returns first for the no-op plugin (commit
        # 332d015ef3).
        self.keeps_reason = self.version != '22.05'

    def up(self):
        """testbed.py up --slurm: the head and the two GPU nodes, until SSH answers. The finished process."""
        return self.testbed('up', '--nodes', '2', '--slurm', '--kinds', self.KINDS)

    def head(self, command):
        return self.ssh(self.HEAD, command)

    def nodes(self):
        """scontrol show node -o, parsed: {node: {key: value}}."""
        return slurmconf.parse_nodes(self.head('scontrol show node -o'))

    def sinfo_states(self):
        out = self.head("sinfo -h -N -o '%N %T'")
        return dict(line.split()[:2] for line in out.splitlines() if line.strip())


class ConvergedFleet(Fleet):
    """The fleet of make sliced-fleet and hung-fleet (SLICED_FLEET_PREFIX, _SUBNET, _DIR, _NODES; SLICED_FLEET_REUSE=1
    uses a fleet already up and leaves it up), converged by site.yml; each scenario's logs under ``work``."""

    def __init__(self, name, work):
        prefix, subnet, state_dir = identity('SLICED_FLEET', 'npsf', '10.237', '.testbed-sliced')
        super(ConvergedFleet, self).__init__(name, prefix, subnet, state_dir, echo_times=True)
        self.nodes = int(os.environ.get('SLICED_FLEET_NODES') or 4)
        self.reuse = os.environ.get('SLICED_FLEET_REUSE') == '1'
        self.work = work

    def ansible_playbook(self, label, playbook, *extra, **kw):
        """ansible-playbook, its output in <work>/logs/<label>.log, connecting cold (a control path directory of its
        own) unless ``control`` names one: (rc, output, seconds)."""
        log = os.path.join(self.work, 'logs', re.sub(r'[^A-Za-z0-9_.-]+', '_', label) + '.log')
        return self.playbook(log, playbook, *extra, inventory=kw.get('inventory'),
                             control_dir=kw.get('control') or self.control_dir(label))

    def hosts(self):
        """The inventory's hosts ([] before the fleet wrote one)."""
        if not os.path.exists(self.inventory):
            return []
        import yaml  # noqa: E402  (the virtualenv's)
        with open(self.inventory) as f:
            return inventory_hosts(yaml.safe_load(f))

    def up(self):
        """The fleet up (taken down first unless reused), then site.yml until a run changes nothing (3 runs at
        most)."""
        start = time.time()
        if not self.reuse:
            self.testbed('down')
        self.testbed('up', '--nodes', str(self.nodes), check=True)
        self.timed('fleet up ({0} nodes)'.format(self.nodes), start)
        start = time.time()
        for attempt in range(1, 4):
            rc, out, seconds = self.ansible_playbook('converge-{0}'.format(attempt), 'site.yml')
            hosts = recap(out)
            self.say('converge run {0}: rc {1}, {2:.0f} s, changed {3}'.format(
                attempt, rc, seconds, dict((h, v.get('changed')) for h, v in hosts.items())))
            if rc == 0 and hosts and all(v.get('changed') == 0 for v in hosts.values()):
                break
        else:
            raise RuntimeError('the fleet did not converge after 3 runs of site.yml (see {0}/logs)'.format(self.work))
        self.timed('converge (until a run changes nothing)', start)

    def teardown(self):
        """Every node healed, the runs' ssh masters closed, the fleet down (unless reused)."""
        for name in self.hosts():
            self.testbed('heal', name)
        self.cleanup()
        if not self.reuse:
            self.testbed('down')

    def run(self, title, scenario, report):
        """A converged-fleet scenario's main(): as root only, the fleet up and converged, the scenario (an exception
        is a failure), every node healed and the fleet down whatever happened, then ``report(started)`` prints the
        closing lines. The exit code: 0 when every check passed, else 1."""
        if os.geteuid() != 0:
            sys.exit('{0}: run as root (the simulated fleet needs it)'.format(title))
        started = time.time()
        os.makedirs(self.work, exist_ok=True)
        code = 1
        try:
            self.up()
            scenario()
            code = 1 if self.failed else 0
        except Exception as exc:  # the fleet is taken down whatever happened
            self.say('ERROR: {0}'.format(exc))
            self.failed.append(str(exc))
        finally:
            self.teardown()
            report(started)
        return code
